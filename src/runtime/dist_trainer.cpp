// One rank of distributed training. See dist_trainer.h.
#include "runtime/dist_trainer.h"

#include <sys/resource.h>

#include <chrono>
#include <cmath>

#include "core/error.h"
#include "runtime/emulation.h"
#include "train/checkpoint.h"
#include "train/optimizer.h"

namespace eth {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Tags of checkpoint transfers, above the pipeline's activation and gradient tags.
constexpr int kCheckpointTagBase = 20000;

TrainConfig with_plan_shape(TrainConfig t, const Plan& plan) {
  if (t.global_batch == 0) t.global_batch = plan.gbs;
  if (t.seq_len == 0) t.seq_len = plan.seq_len;
  ETH_CHECK(t.global_batch == plan.gbs, "the run's global batch is not the plan's");
  ETH_CHECK(t.model == plan.model, "the run's model is not the plan's");
  t.micro_batch = 1;
  return t;
}

const StagePlan& stage_of(const Plan& plan, const RankPlace& p) {
  return plan.pipelines[static_cast<std::size_t>(p.pipeline)]
      .stages[static_cast<std::size_t>(p.stage)];
}

// Sum of squares of the unit's elements this rank speaks for: its rows of the sharded tensors,
// and the replicated ones on tp rank 0 only (the others hold the same values).
double owned_sum_squares(const ParamLayout& layout, const UnitSlot& u, const float* grads) {
  if (layout.tp_rank() == 0) return sum_squares(grads + u.offset, u.numel);
  double sq = 0;
  for (const TensorSlot& t : u.tensors) {
    if (t.desc.split == TpSplit::Sharded) {
      sq += sum_squares(grads + u.offset + t.offset, t.desc.numel());
    }
  }
  return sq;
}

}  // namespace

DistributedTrainer::DistributedTrainer(const DistTrainConfig& cfg, const Communicator& world,
                                       const std::optional<std::filesystem::path>& resume)
    : cfg_([&] {
        DistTrainConfig c = cfg;
        c.train = with_plan_shape(cfg.train, cfg.plan);
        return c;
      }()),
      world_(world),
      place_(place_ranks(cfg_.plan)[static_cast<std::size_t>(world.rank())]),
      seq_len_(resolve_seq_len(cfg_.train)),
      data_(open_training_data(cfg_.train)),
      sampler_(training_sampler_config(cfg_.train, seq_len_, data_.size())),
      state_(cfg_.plan.model, stage_of(cfg_.plan, place_).first_unit,
             stage_of(cfg_.plan, place_).last_unit, stage_of(cfg_.plan, place_).tp,
             place_.tp_rank, cfg_.train.precision) {
  if (cfg_.train.steps < 1) throw InputError("train", "--steps", "", "expected >= 1");
  const StagePlan& st = stage_of(cfg_.plan, place_);
  // The tp group of this rank's stage replica, created once, before the gradient groups, by
  // every rank (a split of the world; tp 1 ranks join none). Its colour is the group's first
  // device id, unique in the plan.
  const Communicator tp_comm = world_.split(
      st.tp > 1 ? static_cast<int>(stage_device(st, place_.dp_rank, 0)) : -1,
      static_cast<int>(place_.tp_rank));
  if (!tp_comm.is_null()) tp_group_ = std::make_unique<CommTpGroup>(tp_comm);
  if (auto it = cfg_.slowdown.find(st.device_type); it != cfg_.slowdown.end()) {
    slowdown_ = it->second;
  }
  StageRunnerConfig rc;
  rc.seq_len = seq_len_;
  rc.precision = cfg_.train.precision;
  rc.dropout = cfg_.train.dropout;
  rc.seed = cfg_.train.seed;
  rc.slowdown = slowdown_;
  rc.trace = cfg_.trace;
  runner_ = std::make_unique<StageRunner>(cfg_.plan, place_, world_, rc, tp_group_.get());
  sync_ = std::make_unique<GradSync>(cfg_.plan, cfg_.aggregation, world_, state_.layout(),
                                     tp_comm);
  sync_->set_trace(cfg_.trace);
  for (const StagePlan& other : cfg_.plan.pipelines.front().stages) {
    for (std::int64_t u = other.first_unit; u <= other.last_unit; ++u) {
      owner_stages_.push_back(&other);
    }
  }
  ETH_CHECK(static_cast<std::int64_t>(owner_stages_.size()) == cfg_.plan.model.num_units(),
            "pipeline 0 must cover every unit once");
  if (resume) {
    const CheckpointMeta meta = load_checkpoint(*resume, state_);
    CheckpointMeta want = make_meta();
    check_resume(*resume, meta, want);
    next_step_ = meta.step;
  } else {
    state_.init(cfg_.train.seed);
  }
}

