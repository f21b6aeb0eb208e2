// The training loop of `eth train`, with or without --plan: one loop over a TrainingRun (the
// single-process Trainer through TrainerRun below, or one rank of a distributed run through
// runtime/dist_training_run.h). The loop owns what both modes share: when the run stops (the
// schedule's end, --stop-at, a stop request at a checkpoint, a loss that is not finite), when a
// checkpoint is written (CheckpointCadence), when a progress line is due and its ETA, and the
// order of all of it. A library: it never prints; the caller's TrainLoopSink reports.
//
// The order of one iteration, the same on every rank of a distributed run:
//   sink.before_step(s)            every rank (eth's fault injection hooks in here)
//   run.step()                     collective in a distributed run
//   loss not finite -> InputError  every rank sees the same loss
//   validation (when due)          run.validate() (collective); lead: sink.on_validation, so
//                                  the step's log line can carry the validation loss
//   sink.on_step(stats)            lead only: the log line, before the checkpoint, so a step
//                                  logged is a step done even if the run dies checkpointing
//   checkpoint (when due):         sink.before_checkpoint (every rank), run.save_checkpoint
//                                  (collective), lead: sink.on_checkpoint; then, before the
//                                  end, a stop request (the lead's answer, agreed by all)
//   sink.on_progress(p)            lead only, every print_every steps and at the last step
// An exception from the run or the sink ends the loop and propagates unchanged.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <utility>

#include "train/trainer.h"
#include "train/validation.h"

namespace eth {

// What the loop drives. In a distributed run every rank has one, and the loop makes the same
// calls on each in the same order (its decisions depend only on values all ranks share).
class TrainingRun {
 public:
  virtual ~TrainingRun() = default;
  virtual const TrainConfig& config() const = 0;  // steps: the schedule's length
  virtual std::int64_t next_step() const = 0;     // the optimizer step step() takes next
  virtual std::int64_t tokens_per_step() const = 0;
  // Called once, just before the first step: a run that times its steps starts its clock here.
  virtual void begin() {}
  // One optimizer step; next_step() + 1.
  virtual StepStats step() = 0;
  // Writes <dir>/step_<next_step>.safetensors; returns its path (on every rank).
  virtual std::filesystem::path save_checkpoint(const std::filesystem::path& dir) = 0;
  // The rank that reports (a single process always is).
  virtual bool is_lead() const { return true; }
  // The lead's `value`, on every rank (collective in a distributed run).
  virtual bool agree(bool value) { return value; }
  // Extension point for a held-out loss (issue 26, --val-data): the mean token loss of the
  // validation set at the current weights, the same on every rank; nullopt: none configured.
  virtual std::optional<double> validate() { return std::nullopt; }
};

// Trainer as a TrainingRun; `validation` (null: none; it outlives this) is evaluated at the
// trainer's weights.
class TrainerRun final : public TrainingRun {
 public:
  explicit TrainerRun(Trainer& trainer, const ValidationSet* validation = nullptr)
      : trainer_(trainer), validation_(validation) {}
  const TrainConfig& config() const override { return trainer_.config(); }
  std::int64_t next_step() const override { return trainer_.next_step(); }
  std::int64_t tokens_per_step() const override { return trainer_.tokens_per_step(); }
  StepStats step() override { return trainer_.step(); }
  std::filesystem::path save_checkpoint(const std::filesystem::path& dir) override {
    return trainer_.save_checkpoint(dir);
  }
  std::optional<double> validate() override {
    if (validation_ == nullptr) return std::nullopt;
    return validation_->loss(trainer_.state());
  }

 private:
  Trainer& trainer_;
  const ValidationSet* validation_;
};

// "Every K steps and at the end": due once `next_step` steps are done (next_step a multiple of
// `every`, or the run's end reached). every 0: at the end only. Disabled (never due) when
// `enabled` is false: no --checkpoint-dir, no validation set.
class Cadence {
 public:
  Cadence(bool enabled, std::int64_t every) : enabled_(enabled), every_(every) {}
  bool enabled() const { return enabled_; }
  bool due(std::int64_t next_step, std::int64_t end) const {
    if (!enabled_) return false;
    return (every_ > 0 && next_step % every_ == 0) || next_step >= end;
  }

 private:
  bool enabled_;
  std::int64_t every_;
};

// Checkpoints of a run: into `dir` (empty: none), every `every` steps (0: at the end only) and
// at the end, each a new step_<N>.safetensors (the trainer's file; none is removed).
class CheckpointCadence {
 public:
  CheckpointCadence(std::filesystem::path dir, std::int64_t every)
      : dir_(std::move(dir)), cadence_(!dir_.empty(), every) {}
  const std::filesystem::path& dir() const { return dir_; }
  bool due(std::int64_t next_step, std::int64_t end) const {
    return cadence_.due(next_step, end);
  }

 private:
  std::filesystem::path dir_;
  Cadence cadence_;
};

struct TrainLoopOptions {
  std::int64_t stop_at = 0;  // > 0: stop once this step is reached (the schedule unchanged)
  std::filesystem::path checkpoint_dir;  // empty: no checkpoints
  std::int64_t checkpoint_every = 0;     // 0: at the end only
  // After a checkpoint before the end: when this file exists (the lead looks), every rank stops
  // there. Empty: never. eth launch --elastic asks a run to stop this way.
  std::filesystem::path stop_file;
  std::int64_t print_every = 1;     // progress cadence in steps (0: none); the last step too
  // Validation every K steps and at the end (0: never); a run without a set returns nullopt.
  std::int64_t validate_every = 0;
};

struct TrainProgress {
  StepStats step;                // the step just taken
  std::int64_t total_steps = 0;  // the schedule's length
  double elapsed_s = 0;          // since the loop began
  double eta_s = 0;              // to the run's end, at the loop's mean pace so far
};

// What the caller reports; every method does nothing unless overridden. See the order above.
class TrainLoopSink {
 public:
  virtual ~TrainLoopSink() = default;
  virtual void before_step(std::int64_t /*step*/) {}
  virtual void on_step(const StepStats& /*stats*/) {}
  // The validation loss at the weights after step next_step - 1, just before that step's on_step.
  virtual void on_validation(std::int64_t /*next_step*/, double /*loss*/) {}
  virtual void before_checkpoint(std::int64_t /*next_step*/) {}
  virtual void on_checkpoint(const std::filesystem::path& /*path*/) {}
  virtual void on_progress(const TrainProgress& /*progress*/) {}
};

struct TrainLoopResult {
  std::int64_t first_step = 0;  // next_step() when the loop began
  std::int64_t end_step = 0;    // where it stopped (<= first_step: there was nothing to do)
  std::optional<StepStats> last;  // the last step taken; none when nothing was to do
  double tokens = 0;              // tokens trained
  double seconds = 0;             // wall time of the loop
  std::filesystem::path checkpoint;  // the last written; empty when none
  bool stop_requested = false;       // ended early at a checkpoint by stop_file
};

class TrainLoop {
 public:
  TrainLoop(TrainingRun& run, TrainLoopOptions opts);
  std::int64_t first_step() const { return first_; }
  // The step the run stops at unless a stop request ends it sooner.
  std::int64_t end_step() const { return end_; }
  // Runs to the end; throws what the run or the sink throws. Call once.
  TrainLoopResult run(TrainLoopSink& sink);

 private:
  bool stop_asked();
  TrainingRun& run_;
  TrainLoopOptions opts_;
  CheckpointCadence checkpoints_;
  std::int64_t first_ = 0;
  std::int64_t end_ = 0;
};

}  // namespace eth
