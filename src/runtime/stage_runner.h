// One rank's part of a training step: its stage's program of the plan's lowered schedule
// (schedule/plan_schedules.h: 1F1B or GPipe with the point-to-point actions, the gradient
// collectives and the optimizer step) executed action by action, with this pipeline's own
// micro-batch size and count (a partial last micro-batch included), its stage's recompute set
// and its place in the stage's tp group. Every action of the program runs here, in order:
// Forward and Backward through the compute chain (action_compute.h: sample gathering, tracing and
// emulation wrap the kernels), sends and receives below, ReduceGradients and OptimizerStep through
// the trainer's StepActions. So the program is the whole truth: the simulator prices the same one.
// Activations go forward and their gradients back by non-blocking point-to-point messages;
// receives block (bounded by the communicator's timeout), sends never do. When adjacent stages
// have different dp, each replica sends every replica of the next stage the overlap of their
// sample chunks (placement.h). Every tp rank holds the whole activation between stages: tp rank j
// of a receiving stage takes it from tp rank j mod tp' of the sending stage (tp' its degree), so
// any tp can follow any other and the senders share the work. Pipelines never wait on each other
// here except in the collectives the program names.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "data/sampler.h"
#include "plan/blocks.h"
#include "plan/plan.h"
#include "runtime/action_compute.h"
#include "runtime/device_memory_policy.h"
#include "runtime/emulation.h"
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
  // Wraps the compute chain once more (tests: to see what the executor ran). Empty: none.
  std::function<std::unique_ptr<ActionCompute>(std::unique_ptr<ActionCompute>)> wrap_compute;
};

// Wall time one rank spent in one step, by kind.
struct RankTimes {
  double compute_s = 0;    // forward + backward (emulated stretch and tp all-reduces included)
  double wait_s = 0;       // blocked on activations / gradients from neighbours
  double sync_s = 0;       // gradient aggregation not hidden behind the backward (the RD
                           // actions and the OPT's wait for them) and the loss/norm reduction
                           // (both wait for the slowest rank)
  double optimizer_s = 0;  // norm, clipping, AdamW
  double step_s = 0;       // the whole step
};

// What the program's gradient actions do on this rank: the trainer's aggregation and optimizer
// step (dist_trainer.cpp). The executor calls them where its stage's program says.
class StepActions {
 public:
  virtual ~StepActions() = default;
  // Whether this rank joins collective `block` (a ReduceGradients action's). The executor passes
  // over the others, as the simulator queues a collective on its holders only.
  virtual bool joins(std::int64_t block) const = 0;
  // At the start of each step: the program's ReduceGradients this rank joins, in program order.
  virtual void begin(const std::vector<std::int64_t>& blocks) = 0;
  // Whether units_done is wanted (collectives posted during the last backward, as they become
  // ready: the overlap the simulator schedules).
  virtual bool posts_early() const = 0;
  // During the replica's last backward: the gradients of `lowest_done_unit` and every unit above
  // it are final (at the emulated device's time).
  virtual void units_done(float* grads, std::int64_t lowest_done_unit) = 0;
  // A ReduceGradients action: collective `block` is posted by now (it may have been earlier).
  virtual void reduce(float* grads, std::int64_t block, RankTimes& times) = 0;
  // The OptimizerStep action, after every send of the step completed: waits for the
  // collectives, then steps. `loss`: this rank's sum of scaled head losses.
  virtual void optimizer_step(double loss, RankTimes& times) = 0;
  // Drives pending collectives without blocking; true while some remain (emulation's sleep).
  virtual bool progress() = 0;
};

// The plan's lowered schedules, one per pipeline, with the gradient collectives of `mode` (the
// simulator's build_schedules for the same plan and mode): what DistributedTrainer runs unless
// it is handed others.
std::vector<Schedule> lower_plan(const Plan& plan, AggregationMode mode);
// Throws InputError("train", source, "schedules", ...) listing every problem of `schedules` as
// the programs of `plan` under `mode`: validate_schedule on each, then validate_plan_schedules.
void check_plan_schedules(const Plan& plan, AggregationMode mode,
                          const std::vector<Schedule>& schedules, const std::string& source);

class StageRunner {
 public:
  ~StageRunner();
  StageRunner(const StageRunner&) = delete;
  StageRunner& operator=(const StageRunner&) = delete;

  // `schedule`: this pipeline's lowered schedule (lower_plan), already validated
  // (check_plan_schedules); its stage's program is what run() executes. `tp_group` (the rank's
  // stage replica's tp ranks; null at tp 1) must outlive the runner.
  StageRunner(const Plan& plan, const RankPlace& place, const Communicator& world,
              const StageRunnerConfig& cfg, Schedule schedule, TpGroup* tp_group = nullptr);

  // Runs the program once with the weights of `state` (its precision is the runner's): gradients
  // accumulate into state.grads() (zero them first). Returns the sum of this rank's scaled head
  // losses (0 unless the stage holds the head). Adds into `times`. ReduceGradients and
  // OptimizerStep go to `actions`; null: passed over (a program's forward and backward alone).
  double run(ModelState& state, const StepInput& in, RankTimes& times,
             StepActions* actions = nullptr);

  const Schedule& schedule() const { return schedule_; }
  const RankProgram& program() const;  // this rank's stage's
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
  void wait_sends(RankTimes& times);  // every send of the step: their receivers post in it
  // The replica's last micro-batch with samples: its backward completes the gradients.
  std::int64_t last_microbatch() const;

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
  std::unique_ptr<ActionCompute> chain_;  // gathering, tracing, emulation around compute_
  std::vector<std::unique_ptr<SendBuffer>> send_pool_;
  std::vector<std::vector<std::vector<int>>> peers_;  // [stage][dp replica][tp rank] -> rank
  StepActions* running_ = nullptr;  // run()'s, for the emulator's progress (null otherwise)
};

}  // namespace eth
