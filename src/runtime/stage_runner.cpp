// Executing a stage's lowered schedule program. See stage_runner.h.
#include "runtime/stage_runner.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "core/error.h"
#include "plan/blocks.h"
#include "runtime/emulation.h"
#include "schedule/plan_schedules.h"
#include "schedule/validate.h"

namespace eth {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Message tags: activation and gradient of micro-batch j (user tags stay below kMaxTag).
int activation_tag(std::int64_t mb) { return static_cast<int>(2 * mb); }
int gradient_tag(std::int64_t mb) { return static_cast<int>(2 * mb + 1); }

// The most micro-batches whose activations a stage's program holds at once (forwards not yet
// matched by their backward): min(S - s, k) under 1F1B, k under GPipe. Both run backwards in
// forward order, so micro-batch j can take slot j mod this.
std::int64_t max_in_flight(const RankProgram& program) {
  std::int64_t live = 0, most = 1;
  for (const Action& a : program.actions) {
    if (a.kind == ActionKind::Forward) most = std::max(most, ++live);
    if (a.kind == ActionKind::Backward) --live;
  }
  return most;
}

CollectiveHolders holders_of(const Plan& plan, AggregationMode mode) {
  CollectiveHolders out;
  for (const GradBlock& b : aggregation_collectives(plan, mode)) {
    if (b.holders.size() >= 2) out.push_back(b.holders);  // nothing to reduce with oneself
  }
  return out;
}

ScheduleKind plan_schedule_kind(const Plan& plan) {
  const std::optional<ScheduleKind> kind = parse_schedule_kind(plan.schedule);
  ETH_CHECK(kind.has_value(), "plan schedule not validated: " + plan.schedule);
  return *kind;
}

}  // namespace

std::vector<Schedule> lower_plan(const Plan& plan, AggregationMode mode) {
  return lower_plan_schedules(plan, plan_schedule_kind(plan), holders_of(plan, mode));
}

void check_plan_schedules(const Plan& plan, AggregationMode mode,
                          const std::vector<Schedule>& schedules, const std::string& source) {
  std::vector<std::string> problems;
  for (std::size_t p = 0; p < schedules.size(); ++p) {
    if (schedules[p].kind != plan_schedule_kind(plan)) {
      problems.push_back("pipeline " + std::to_string(p) + ": not the plan's schedule, " +
                         plan.schedule);
    }
    for (const std::string& why : validate_schedule(schedules[p])) {
      problems.push_back("pipeline " + std::to_string(p) + ": " + why);
    }
  }
  for (std::string& why : validate_plan_schedules(plan, schedules, holders_of(plan, mode))) {
    problems.push_back(std::move(why));
  }
  if (problems.empty()) return;
  std::string detail = "the programs cannot run as written:";
  for (const std::string& why : problems) detail += "\n  " + why;
  throw InputError("train", source, "schedules", detail);
}

