// One rank of distributed training. See dist_trainer.h.
#include "runtime/dist_trainer.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/error.h"
#include "runtime/emulation.h"
#include "train/checkpoint.h"
#include "train/init_from.h"
#include "train/optimizer.h"
#include "train/state_backend.h"

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

// One unit's parameters (or Adam moments) of `buf`, a buffer of `state` laid out by its layout,
// in the unit-major order of ParamLayout(model, u, u, tp, tp_rank): what the checkpoint gather
// sends. Read through the state's backend (a download on a GPU set).
std::vector<float> unit_major(const ModelState& state, const float* buf, std::int64_t u) {
  const UnitSlot& unit = state.layout().unit(u);
  std::vector<float> out(static_cast<std::size_t>(unit.numel));
  float* at = out.data();
  for (const TensorSlot& t : unit.tensors) {
    state.backend().download(at, buf + t.offset, t.desc.numel());
    at += t.desc.numel();
  }
  ETH_CHECK(at == out.data() + out.size(), "a unit's tensors do not add up to its size");
  return out;
}

// The state's backend on the run's device, refused (InputError) before anything is allocated.
MakeStateBackend checked_state_backend(const TrainConfig& t) {
  const std::string why = compute_device_refusal(t.device, t.precision);
  if (!why.empty()) {
    const bool precision = is_gpu_device(t.device) && t.precision != Precision::Bf16;
    throw InputError("train", precision ? "--precision" : "--device", "", why);
  }
  return state_backend_maker(t.device);
}

// The runs of block `b` that `device` (an owner holding it) counts in the gradient norm: all of
// them, except that a tied matrix (held by the embedding's and the head's owners) is counted by
// the embedding's alone, so it counts once.
std::vector<PackRun> norm_runs(const Plan& plan, const ParamLayout& layout, std::int64_t device,
                               const GradBlock& b) {
  const bool tied = std::any_of(b.pieces.begin(), b.pieces.end(),
                                [](const GradPiece& p) { return p.part == GradPart::Tied; });
  if (!tied) return collective_runs(plan, layout, device, b);
  std::vector<PackRun> runs;
  for (const GradPiece& p : b.pieces) {
    if (p.part == GradPart::Tied && layout.first_unit() != 0) continue;
    for (const PackRun& r : piece_runs(plan.model, layout, p)) {
      if (!runs.empty() && runs.back().offset + runs.back().count == r.offset) {
        runs.back().count += r.count;
      } else {
        runs.push_back(r);
      }
    }
  }
  return runs;
}

}  // namespace

DistributedTrainer::DistributedTrainer(const DistTrainConfig& cfg, const Communicator& world,
                                       const std::optional<std::filesystem::path>& resume)
    : DistributedTrainer(cfg, world, world, resume) {}

