// One rank's part of a training step: its stage's program of the plan's schedule (1F1B or GPipe,
// schedule/ IR lowered with the point-to-point actions) executed over StageCompute, with this
// pipeline's own micro-batch size and count (a partial last micro-batch included), its stage's
// recompute set and its place in the stage's tp group. Activations go forward and their
// gradients back by non-blocking point-to-point messages; receives block (bounded by the
// communicator's timeout), sends never do. When adjacent stages have different dp, each replica
// sends every replica of the next stage the overlap of their sample chunks (placement.h). Every
// tp rank holds the whole activation between stages: tp rank j of a receiving stage takes it
// from tp rank j mod tp' of the sending stage (tp' its degree), so any tp can follow any other
// and the senders share the work. Pipelines never wait on each other here: that is GradSync's.
// Emulated heterogeneity: a slowdown factor f stretches every forward and backward to f times its
// compute by sleeping afterwards until a deadline (runtime/emulation.h; sleeping, not spinning, so
// an emulated slow rank does not steal the cores of the fast ones).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "comm/communicator.h"
#include "data/sampler.h"
#include "plan/plan.h"
#include "runtime/device_memory_policy.h"
#include "runtime/emulation.h"
#include "runtime/grad_sync.h"
#include "runtime/placement.h"
#include "runtime/trace_recorder.h"
#include "schedule/schedule.h"
#include "train/model_state.h"
#include "train/precision_stage.h"
#include "train/tp_group.h"

namespace eth {

struct StageRunnerConfig {
  std::int64_t seq_len = 0;  // T
  // fp32 or bf16: the stage's kernels, and the activation messages' element size (4 or 2).
  Precision precision = Precision::Fp32;
  float dropout = 0;
  std::uint64_t seed = 1;
  double slowdown = 1.0;  // emulated: every forward and backward takes this many times longer
  // The rank's parameter and gradient layout (grad_layout.h plan_layout; copied); null: the
  // unit-major one.
  const ParamLayout* layout = nullptr;
  TraceRecorder* trace = nullptr;  // eth train --trace: records every action (null: off)
  // Emulation: drive pending transfers from a second thread while an op computes (at tp 1;
  // Emulator::set_background_progress).
  bool background_progress = false;
  // Emulation by the profile: each forward and backward lasts the stage's nominal time instead
  // of `slowdown` x its compute (emulation.h). Unset: by CPU time.
  std::optional<NominalStageTimes> nominal;
  // The stage's kernels and where the activation messages live (device_memory_policy.h): on a
  // GPU set the stage's buffers and the messages are device memory, and `world` must carry
  // device buffers (LocalWorld on the device, the host-staged or the NCCL communicator).
  ComputeDevice device = ComputeDevice::Cpu;
};

// Wall time one rank spent in one step, by kind.
struct RankTimes {
  double compute_s = 0;    // forward + backward (emulated stretch and tp all-reduces included)
  double wait_s = 0;       // blocked on activations / gradients from neighbours
  double sync_s = 0;       // gradient aggregation after the schedule, and the loss/norm reduction
                           // (both wait for the slowest rank)
  double optimizer_s = 0;  // norm, clipping, AdamW
  double step_s = 0;       // the whole step
};

// The data of one step, shared by every rank of the process.
struct StepInput {
  std::int64_t step = 0;
  std::span<const SampleRef> batch;  // the whole global batch (GBS samples)
  TokenSpan tokens;  // the data file, either width
  double loss_scale = 1;  // 1 / (GBS * T)
};

class StageRunner {
 public:
  // `tp_group` (the rank's stage replica's tp ranks; null at tp 1) must outlive the runner.
  StageRunner(const Plan& plan, const RankPlace& place, const Communicator& world,
              const StageRunnerConfig& cfg, TpGroup* tp_group = nullptr);
  ~StageRunner();
  StageRunner(const StageRunner&) = delete;
  StageRunner& operator=(const StageRunner&) = delete;

  // Runs the program once with the weights of `state` (its precision is the runner's): gradients
  // accumulate into state.grads() (zero them first). Returns the sum of this rank's scaled head
  // losses (0 unless the stage holds the head). Adds into `times`. With `sync`, the rank's last
  // backward posts each gradient collective as soon as it has passed the collective's units
  // (GradSync::start_ready), overlapping the rest of it.
  double run(ModelState& state, const StepInput& in, RankTimes& times, GradSync* sync = nullptr);

  const Schedule& schedule() const { return schedule_; }
  const PrecisionStage& compute() const { return *compute_; }
  // Bytes of the activation messages' buffers: the receive buffers and the send pool (which
  // grows to the sends in flight at once, then is reused).
  double message_buffer_bytes() const;

 private:
  struct SendBuffer {
    RuntimeBuffer data;  // max_chunk_ * width_ activation elements
    std::vector<Request> pending;
  };
  Chunk chunk(std::int64_t stage, std::int64_t replica, std::int64_t mb) const;
  int peer(std::int64_t stage, std::int64_t replica, std::int64_t tp_rank) const;
  SendBuffer& acquire_send_buffer();
  void receive(std::int64_t from_stage, std::int64_t mb, const Chunk& mine, std::byte* dst,
               int tag, RankTimes& times);
  void send(const SendBuffer& buf, std::int64_t to_stage, std::int64_t mb, const Chunk& mine,
            int tag, std::vector<Request>& pending);

  const Plan& plan_;
  RankPlace place_;
  Communicator world_;
  StageRunnerConfig cfg_;
  Emulator emulator_;  // carries each op's lateness into the next (emulation.h)
  const PipelinePlan& pipe_;
  std::int64_t pipe_begin_ = 0;  // first sample of this pipeline in the global batch
  std::int64_t width_ = 0;       // T * C activation elements per sample
  std::size_t sample_bytes_ = 0;  // width_ * the activation element size
  Schedule schedule_;
  std::unique_ptr<PrecisionStage> compute_;
  std::int64_t slots_ = 1;
  std::int64_t max_chunk_ = 1;
  const RuntimeMemory* memory_ = nullptr;  // the messages' (cfg.device's)
  RuntimeBuffer x_in_, dx_out_;  // one chunk of activation elements each
  std::vector<std::int32_t> tokens_, targets_;  // per slot: max_chunk_ * T
  std::vector<std::unique_ptr<SendBuffer>> send_pool_;
  std::vector<std::vector<std::vector<int>>> peers_;  // [stage][dp replica][tp rank] -> rank
  GradSync* running_sync_ = nullptr;  // run()'s, for the emulator's progress (null otherwise)
};

}  // namespace eth
