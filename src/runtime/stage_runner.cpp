// Executing a stage's lowered schedule program. See stage_runner.h.
#include "runtime/stage_runner.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "core/error.h"
#include "plan/blocks.h"
#include "runtime/emulation.h"
#include "schedule/generate.h"
#include "schedule/lower.h"

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

}  // namespace

StageRunner::StageRunner(const Plan& plan, const RankPlace& place, const Communicator& world,
                         const StageRunnerConfig& cfg, TpGroup* tp_group)
    : plan_(plan),
      place_(place),
      world_(world),
      cfg_(cfg),
      emulator_(cfg.slowdown, cfg.trace),
      pipe_(plan.pipelines[static_cast<std::size_t>(place.pipeline)]),
      memory_(&runtime_memory(cfg.device)) {
  for (std::int64_t p = 0; p < place.pipeline; ++p) {
    pipe_begin_ += plan.pipelines[static_cast<std::size_t>(p)].local_batch;
  }
  const std::int64_t S = static_cast<std::int64_t>(pipe_.stages.size());
  const std::int64_t k = pipe_.num_microbatches();
  ETH_CHECK(gradient_tag(k) <= Communicator::kMaxTag, "too many micro-batches for the tag space");
  const StagePlan& st = pipe_.stages[static_cast<std::size_t>(place.stage)];
  width_ = cfg.seq_len * plan.model.hidden;
  const std::optional<ScheduleKind> kind = parse_schedule_kind(plan.schedule);
  ETH_CHECK(kind.has_value(), "plan schedule not validated: " + plan.schedule);
  schedule_ = make_schedule(*kind, S, k);  // the plan's schedule, never another
  insert_p2p(schedule_);
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
    if (running_sync_ != nullptr) pending = running_sync_->progress() || pending;
    return pending;
  });
  // A tp rank's ops make collectives of their own, which must not meet the second thread's.
  emulator_.set_background_progress(cfg.background_progress && tp_group == nullptr);
  tokens_.resize(static_cast<std::size_t>(slots_ * max_chunk_ * cfg.seq_len));
  targets_.resize(tokens_.size());
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

