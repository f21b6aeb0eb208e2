// The decorators of a compute action. See action_compute.h.
#include "runtime/action_compute.h"

#include <chrono>
#include <optional>
#include <utility>

#include "core/error.h"

namespace eth {

namespace {

class KernelCompute final : public ActionCompute {
 public:
  explicit KernelCompute(PrecisionStage& stage) : stage_(stage) {}
  double run(ComputeCall& c) override {
    const auto t0 = std::chrono::steady_clock::now();
    if (c.kind == ActionKind::Forward) {
      stage_.forward(c.slot, *c.state, c.batch, c.in, c.out);
    } else {
      ETH_CHECK(c.kind == ActionKind::Backward, "a compute call that is neither F nor B");
      stage_.backward(c.slot, *c.state, c.batch, c.in, c.out, c.unit_done);
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

 private:
  PrecisionStage& stage_;
};

class SampleGathering final : public ActionCompute {
 public:
  SampleGathering(std::unique_ptr<ActionCompute> inner, const SampleLayout& l)
      : inner_(std::move(inner)),
        l_(l),
        tokens_(static_cast<std::size_t>(l.slots * l.max_chunk * l.seq_len)),
        targets_(tokens_.size()) {}
  double run(ComputeCall& c) override {
    const StepInput& in = *c.input;
    const std::int64_t T = l_.seq_len;
    // The chunk's first sample's position in the global batch.
    const std::int64_t first = l_.pipe_begin + c.microbatch * l_.micro_batch_size + c.chunk.begin;
    MicroBatch& mb = c.batch;
    mb.step = in.step;
    mb.first_sample = in.batch[static_cast<std::size_t>(first)].global_index;
    mb.size = c.chunk.size;
    const std::int64_t at = (c.microbatch % l_.slots) * l_.max_chunk * T;
    std::int32_t* tok = tokens_.data() + at;
    std::int32_t* tgt = targets_.data() + at;
    // The backward of micro-batch j finds its forward's tokens in j's slot: no slot is reused
    // before its backward (slots counts the most micro-batches in flight).
    if (c.kind == ActionKind::Forward) {
      for (std::int64_t b = 0; b < c.chunk.size; ++b) {
        gather_sample(tok + b * T, tgt + b * T, in.tokens,
                      in.batch[static_cast<std::size_t>(first + b)], T);
      }
    }
    mb.tokens = tok;
    mb.targets = tgt;
    mb.loss_scale = in.loss_scale;
    return inner_->run(c);
  }

 private:
  std::unique_ptr<ActionCompute> inner_;
  SampleLayout l_;
  std::vector<std::int32_t> tokens_, targets_;  // per slot: max_chunk * T
};

class TracedCompute final : public ActionCompute {
 public:
  TracedCompute(std::unique_ptr<ActionCompute> inner, TraceRecorder* trace)
      : inner_(std::move(inner)), trace_(trace) {}
  double run(ComputeCall& c) override {
    TraceScope scope(trace_, c.kind == ActionKind::Forward ? TraceKind::Forward
                                                           : TraceKind::Backward,
                     c.microbatch);
    return inner_->run(c);
  }

 private:
  std::unique_ptr<ActionCompute> inner_;
  TraceRecorder* trace_;
};

class EmulatedCompute final : public ActionCompute {
 public:
  EmulatedCompute(std::unique_ptr<ActionCompute> inner, Emulator& emulator,
                  std::optional<NominalStageTimes> nominal, std::int64_t k,
                  std::int64_t first_unit)
      : inner_(std::move(inner)),
        emulator_(emulator),
        nominal_(std::move(nominal)),
        k_(k),
        first_unit_(first_unit) {}

  double run(ComputeCall& c) override {
    const bool last = c.microbatch == k_ - 1;
    std::int64_t length_ns = 0;
    if (nominal_) {
      const NominalStageTimes& n = *nominal_;
      length_ns = nominal_ns(c.kind == ActionKind::Forward
                                 ? (last ? n.last_forward_ms : n.forward_ms)
                                 : (last ? n.last_backward_ms : n.backward_ms));
    }
    EmulatedOp op(emulator_, length_ns);
    if (c.unit_done) {
      // A unit's gradient leaves when the emulated device would have computed it, not when
      // the real compute did: with nominal times once the backward has passed the units above
      // it and itself (their nominal parts, summed from the stage's last unit down).
      std::function<void(std::int64_t)> done = std::move(c.unit_done);
      c.unit_done = [this, last, done](std::int64_t unit) {
        std::int64_t offset = -1;
        if (nominal_) {
          const std::vector<double>& parts =
              last ? nominal_->last_unit_backward_ms : nominal_->unit_backward_ms;
          double ms = 0;
          for (auto u = static_cast<std::size_t>(unit - first_unit_); u < parts.size(); ++u) {
            ms += parts[u];
          }
          offset = nominal_ns(ms);
        }
        emulator_.at_emulated_offset(offset, [done, unit] { done(unit); });
      };
    }
    inner_->run(c);
    return op.finish();
  }

 private:
  std::unique_ptr<ActionCompute> inner_;
  Emulator& emulator_;
  std::optional<NominalStageTimes> nominal_;
  std::int64_t k_;
  std::int64_t first_unit_;
};

}  // namespace

std::unique_ptr<ActionCompute> kernel_compute(PrecisionStage& stage) {
  return std::make_unique<KernelCompute>(stage);
}

std::unique_ptr<ActionCompute> gather_samples(std::unique_ptr<ActionCompute> inner,
                                              const SampleLayout& layout) {
  return std::make_unique<SampleGathering>(std::move(inner), layout);
}

std::unique_ptr<ActionCompute> trace_compute(std::unique_ptr<ActionCompute> inner,
                                             TraceRecorder* trace) {
  return std::make_unique<TracedCompute>(std::move(inner), trace);
}

std::unique_ptr<ActionCompute> emulate_compute(std::unique_ptr<ActionCompute> inner,
                                               Emulator& emulator,
                                               std::optional<NominalStageTimes> nominal,
                                               std::int64_t num_microbatches,
                                               std::int64_t first_unit) {
  return std::make_unique<EmulatedCompute>(std::move(inner), emulator, std::move(nominal),
                                           num_microbatches, first_unit);
}

}  // namespace eth
