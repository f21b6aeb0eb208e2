// The distributed trainer: one rank of an HPP plan. Builds only this rank's units (its tp shard
// of them), runs its stage's program of the plan's schedule (stage_runner.h), aggregates
// gradients across pipelines, dp replicas and tp degrees (grad_sync.h), and applies the same
// clipped AdamW step every holder of a unit applies, so replicas never drift. Loss, gradient
// norm and checkpoints are those of the whole model and the whole global batch: the numbers
// single-process training (train/trainer.h) computes, up to float rounding, whatever the plan. A library: it never prints; `eth train --plan` drives it.
//
// On a GPU set (cfg.train.device emulated or cuda, bf16): the model state, the stage's buffers,
// the activation messages and the gradient aggregation's buffers are device memory
// (runtime/device_memory_policy.h); pipeline messages, tp all-reduces and gradient collectives
// go over `device_world`, a communicator of device buffers over the same ranks (LocalWorld on
// the device for ranks as threads sharing it, the host-staged communicator for the emulated
// device under MPI, NCCL for a GPU per rank); loss and norm sums, timings and checkpoints go
// over `world` in host memory, the units downloaded through the state's backend.
//
// How to use (every rank of the world):
//   DistributedTrainer t(cfg, world);            // collective: creates the tp and gradient groups
//   while (!t.done()) StepStats s = t.step();    // collective
//   t.save_checkpoint(dir);                      // collective; rank 0 writes the file
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "plan/blocks.h"
#include "data/sampler.h"
#include "data/token_file.h"
#include "plan/plan.h"
#include "runtime/grad_layout.h"
#include "runtime/grad_sync.h"
#include "runtime/placement.h"
#include "runtime/sharded_optimizer.h"
#include "runtime/stage_runner.h"
#include "runtime/tp_comm.h"
#include "runtime/trace_recorder.h"
#include "train/trainer.h"
#include "train/validation.h"

namespace eth {

// What one rank holds: its buffers by role, from the sizes it allocated, and its process's peak
// resident memory (every buffer, the libraries, MPI; under the threads backend all ranks share
// one process, so each reports the same figure).
struct RankMemory {
  double weights = 0, gradients = 0, optimizer_state = 0;  // ModelState::role_bytes
  double activations = 0;  // the stage's activation arena: micro-batch slots and workspace
  double buffers = 0;      // activation-message buffers and gradient-aggregation buffers
  double peak_rss = 0;     // getrusage(RUSAGE_SELF) maximum resident set
  double arenas() const { return weights + gradients + optimizer_state + activations; }
};

struct DistTrainConfig {
  // model, data, steps, lr, adamw, dropout, seed, shuffle as in single-process training;
  // global_batch and seq_len must be the plan's (0 takes them from the plan); micro_batch and
  // recompute are ignored: each pipeline and stage has its own in the plan.
  TrainConfig train;
  Plan plan;
  AggregationMode aggregation = AggregationMode::Block;
  // Emulated heterogeneity: device type -> slowdown factor (>= 1). Types not listed run at 1.
  std::map<std::string, double> slowdown;
  TraceRecorder* trace = nullptr;  // eth train --trace: this rank's recorder (null: off)
  // Emulated ranks of tp 1 drive their transfers from a second thread while an op computes
  // (Emulator::set_background_progress); the communicator must take calls from it.
  bool background_progress = false;
  // Emulation by the profile: [pipeline][stage] the nominal times of one device of each stage
  // (emulation.h); emulated ranks' ops last these instead of their slowdown x their compute.
  // Empty: by CPU time.
  std::vector<std::vector<NominalStageTimes>> nominal;
  // The lowered programs to run, one schedule per pipeline (stage_runner.h lower_plan's form).
  // Empty: lower_plan(plan, aggregation), the simulator's programs. Others are executed as
  // written once check_plan_schedules accepts them (InputError otherwise, before any work).
  std::vector<Schedule> schedules;
};

// The trainer is its runner's StepActions: the program's ReduceGradients and OptimizerStep
// land in its aggregation and optimizer (private: only the runner calls them).
class DistributedTrainer : private StepActions {
 public:
  // Collective. The plan must already have passed check_runnable. With `resume`, every rank
  // loads its own units from the (plan-independent) checkpoint and continues at its step; with
  // cfg.train.init_from (not with `resume`), it loads its units' weights from that checkpoint
  // and starts at step 0 with zero moments (train/init_from.h).
  DistributedTrainer(const DistTrainConfig& cfg, const Communicator& world,
                     const std::optional<std::filesystem::path>& resume = std::nullopt);
  // The same with the communicator of device buffers (above): rank r of `device_world` is rank
  // r of `world`. On the CPU it may be `world` itself (what the constructor above passes).
  DistributedTrainer(const DistTrainConfig& cfg, const Communicator& world,
                     const Communicator& device_world,
                     const std::optional<std::filesystem::path>& resume = std::nullopt);
  ~DistributedTrainer() override;