StageRunner::StageRunner(const Plan& plan, const RankPlace& place, const Communicator& world,
                         const StageRunnerConfig& cfg, Schedule schedule, TpGroup* tp_group)
    : plan_(plan),
      place_(place),
      world_(world),
      cfg_(cfg),
      emulator_(cfg.slowdown, cfg.trace),
      pipe_(plan.pipelines[static_cast<std::size_t>(place.pipeline)]),
      schedule_(std::move(schedule)),
      memory_(&runtime_memory(cfg.device)) {
  for (std::int64_t p = 0; p < place.pipeline; ++p) {
    pipe_begin_ += plan.pipelines[static_cast<std::size_t>(p)].local_batch;
  }
  const std::int64_t S = static_cast<std::int64_t>(pipe_.stages.size());
  const std::int64_t k = pipe_.num_microbatches();
  ETH_CHECK(gradient_tag(k) <= Communicator::kMaxTag, "too many micro-batches for the tag space");
  const StagePlan& st = pipe_.stages[static_cast<std::size_t>(place.stage)];
  width_ = cfg.seq_len * plan.model.hidden;
  ETH_CHECK(schedule_.num_stages == S && schedule_.num_microbatches == k,
            "the runner's schedule is not its pipeline's");
  slots_ = max_in_flight(schedule_.programs[static_cast<std::size_t>(place.stage)]);
  max_chunk_ = 0;
  for (std::int64_t r = 0; r < st.dp; ++r) {
    max_chunk_ = std::max(max_chunk_, dp_chunk(pipe_.micro_batch_size, st.dp, r).size);
  }
  max_chunk_ = std::max<std::int64_t>(max_chunk_, 1);
  StageComputeConfig sc;
  sc.first_unit = st.first_unit;
  sc.last_unit = st.last_unit;
  sc.max_micro_batch = max_chunk_;
  sc.seq_len = cfg.seq_len;
  sc.num_slots = slots_;
  sc.recompute = st.recompute;
  sc.dropout = cfg.dropout;
  sc.seed = cfg.seed;
  sc.tp = st.tp;
  sc.tp_rank = place.tp_rank;
  sc.layout = cfg.layout;
  sc.on_recompute = recompute_hook(st.recompute.empty() ? nullptr : cfg.trace);
  compute_ = std::make_unique<PrecisionStage>(cfg.precision, plan.model, sc, tp_group, cfg.device);
  // The compute chain: the stretch inside the traced event, gathering outside both (it is not
  // the device's work).
  chain_ = emulate_compute(kernel_compute(*compute_), emulator_, cfg.nominal, k, st.first_unit);
  chain_ = trace_compute(std::move(chain_), cfg.trace);
  chain_ = gather_samples(std::move(chain_), SampleLayout{pipe_begin_, pipe_.micro_batch_size,
                                                          cfg.seq_len, max_chunk_, slots_});
  if (cfg.wrap_compute) chain_ = cfg.wrap_compute(std::move(chain_));
  cfg_.wrap_compute = nullptr;
  sample_bytes_ = static_cast<std::size_t>(width_) * compute_->activation_element_bytes();
  cfg_.layout = nullptr;  // copied into compute_; the caller's need not outlive construction
  // Ranks of every tp rank of every replica of every stage of this pipeline, looked up once.
  for (const StagePlan& other : pipe_.stages) {
    auto& replicas = peers_.emplace_back();
    for (std::int64_t r = 0; r < other.dp; ++r) {
      auto& ranks = replicas.emplace_back();
      for (std::int64_t t = 0; t < other.tp; ++t) {
        ranks.push_back(rank_of_device(plan, stage_device(other, r, t)));
      }
    }
  }
  const auto activations = static_cast<std::size_t>(max_chunk_) * sample_bytes_;
  if (place.stage > 0) x_in_ = RuntimeBuffer(*memory_, activations);
  if (place.stage + 1 < S) dx_out_ = RuntimeBuffer(*memory_, activations);
  // Emulation: while an op sleeps out its stretch, drive the pending sends, so a neighbour
  // waiting for one is not held until this rank's next MPI call (a device's transfers go on
  // while it computes; MPI moves a large message only inside the sender's MPI calls).
  // The gradient collectives go on as well: their pieces past the window are posted only as
  // earlier ones complete, which would otherwise wait for the end of the schedule.
  emulator_.set_progress([this] {
    bool pending = false;
    for (auto& b : send_pool_) {
      for (Request& r : b->pending) pending = !r.test() || pending;
    }
    if (running_ != nullptr) pending = running_->progress() || pending;
    return pending;
  });
  // A tp rank's ops make collectives of their own, which must not meet the second thread's.
  emulator_.set_background_progress(cfg.background_progress && tp_group == nullptr);
}

StageRunner::~StageRunner() = default;

double StageRunner::message_buffer_bytes() const {
  std::size_t b = x_in_.size() + dx_out_.size();
  for (const auto& buf : send_pool_) b += buf->data.size();
  return static_cast<double>(b);
}

Chunk StageRunner::chunk(std::int64_t stage, std::int64_t replica, std::int64_t mb) const {
  const std::int64_t b = std::min(pipe_.micro_batch_size, pipe_.local_batch - mb * pipe_.micro_batch_size);
  return dp_chunk(b, pipe_.stages[static_cast<std::size_t>(stage)].dp, replica);
}