DistributedTrainer::~DistributedTrainer() = default;

const StagePlan& DistributedTrainer::owner_stage(std::int64_t unit) const {
  return *owner_stages_[static_cast<std::size_t>(unit)];
}

bool DistributedTrainer::owns(std::int64_t unit) const {
  return place_.pipeline == 0 && place_.dp_rank == 0 &&
         &owner_stage(unit) == &stage_of(cfg_.plan, place_);
}

StepStats DistributedTrainer::step() {
  ETH_CHECK(!done(), "DistributedTrainer::step past the last step");
  TraceStep traced(cfg_.trace, next_step_);
  const auto t0 = Clock::now();
  times_ = RankTimes{};
  StepStats s;
  s.step = next_step_;
  const std::vector<SampleRef> batch = sampler_.batch(next_step_);
  StepInput in;
  in.step = next_step_;
  in.batch = batch;
  in.tokens = data_.tokens();
  in.loss_scale = 1.0 / static_cast<double>(cfg_.plan.gbs * seq_len_);
  state_.zero_grads();
  if (tp_group_) tp_group_->reset();
  double loss = runner_->run(state_, in, times_, sync_.get());
  if (tp_group_) tp_stats_ = tp_group_->stats();

  const auto t_sync = Clock::now();
  TraceScope sync_trace(cfg_.trace, TraceKind::Sync);
  sync_->start(state_.grads());  // what the last backward did not post (or all, without one)
  sync_->finish(state_.grads());
  sync_trace.end();
  times_.sync_s = since(t_sync);

  const auto t_opt = Clock::now();
  // The loss of the global batch and the squared norm of every unit, each element counted once
  // (by its owners: the tp ranks of pipeline 0's replica 0), units added in unit order: the
  // single-process order. Every tp rank computed the same loss; rank 0 of each group counts it.
  const std::int64_t U = cfg_.plan.model.num_units();
  std::vector<double> sums(static_cast<std::size_t>(U + 1), 0.0);
  TraceScope norm_trace(cfg_.trace, TraceKind::Optimizer);
  for (const UnitSlot& u : state_.layout().units()) {
    if (owns(u.unit)) {
      sums[static_cast<std::size_t>(u.unit)] =
          owned_sum_squares(state_.layout(), u, state_.grads());
    }
  }
  sums[static_cast<std::size_t>(U)] = place_.tp_rank == 0 ? loss : 0.0;
  norm_trace.end();
  const auto t_reduce = Clock::now();  // waits for every rank: counted as sync, not optimizer
  TraceScope reduce_trace(cfg_.trace, TraceKind::Sync);
  world_.allreduce_sum(std::span<double>(sums));
  reduce_trace.end();
  const double reduce_s = since(t_reduce);
  times_.sync_s += reduce_s;
  double squares = 0;
  for (std::int64_t u = 0; u < U; ++u) squares += sums[static_cast<std::size_t>(u)];
  s.loss = sums[static_cast<std::size_t>(U)];
  s.grad_norm = std::sqrt(squares);
  s.lr = cfg_.train.lr.at(next_step_);
  TraceScope update_trace(cfg_.trace, TraceKind::Optimizer);
  EmulatedOp update(slowdown_, cfg_.trace);  // emulation stretches the optimizer as every op
  adamw_update(state_, cfg_.train.adamw, s.lr, next_step_,
               clip_factor(s.grad_norm, cfg_.train.adamw.grad_clip));
  update.finish();
  times_.optimizer_s = since(t_opt) - reduce_s;
  ++next_step_;
  s.seconds = since(t0);
  times_.step_s = s.seconds;
  s.tokens_per_s = static_cast<double>(tokens_per_step()) / std::max(s.seconds, 1e-9);
  return s;
}

std::vector<RankTimes> DistributedTrainer::gather_times() const {
  const std::vector<double> mine{times_.compute_s, times_.wait_s, times_.sync_s,
                                 times_.optimizer_s, times_.step_s};
  const std::vector<double> all = world_.gather(mine);
  std::vector<RankTimes> out;
  for (std::size_t i = 0; i + 5 <= all.size(); i += 5) {
    out.push_back(RankTimes{all[i], all[i + 1], all[i + 2], all[i + 3], all[i + 4]});
  }
  return out;
}