  const DistTrainConfig& config() const { return cfg_; }
  const RankPlace& place() const { return place_; }
  const ModelState& state() const { return state_; }
  const GradSync& grad_sync() const { return *sync_; }
  // The sharded optimizer (null when the plan's optimizer_sharding is none).
  const ShardedOptimizer* sharded_optimizer() const { return sharded_.get(); }
  // This rank's tp group (null at tp 1) and its communication in the last step.
  const CommTpGroup* tp_group() const { return tp_group_.get(); }
  const TpCommStats& last_tp_stats() const { return tp_stats_; }
  // The programs this run executes (cfg.schedules or lower_plan), one per pipeline.
  const std::vector<Schedule>& schedules() const { return schedules_; }
  // The gradient collectives this rank posted in the last step, in order (block-wise with a
  // sharded optimizer: the blocks it reduce-scattered): what its program's ReduceGradients
  // actions named, less those it does not join.
  const std::vector<std::int64_t>& last_collectives() const;
  std::int64_t next_step() const { return next_step_; }
  bool done() const { return next_step_ >= cfg_.train.steps; }
  std::int64_t tokens_per_step() const { return cfg_.plan.gbs * seq_len_; }
  double slowdown() const { return slowdown_; }

  // One optimizer step over the global batch; collective. Every rank returns the same loss
  // (mean token loss of the global batch), learning rate and gradient norm.
  StepStats step();
  // This rank's time split of the last step.
  const RankTimes& last_times() const { return times_; }
  // Every rank's RankTimes of the last step, in rank order, on rank 0 (empty elsewhere).
  std::vector<RankTimes> gather_times() const;
  // This rank's memory now (after a step its peak: nothing grows after the first).
  RankMemory memory() const;
  // Collective: every rank's memory(), in rank order, on rank 0 (empty elsewhere).
  std::vector<RankMemory> gather_memory() const;

  // Collective: the owners of the units (every tp rank of pipeline 0's stage replica 0) send
  // their shards to rank 0, which joins them into whole tensors and writes
  // <dir>/step_<next_step>.safetensors atomically (the single-process format). Returns the path.
  std::filesystem::path save_checkpoint(const std::filesystem::path& dir);

  // Collective: the mean token loss of `set` at this step's weights, on every rank. Rank 0
  // gathers the units as save_checkpoint does (parameters only), in the run's precision, and
  // evaluates them in one process; so the number is the single-process one at these weights,
  // whatever the plan. Rank 0 holds a whole copy of the model meanwhile (the checkpoint's).
  double validation_loss(const ValidationSet& set);

 private:
  // Collective: the whole model (tp 1, every unit) on rank 0, nullopt elsewhere; with `moments`
  // the AdamW moments too. Compute copy refreshed.
  std::optional<ModelState> gather_whole(bool moments, Precision precision);
  // StepActions (stage_runner.h), called by runner_ inside step().
  bool joins(std::int64_t block) const override;
  void begin(const std::vector<std::int64_t>& blocks) override;
  bool posts_early() const override { return !scatters(); }
  void units_done(float* grads, std::int64_t lowest_done_unit) override;
  void reduce(float* grads, std::int64_t block, RankTimes& times) override;
  void optimizer_step(double loss, RankTimes& times) override;
  bool progress() override { return !scatters() && sync_->progress(); }
  // Block-wise with a sharded optimizer the blocks are reduce-scattered at their ReduceGradients
  // actions instead of all-reduced.
  bool scatters() const { return sharded_ && sharded_->reduces_gradients(); }
  CheckpointMeta make_meta() const;
  // The stage that speaks for unit u: pipeline 0's holder; its dp rank 0 replica's tp ranks
  // own the unit's elements (each its shard, tp rank 0 the replicated tensors too).
  const StagePlan& owner_stage(std::int64_t unit) const;
  bool owns(std::int64_t unit) const;  // this rank is one of the unit's owners
  std::vector<const StagePlan*> owner_stages_;  // per unit
  // The gradient-buffer runs of each block this rank counts in the gradient norm (owners only).
  std::vector<std::vector<PackRun>> norm_runs_;

  DistTrainConfig cfg_;
  Communicator world_;
  Communicator device_world_;
  RankPlace place_;
  std::int64_t seq_len_ = 0;
  double slowdown_ = 1.0;
  std::int64_t optimizer_nominal_ns_ = 0;  // 0: the optimizer is stretched by its CPU time
  TokenFile data_;
  GlobalSampler sampler_;
  ModelState state_;
  std::unique_ptr<CommTpGroup> tp_group_;
  TpCommStats tp_stats_;
  std::unique_ptr<StageRunner> runner_;
  std::unique_ptr<GradSync> sync_;
  std::unique_ptr<ShardedOptimizer> sharded_;
  std::int64_t next_step_ = 0;
  RankTimes times_;
  std::vector<Schedule> schedules_;
  StepStats stats_;  // the running step's, filled by optimizer_step
  bool stepped_ = false;
  std::vector<std::int64_t> scattered_;  // blocks reduce-scattered in the last step
};

}  // namespace eth