int StageRunner::peer(std::int64_t stage, std::int64_t replica, std::int64_t tp_rank) const {
  return peers_[static_cast<std::size_t>(stage)][static_cast<std::size_t>(replica)]
               [static_cast<std::size_t>(tp_rank)];
}

StageRunner::SendBuffer& StageRunner::acquire_send_buffer() {
  for (auto& b : send_pool_) {
    bool free = true;
    for (Request& r : b->pending) free = free && r.test();
    if (free) {
      b->pending.clear();
      return *b;
    }
  }
  auto b = std::make_unique<SendBuffer>();
  b->data = RuntimeBuffer(*memory_, static_cast<std::size_t>(max_chunk_) * sample_bytes_);
  send_pool_.push_back(std::move(b));
  return *send_pool_.back();
}

void StageRunner::receive(std::int64_t from_stage, std::int64_t mb, const Chunk& mine,
                          std::byte* dst, int tag, RankTimes& times) {
  TraceScope trace(cfg_.trace, from_stage < place_.stage ? TraceKind::RecvActivation
                                                         : TraceKind::RecvGradient, mb, from_stage);
  const auto t0 = Clock::now();
  std::vector<Request> requests;
  const StagePlan& from = pipe_.stages[static_cast<std::size_t>(from_stage)];
  const std::int64_t sender_tp = place_.tp_rank % from.tp;  // the one that sends to this rank
  for (std::int64_t r = 0; r < from.dp; ++r) {
    const Chunk ov = overlap(chunk(from_stage, r, mb), mine);
    if (ov.size == 0) continue;
    std::span<std::byte> part(dst + static_cast<std::size_t>(ov.begin - mine.begin) * sample_bytes_,
                              static_cast<std::size_t>(ov.size) * sample_bytes_);
    requests.push_back(world_.irecv(part, peer(from_stage, r, sender_tp), tag));
  }
  wait_all(requests);
  times.wait_s += since(t0);
}

void StageRunner::send(const SendBuffer& buf, std::int64_t to_stage, std::int64_t mb,
                       const Chunk& mine, int tag, std::vector<Request>& pending) {
  TraceScope trace(cfg_.trace, to_stage > place_.stage ? TraceKind::SendActivation
                                                     : TraceKind::SendGradient, mb, to_stage);
  const StagePlan& to = pipe_.stages[static_cast<std::size_t>(to_stage)];
  const std::int64_t my_tp = pipe_.stages[static_cast<std::size_t>(place_.stage)].tp;
  for (std::int64_t r = 0; r < to.dp; ++r) {
    const Chunk ov = overlap(mine, chunk(to_stage, r, mb));
    if (ov.size == 0) continue;
    std::span<const std::byte> part(
        buf.data.data() + static_cast<std::size_t>(ov.begin - mine.begin) * sample_bytes_,
        static_cast<std::size_t>(ov.size) * sample_bytes_);
    // The receivers whose tp rank maps to this one (receive's rule, seen from the sender).
    for (std::int64_t j = place_.tp_rank; j < to.tp; j += my_tp) {
      pending.push_back(world_.isend(part, peer(to_stage, r, j), tag));
    }
  }
}

const RankProgram& StageRunner::program() const {
  return schedule_.programs[static_cast<std::size_t>(place_.stage)];
}

std::int64_t StageRunner::last_microbatch() const {
  std::int64_t last = -1;
  for (std::int64_t j = 0; j < pipe_.num_microbatches(); ++j) {
    if (chunk(place_.stage, place_.dp_rank, j).size > 0) last = j;
  }
  return last;
}

void StageRunner::wait_sends(RankTimes& times) {
  TraceScope trace(cfg_.trace, TraceKind::SendWait);
  const auto t0 = Clock::now();
  for (auto& b : send_pool_) {
    wait_all(b->pending);
    b->pending.clear();
  }
  times.wait_s += since(t0);
}