RankMemory DistributedTrainer::memory() const {
  RankMemory m;
  const ModelState::RoleBytes state = state_.role_bytes();
  m.weights = state.weights;
  m.gradients = state.gradients;
  m.optimizer_state = state.optimizer_state;
  m.activations = static_cast<double>(runner_->compute().arena_bytes_total());
  m.buffers = runner_->message_buffer_bytes() + sync_->bytes();
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  m.peak_rss = static_cast<double>(ru.ru_maxrss) * 1024.0;
  return m;
}

std::vector<RankMemory> DistributedTrainer::gather_memory() const {
  const RankMemory me = memory();
  const std::vector<double> mine{me.weights,     me.gradients, me.optimizer_state,
                                 me.activations, me.buffers,   me.peak_rss};
  const std::vector<double> all = world_.gather(mine);
  std::vector<RankMemory> out;
  for (std::size_t i = 0; i + 6 <= all.size(); i += 6) {
    out.push_back(RankMemory{all[i], all[i + 1], all[i + 2], all[i + 3], all[i + 4], all[i + 5]});
  }
  return out;
}

CheckpointMeta DistributedTrainer::make_meta() const {
  return training_meta(cfg_.train, seq_len_, data_.size(), next_step_);
}

std::filesystem::path DistributedTrainer::save_checkpoint(const std::filesystem::path& dir) {
  const std::int64_t U = cfg_.plan.model.num_units();
  ETH_CHECK(kCheckpointTagBase + 3 * U <= Communicator::kMaxTag, "too many units for the tags");
  const std::filesystem::path path = checkpoint_path(dir, next_step_);
  const int me = world_.rank();
  // Owners send (parameters, Adam m, Adam v) of their shard of each unit they own to rank 0.
  std::vector<Request> sends;
  for (const UnitSlot& u : state_.layout().units()) {
    if (me == 0 || !owns(u.unit)) continue;
    const auto n = static_cast<std::size_t>(u.numel);
    const int tag = kCheckpointTagBase + 3 * static_cast<int>(u.unit);
    sends.push_back(world_.isend(std::span<const float>(state_.params() + u.offset, n), 0, tag));
    sends.push_back(world_.isend(std::span<const float>(state_.adam_m() + u.offset, n), 0, tag + 1));
    sends.push_back(world_.isend(std::span<const float>(state_.adam_v() + u.offset, n), 0, tag + 2));
  }
  if (me == 0) {
    ModelState full(cfg_.plan.model, 0, U - 1);
    std::vector<float> shard[3];
    for (const UnitSlot& u : full.layout().units()) {
      const StagePlan& st = owner_stage(u.unit);
      float* dst[3] = {full.params() + u.offset, full.adam_m() + u.offset,
                       full.adam_v() + u.offset};
      for (std::int64_t k = 0; k < st.tp; ++k) {
        // Tp rank k's shard of the unit, laid out as that rank holds it.
        const ParamLayout part(cfg_.plan.model, u.unit, u.unit, st.tp, k);
        const UnitSlot& ps = part.unit(u.unit);
        const auto n = static_cast<std::size_t>(ps.numel);
        const int owner = rank_of_device(cfg_.plan, stage_device(st, 0, k));
        const int tag = kCheckpointTagBase + 3 * static_cast<int>(u.unit);
        for (int p = 0; p < 3; ++p) {
          shard[p].resize(n);
          if (owner == 0) {
            const float* mine[3] = {state_.params(), state_.adam_m(), state_.adam_v()};
            std::copy_n(mine[p] + state_.layout().unit(u.unit).offset, n, shard[p].data());
          } else {
            world_.recv(std::span<float>(shard[p]), owner, tag + p);
          }
        }
        // Its rows of each tensor go to their place in the whole tensor.
        for (std::size_t i = 0; i < ps.tensors.size(); ++i) {
          const TensorSlot& from = ps.tensors[i];
          const std::int64_t at = u.tensors[i].offset + from.rows.begin * from.row_size();
          for (int p = 0; p < 3; ++p) {
            std::copy_n(shard[p].data() + from.offset, from.desc.numel(), dst[p] + at);
          }
        }
      }
    }
    write_checkpoint(path, full, make_meta());
  }
  wait_all(sends);
  world_.barrier();  // the file exists on every rank's return
  return path;
}

}  // namespace eth
