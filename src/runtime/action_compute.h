// The compute of one Forward or Backward action of a stage's program, as a chain of decorators
// around the kernels: sample gathering (the micro-batch's tokens), tracing (the action's event),
// emulation (the slowdown or nominal stretch, and the emulated time at which a finished unit's
// gradient is handed on) and the stage's kernels (PrecisionStage). The executor
// (stage_runner.h) hands every compute action to the outermost layer and knows none of this; a
// test wraps the chain to see what the executor ran. Not the optimizer step: the trainer runs it
// (dist_trainer.cpp) when the program reaches its OptimizerStep.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "data/sampler.h"
#include "runtime/emulation.h"
#include "runtime/placement.h"
#include "runtime/trace_recorder.h"
#include "schedule/schedule.h"
#include "train/model_state.h"
#include "train/precision_stage.h"

namespace eth {

// The data of one step, shared by every rank of the process.
struct StepInput {
  std::int64_t step = 0;
  std::span<const SampleRef> batch;  // the whole global batch (GBS samples)
  TokenSpan tokens;  // the data file, either width
  double loss_scale = 1;  // 1 / (GBS * T)
};

// One Forward or Backward of the program on this rank's samples of its micro-batch.
struct ComputeCall {
  ActionKind kind = ActionKind::Forward;  // Forward or Backward
  std::int64_t microbatch = 0;
  Chunk chunk;   // this replica's samples of the micro-batch (size > 0)
  int slot = 0;  // activation slot of the micro-batch
  ModelState* state = nullptr;
  const StepInput* input = nullptr;
  MicroBatch batch;  // filled by SampleGathering from `input` and `chunk`
  // Forward: the received activation (null on stage 0) and the one to send (null on the last
  // stage). Backward: the received gradient (null on the last stage) and the input gradient to
  // send (null on stage 0). (B,T,C) activation elements each.
  const std::byte* in = nullptr;
  std::byte* out = nullptr;
  // Backward: runs as unit u's parameter gradients are final (null: not wanted).
  std::function<void(std::int64_t)> unit_done;
};

class ActionCompute {
 public:
  virtual ~ActionCompute() = default;
  // Runs the call; returns the seconds this rank's compute was busy with it (stretch included).
  virtual double run(ComputeCall& call) = 0;
};

// The stage's kernels; `stage` outlives this.
std::unique_ptr<ActionCompute> kernel_compute(PrecisionStage& stage);

// Where a pipeline's micro-batches lie in the global batch, and the rank's token buffers.
struct SampleLayout {
  std::int64_t pipe_begin = 0;        // first sample of the pipeline in the global batch
  std::int64_t micro_batch_size = 0;  // the pipeline's
  std::int64_t seq_len = 0;           // T
  std::int64_t max_chunk = 1;         // most samples of one micro-batch on this replica
  std::int64_t slots = 1;             // activation slots (micro-batch j uses j mod slots)
};
// Fills call.batch (a Forward gathers the tokens and targets into the micro-batch's slot; a
// Backward finds them there), then runs `inner`.
std::unique_ptr<ActionCompute> gather_samples(std::unique_ptr<ActionCompute> inner,
                                              const SampleLayout& layout);

// Records the action as a Forward or Backward event of `trace` (null: passes through).
std::unique_ptr<ActionCompute> trace_compute(std::unique_ptr<ActionCompute> inner,
                                             TraceRecorder* trace);

// Stretches each action as `emulator` says (emulation.h): to its nominal length when `nominal`
// is set (`num_microbatches` tells the last micro-batch's times apart, `first_unit` the stage's
// unit whose backward part comes first), else to the slowdown x its compute; a backward's
// unit_done then runs at the emulated device's time for the units done (at_emulated_offset).
// `emulator` outlives this. Returns the op's whole wall time.
std::unique_ptr<ActionCompute> emulate_compute(std::unique_ptr<ActionCompute> inner,
                                               Emulator& emulator,
                                               std::optional<NominalStageTimes> nominal,
                                               std::int64_t num_microbatches,
                                               std::int64_t first_unit);

}  // namespace eth