double StageRunner::run(ModelState& state, const StepInput& in, RankTimes& times,
                        StepActions* actions) {
  // Cleared however run() ends: the emulator must not drive the actions of a finished step.
  struct Running {
    StepActions*& slot;
    ~Running() { slot = nullptr; }
  } running{running_ = actions};
  float* grads = state.grads();
  const std::int64_t s = place_.stage;
  const std::int64_t S = static_cast<std::int64_t>(pipe_.stages.size());
  const RankProgram& prog = program();
  if (actions != nullptr) {
    std::vector<std::int64_t> blocks;  // the collectives this rank joins, in the program's order
    for (const Action& a : prog.actions) {
      if (a.kind == ActionKind::ReduceGradients && actions->joins(a.block)) blocks.push_back(a.block);
    }
    actions->begin(blocks);
  }
  // Backward runs micro-batches in ascending order: the last one this replica holds samples of
  // is its final backward, after which (unit by unit, from the stage's last) its gradients are
  // final, and the collectives over them may start.
  const std::int64_t last_mb = last_microbatch();
  const std::function<void(std::int64_t)> units_done =
      actions != nullptr && actions->posts_early()
          ? std::function<void(std::int64_t)>(
                [actions, grads](std::int64_t unit) { actions->units_done(grads, unit); })
          : nullptr;
  // The buffers an activation / gradient was computed into, until its send action posts it.
  SendBuffer* act_out = nullptr;
  SendBuffer* grad_out = nullptr;
  std::optional<double> loss;  // taken at the OptimizerStep (or after the program without one)
  auto compute = [&](const Action& a, const Chunk& c, const std::byte* from, std::byte* to,
                     std::function<void(std::int64_t)> done) {
    ComputeCall call;
    call.kind = a.kind;
    call.microbatch = a.microbatch;
    call.chunk = c;
    call.slot = static_cast<int>(a.microbatch % slots_);
    call.state = &state;
    call.input = &in;
    call.in = from;
    call.out = to;
    call.unit_done = std::move(done);
    times.compute_s += chain_->run(call);
  };
  for (const Action& a : prog.actions) {
    const bool per_microbatch = a.microbatch >= 0;
    const Chunk c = per_microbatch ? chunk(s, place_.dp_rank, a.microbatch) : Chunk{};
    // This replica holds no sample of a small last micro-batch: nothing of it to do.
    if (per_microbatch && c.size == 0) continue;
    switch (a.kind) {
      case ActionKind::RecvActivation:
        receive(s - 1, a.microbatch, c, x_in_.data(), activation_tag(a.microbatch), times);
        break;
      case ActionKind::Forward:
        act_out = s + 1 < S ? &acquire_send_buffer() : nullptr;
        compute(a, c, s > 0 ? x_in_.data() : nullptr, act_out ? act_out->data.data() : nullptr,
                nullptr);
        break;
      case ActionKind::SendActivation:
        ETH_CHECK(act_out != nullptr, "send without a forward");
        send(*act_out, s + 1, a.microbatch, c, activation_tag(a.microbatch), act_out->pending);
        act_out = nullptr;
        break;
      case ActionKind::RecvGradient:
        receive(s + 1, a.microbatch, c, dx_out_.data(), gradient_tag(a.microbatch), times);
        break;
      case ActionKind::Backward:
        grad_out = s > 0 ? &acquire_send_buffer() : nullptr;
        compute(a, c, s + 1 < S ? dx_out_.data() : nullptr,
                grad_out ? grad_out->data.data() : nullptr,
                a.microbatch == last_mb ? units_done : nullptr);
        break;
      case ActionKind::SendGradient:
        ETH_CHECK(grad_out != nullptr, "send without a backward");
        send(*grad_out, s - 1, a.microbatch, c, gradient_tag(a.microbatch), grad_out->pending);
        grad_out = nullptr;
        break;
      case ActionKind::ReduceGradients:
        if (actions != nullptr && actions->joins(a.block)) actions->reduce(grads, a.block, times);
        break;
      case ActionKind::OptimizerStep:
        // Sends complete once their receivers post: every receiver does within this step, and
        // none may be left to cross the optimizer's collectives.
        wait_sends(times);
        loss = compute_->take_loss();
        if (actions != nullptr) actions->optimizer_step(*loss, times);
        break;
    }
  }
  if (!loss) {
    wait_sends(times);
    loss = compute_->take_loss();
  }
  return *loss;  // the head's losses, read once per step
}

}  // namespace eth