double StageRunner::run(ModelState& state, const StepInput& in, RankTimes& times,
                        GradSync* sync) {
  // Cleared however run() ends: the emulator must not drive a sync of a finished step.
  struct SyncScope {
    GradSync*& slot;
    ~SyncScope() { slot = nullptr; }
  } sync_scope{running_sync_ = sync};
  float* grads = state.grads();
  const std::int64_t s = place_.stage;
  const std::int64_t T = cfg_.seq_len;
  const std::int64_t m = pipe_.micro_batch_size;
  // The buffers an activation / gradient was computed into, until its send action posts it.
  SendBuffer* act_out = nullptr;
  SendBuffer* grad_out = nullptr;
  auto micro_batch = [&](std::int64_t j, const Chunk& c, bool gather) {
    MicroBatch mb;
    mb.step = in.step;
    const std::int64_t first = pipe_begin_ + j * m + c.begin;  // position in the global batch
    mb.first_sample = in.batch[static_cast<std::size_t>(first)].global_index;
    mb.size = c.size;
    const std::int64_t slot = j % slots_;
    std::int32_t* tok = tokens_.data() + slot * max_chunk_ * T;
    std::int32_t* tgt = targets_.data() + slot * max_chunk_ * T;
    if (gather) {
      for (std::int64_t b = 0; b < c.size; ++b) {
        gather_sample(tok + b * T, tgt + b * T, in.tokens,
                      in.batch[static_cast<std::size_t>(first + b)], T);
      }
    }
    mb.tokens = tok;
    mb.targets = tgt;
    mb.loss_scale = in.loss_scale;
    return mb;
  };
  const std::int64_t S = static_cast<std::int64_t>(pipe_.stages.size());
  // Backward runs micro-batches in ascending order: the last one this replica holds samples of
  // is its final backward, after which a unit's gradient is complete.
  std::int64_t last_mb = -1;
  for (std::int64_t j = 0; j < pipe_.num_microbatches(); ++j) {
    if (chunk(s, place_.dp_rank, j).size > 0) last_mb = j;
  }
  // A unit's gradient leaves when the emulated device would have computed it, not when the real
  // compute did (emulation.h, at_emulated_now).
  // With nominal times, a unit's gradient is complete once the backward has passed the units
  // above it and itself: their nominal parts, summed from the stage's last unit down.
  const std::int64_t k = pipe_.num_microbatches();
  const std::int64_t first_unit = pipe_.stages[static_cast<std::size_t>(s)].first_unit;
  auto op_nominal_ns = [&](bool forward, std::int64_t j) -> std::int64_t {
    if (!cfg_.nominal) return 0;
    const NominalStageTimes& n = *cfg_.nominal;
    const bool last = j == k - 1;
    return nominal_ns(forward ? (last ? n.last_forward_ms : n.forward_ms)
                              : (last ? n.last_backward_ms : n.backward_ms));
  };
  const std::function<void(std::int64_t)> post_ready = [&](std::int64_t unit) {
    std::int64_t offset = -1;
    if (cfg_.nominal) {
      const std::vector<double>& parts = last_mb == k - 1 ? cfg_.nominal->last_unit_backward_ms
                                                          : cfg_.nominal->unit_backward_ms;
      double ms = 0;
      for (std::size_t u = static_cast<std::size_t>(unit - first_unit); u < parts.size(); ++u) {
        ms += parts[u];
      }
      offset = nominal_ns(ms);
    }
    emulator_.at_emulated_offset(offset, [&, unit] { sync->start_ready(grads, unit); });
  };
  for (const Action& a : schedule_.programs[static_cast<std::size_t>(s)].actions) {
    const Chunk c = chunk(s, place_.dp_rank, a.microbatch);
    if (c.size == 0) continue;  // this replica holds no sample of a small last micro-batch
    const int slot = static_cast<int>(a.microbatch % slots_);
    switch (a.kind) {
      case ActionKind::RecvActivation:
        receive(s - 1, a.microbatch, c, x_in_.data(), activation_tag(a.microbatch), times);
        break;
      case ActionKind::Forward: {
        const MicroBatch mb = micro_batch(a.microbatch, c, true);
        act_out = s + 1 < S ? &acquire_send_buffer() : nullptr;
        TraceScope trace(cfg_.trace, TraceKind::Forward, a.microbatch);
        EmulatedOp op(emulator_, op_nominal_ns(true, a.microbatch));
        compute_->forward(slot, state, mb, s > 0 ? x_in_.data() : nullptr,
                          act_out ? act_out->data.data() : nullptr);
        times.compute_s += op.finish();
        break;
      }
      case ActionKind::SendActivation:
        ETH_CHECK(act_out != nullptr, "send without a forward");
        send(*act_out, s + 1, a.microbatch, c, activation_tag(a.microbatch), act_out->pending);
        act_out = nullptr;
        break;
      case ActionKind::RecvGradient:
        receive(s + 1, a.microbatch, c, dx_out_.data(), gradient_tag(a.microbatch), times);
        break;
      case ActionKind::Backward: {
        const MicroBatch mb = micro_batch(a.microbatch, c, false);
        grad_out = s > 0 ? &acquire_send_buffer() : nullptr;
        TraceScope trace(cfg_.trace, TraceKind::Backward, a.microbatch);
        EmulatedOp op(emulator_, op_nominal_ns(false, a.microbatch));
        compute_->backward(slot, state, mb, s + 1 < S ? dx_out_.data() : nullptr,
                           grad_out ? grad_out->data.data() : nullptr,
                           sync != nullptr && a.microbatch == last_mb ? post_ready : nullptr);
        times.compute_s += op.finish();
        break;
      }
      case ActionKind::SendGradient:
        ETH_CHECK(grad_out != nullptr, "send without a backward");
        send(*grad_out, s - 1, a.microbatch, c, gradient_tag(a.microbatch), grad_out->pending);
        grad_out = nullptr;
        break;
      case ActionKind::ReduceGradients:
      case ActionKind::OptimizerStep:
        break;  // the trainer runs these after the program (grad_sync.h)
    }
  }
  // Sends complete once their receivers post: every receiver does within this step.
  TraceScope trace(cfg_.trace, TraceKind::SendWait);
  const auto t0 = Clock::now();
  for (auto& b : send_pool_) {
    wait_all(b->pending);
    b->pending.clear();
  }
  times.wait_s += since(t0);
  return compute_->take_loss();  // the head's losses, read once per step
}

}  // namespace eth