DistributedTrainer::DistributedTrainer(const DistTrainConfig& cfg, const Communicator& world,
                                       const Communicator& device_world,
                                       const std::optional<std::filesystem::path>& resume)
    : cfg_([&] {
        DistTrainConfig c = cfg;
        c.train = with_plan_shape(cfg.train, cfg.plan);
        return c;
      }()),
      world_(world),
      device_world_(device_world),
      place_(place_ranks(cfg_.plan)[static_cast<std::size_t>(world.rank())]),
      seq_len_(resolve_seq_len(cfg_.train)),
      data_(open_training_data(cfg_.train)),
      sampler_(training_sampler_config(cfg_.train, seq_len_, data_.size())),
      state_([&] {
        ParamLayout layout = plan_layout(cfg_.plan, place_.device, cfg_.aggregation);
        const MakeStateBackend backend = checked_state_backend(cfg_.train);
        if (cfg_.plan.optimizer_sharding == OptimizerSharding::None) {
          return ModelState(cfg_.plan.model, std::move(layout), cfg_.train.precision, backend);
        }
        check_sharding_runnable(cfg_.plan, "--plan");
        // The sharded optimizer's collectives and shards are host buffers so far.
        if (is_gpu_device(cfg_.train.device)) {
          throw InputError("train", "--device", "",
                           "a plan with optimizer_sharding trains on --device cpu only so far");
        }
        return ModelState(cfg_.plan.model, std::move(layout), cfg_.train.precision,
                          OptimizerShard{shard_numel(cfg_.plan, place_.device)}, backend);
      }()) {
  if (cfg_.train.steps < 1) throw InputError("train", "--steps", "", "expected >= 1");
  // The programs, refused before any collective when they cannot run as written.
  schedules_ = cfg_.schedules.empty() ? lower_plan(cfg_.plan, cfg_.aggregation) : cfg_.schedules;
  cfg_.schedules.clear();  // schedules_ holds them
  check_plan_schedules(cfg_.plan, cfg_.aggregation, schedules_, "DistTrainConfig.schedules");
  const RuntimeMemory& memory = runtime_memory(cfg_.train.device);
  ETH_CHECK(!device_world_.is_null() && device_world_.size() == world_.size() &&
                device_world_.rank() == world_.rank(),
            "the device communicator must hold the world's ranks");
  ETH_CHECK(!memory.on_device() || !device_world_.same_as(world_),
            "training on a GPU set needs a communicator of device buffers");
  const StagePlan& st = stage_of(cfg_.plan, place_);
  // The tp group of this rank's stage replica, created once, before the gradient groups, by
  // every rank (a split of the world; tp 1 ranks join none). Its colour is the group's first
  // device id, unique in the plan.
  const Communicator tp_comm = device_world_.split(
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
  rc.layout = &state_.layout();
  rc.trace = cfg_.trace;
  rc.background_progress = cfg_.background_progress;
  rc.device = cfg_.train.device;
  if (slowdown_ > 1.0 && !cfg_.nominal.empty()) {
    rc.nominal = cfg_.nominal.at(static_cast<std::size_t>(place_.pipeline))
                     .at(static_cast<std::size_t>(place_.stage));
    optimizer_nominal_ns_ = nominal_ns(rc.nominal->optimizer_ms);
  }
  runner_ = std::make_unique<StageRunner>(cfg_.plan, place_, device_world_, rc,
                                          schedules_[static_cast<std::size_t>(place_.pipeline)],
                                          tp_group_.get());
  sync_ = std::make_unique<GradSync>(cfg_.plan, cfg_.aggregation, device_world_, state_.layout(),
                                     tp_comm, memory);
  sync_->set_trace(cfg_.trace);
  if (state_.sharded()) {
    sharded_ = std::make_unique<ShardedOptimizer>(cfg_.plan, cfg_.aggregation, world_,
                                                  state_.layout());
  }
  for (const StagePlan& other : cfg_.plan.pipelines.front().stages) {
    for (std::int64_t u = other.first_unit; u <= other.last_unit; ++u) {
      owner_stages_.push_back(&other);
    }
  }
  ETH_CHECK(static_cast<std::int64_t>(owner_stages_.size()) == cfg_.plan.model.num_units(),
            "pipeline 0 must cover every unit once");
  // The gradient norm: the owners of the units (pipeline 0's dp rank 0 replica: every unit of
  // its stage) count their blocks, each a range of the gradient buffer, in the global order.
  // The blocks hold the same elements in the same order in every mode, so every mode adds the
  // same numbers in the same way.
  if (!sharded_ && place_.pipeline == 0 && place_.dp_rank == 0) {
    for (const GradBlock& b : aggregation_collectives(cfg_.plan, AggregationMode::Block)) {
      if (!std::binary_search(b.holders.begin(), b.holders.end(), place_.device)) continue;
      norm_runs_.push_back(norm_runs(cfg_.plan, state_.layout(), place_.device, b));
    }
  }
  check_init_not_resume(cfg_.train.init_from, resume.has_value());
  // A sharded state loads through a whole one of its layout (for the moment of the load), whose
  // shard it then keeps.
  std::optional<ModelState> loaded;
  if (sharded_ && (resume || !cfg_.train.init_from.empty())) {
    loaded.emplace(cfg_.plan.model, ParamLayout(state_.layout()), Precision::Fp32);
  }
  ModelState& target = loaded ? *loaded : state_;
  if (resume) {
    const CheckpointMeta meta = load_checkpoint(*resume, target);
    CheckpointMeta want = make_meta();
    check_resume(*resume, meta, want);
    next_step_ = meta.step;
  } else if (!cfg_.train.init_from.empty()) {
    // Like a resume, every rank reads just its units (its tp rows) from the one file.
    init_from_checkpoint(cfg_.train.init_from, target);
  } else if (sharded_) {
    sharded_->init(state_, cfg_.train.seed);
  } else {
    state_.init(cfg_.train.seed);
  }
  if (loaded) sharded_->take_whole(state_, *loaded);
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
  stats_ = StepStats{};
  stats_.step = next_step_;
  stepped_ = false;
  const std::vector<SampleRef> batch = sampler_.batch(next_step_);
  StepInput in;
  in.step = next_step_;
  in.batch = batch;
  in.tokens = data_.tokens();
  in.loss_scale = 1.0 / static_cast<double>(cfg_.plan.gbs * seq_len_);
  state_.zero_grads();
  if (tp_group_) tp_group_->reset();
  // The whole step is the program: its ReduceGradients and OptimizerStep come back here.
  runner_->run(state_, in, times_, this);
  ETH_CHECK(stepped_, "the program ended without its OptimizerStep");
  ++next_step_;
  StepStats s = stats_;
  s.seconds = since(t0);
  times_.step_s = s.seconds;
  s.tokens_per_s = static_cast<double>(tokens_per_step()) / std::max(s.seconds, 1e-9);
  return s;
}

const std::vector<std::int64_t>& DistributedTrainer::last_collectives() const {
  return scatters() ? scattered_ : sync_->queued_log();
}

bool DistributedTrainer::joins(std::int64_t block) const {
  return scatters() ? sharded_->joins(block) : sync_->joins(block);
}

void DistributedTrainer::begin(const std::vector<std::int64_t>& blocks) {
  scattered_.clear();
  if (!scatters()) sync_->set_order(blocks);
}

void DistributedTrainer::units_done(float* grads, std::int64_t lowest_done_unit) {
  if (!scatters()) sync_->start_ready(grads, lowest_done_unit);
}

void DistributedTrainer::reduce(float* grads, std::int64_t block, RankTimes& times) {
  const auto t0 = Clock::now();
  if (scatters()) {
    TraceScope trace(cfg_.trace, TraceKind::Sync);
    sharded_->reduce_scatter_block(grads, block);
    scattered_.push_back(block);
  } else {
    sync_->start_through(grads, block);  // nothing left when the last backward posted it
  }
  times.sync_s += since(t0);
}

void DistributedTrainer::optimizer_step(double loss, RankTimes& times) {
  if (tp_group_) tp_stats_ = tp_group_->stats();
  StepStats& s = stats_;
  const auto t_sync = Clock::now();
  TraceScope sync_trace(cfg_.trace, TraceKind::Sync);
  if (!scatters()) sync_->finish(state_.grads());  // what the collectives still had to do
  sync_trace.end();
  times.sync_s += since(t_sync);

  const auto t_opt = Clock::now();
  // The loss of the global batch and the squared norm of the gradient, each element counted
  // once (by its owners: the tp ranks of pipeline 0's replica 0, tp rank 0 the replicated
  // tensors), per rank in a fixed order, ranks added in rank order. Every tp rank computed the
  // same loss; rank 0 of each group counts it.
  const auto W = static_cast<std::size_t>(world_.size());
  std::vector<double> sums(W + 1, 0.0);
  TraceScope norm_trace(cfg_.trace, TraceKind::Optimizer);
  double& mine = sums[static_cast<std::size_t>(world_.rank())];
  for (const std::vector<PackRun>& block : norm_runs_) {
    for (const PackRun& r : block) mine += grad_sum_squares(state_, r.offset, r.count);
  }
  if (sharded_) mine = sharded_->sum_squares(state_);  // each element in one holder's shard
  sums[W] = place_.tp_rank == 0 ? loss : 0.0;
  norm_trace.end();
  const auto t_reduce = Clock::now();  // waits for every rank: counted as sync, not optimizer
  TraceScope reduce_trace(cfg_.trace, TraceKind::Sync);
  world_.allreduce_sum(std::span<double>(sums));
  reduce_trace.end();
  const double reduce_s = since(t_reduce);
  times.sync_s += reduce_s;
  double squares = 0;
  for (std::size_t r = 0; r < W; ++r) squares += sums[r];
  s.loss = sums[W];
  s.grad_norm = std::sqrt(squares);
  s.lr = cfg_.train.lr.at(next_step_);
  TraceScope update_trace(cfg_.trace, TraceKind::Optimizer);
  // Emulation stretches the optimizer as every op.
  EmulatedOp update(slowdown_, cfg_.trace, optimizer_nominal_ns_);
  const double clip = clip_factor(s.grad_norm, cfg_.train.adamw.grad_clip);
  if (sharded_) {
    sharded_->update(state_, cfg_.train.adamw, s.lr, next_step_, clip);  // and all-gathers
  } else {
    adamw_update(state_, cfg_.train.adamw, s.lr, next_step_, clip);
  }
  update.finish();
  times.optimizer_s = since(t_opt) - reduce_s;
  stepped_ = true;
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
  // What the gradient aggregation allocated: with the placed layout nothing in block- and
  // tensor-wise (the collectives run in the gradient buffer), a packed buffer per collective
  // that is not one range otherwise.
  m.buffers = runner_->message_buffer_bytes() + sync_->buffer_bytes() +
              (sharded_ ? sharded_->buffer_bytes() : 0.0);
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

std::optional<ModelState> DistributedTrainer::gather_whole(bool moments, Precision precision) {
  if (sharded_) return sharded_->gather_whole(state_, moments, precision);
  const std::int64_t U = cfg_.plan.model.num_units();
  ETH_CHECK(kCheckpointTagBase + 3 * U <= Communicator::kMaxTag, "too many units for the tags");
  const int me = world_.rank();
  const int parts = moments ? 3 : 1;
  // Owners send (parameters, Adam m, Adam v) of their shard of each unit they own to rank 0.
  std::vector<Request> sends;
  const ParamLayout& layout = state_.layout();
  const float* mine[3] = {state_.params(), state_.adam_m(), state_.adam_v()};
  std::vector<std::vector<float>> outgoing;  // alive until the sends complete
  for (const UnitSlot& u : layout.units()) {
    if (me == 0 || !owns(u.unit)) continue;
    const int tag = kCheckpointTagBase + 3 * static_cast<int>(u.unit);
    for (int p = 0; p < parts; ++p) outgoing.push_back(unit_major(state_, mine[p], u.unit));
    for (int p = 0; p < parts; ++p) {
      const std::vector<float>& v =
          outgoing[outgoing.size() - static_cast<std::size_t>(parts - p)];
      sends.push_back(world_.isend(std::span<const float>(v), 0, tag + p));
    }
  }
  std::optional<ModelState> whole;
  if (me == 0) {
    ModelState& full = whole.emplace(cfg_.plan.model, 0, U - 1, 1, 0, precision);
    std::vector<float> shard[3];
    for (const UnitSlot& u : full.layout().units()) {
      const StagePlan& st = owner_stage(u.unit);
      float* dst[3] = {full.params(), full.adam_m(), full.adam_v()};
      for (std::int64_t k = 0; k < st.tp; ++k) {
        // Tp rank k's shard of the unit, laid out as that rank holds it.
        const ParamLayout part(cfg_.plan.model, u.unit, u.unit, st.tp, k);
        const UnitSlot& ps = part.unit(u.unit);
        const auto n = static_cast<std::size_t>(ps.numel);
        const int owner = rank_of_device(cfg_.plan, stage_device(st, 0, k));
        const int tag = kCheckpointTagBase + 3 * static_cast<int>(u.unit);
        for (int p = 0; p < parts; ++p) {
          shard[p].resize(n);
          if (owner == 0) {
            shard[p] = unit_major(state_, mine[p], u.unit);
          } else {
            world_.recv(std::span<float>(shard[p]), owner, tag + p);
          }
        }
        // Its rows of each tensor go to their place in the whole tensor.
        for (std::size_t i = 0; i < ps.tensors.size(); ++i) {
          const TensorSlot& from = ps.tensors[i];
          const std::int64_t at = u.tensors[i].offset + from.rows.begin * from.row_size();
          for (int p = 0; p < parts; ++p) {
            std::copy_n(shard[p].data() + from.offset, from.desc.numel(), dst[p] + at);
          }
        }
      }
    }
    full.refresh_compute_copy();
  }
  wait_all(sends);
  return whole;
}

std::filesystem::path DistributedTrainer::save_checkpoint(const std::filesystem::path& dir) {
  const std::filesystem::path path = checkpoint_path(dir, next_step_);
  const std::optional<ModelState> whole = gather_whole(true, Precision::Fp32);
  if (whole) write_checkpoint(path, *whole, make_meta());
  world_.barrier();  // the file exists on every rank's return
  return path;
}

double DistributedTrainer::validation_loss(const ValidationSet& set) {
  const std::optional<ModelState> whole = gather_whole(false, cfg_.train.precision);
  double loss = whole ? set.loss(*whole) : 0.0;
  world_.broadcast(std::span<double>(&loss, 1), 0);
  return loss;
}

}  // namespace eth
