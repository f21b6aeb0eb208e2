// One rank of a distributed run as the training loop's TrainingRun (train/train_loop.h), so
// `eth train --plan` runs the same loop as single-process training. What it adds to
// DistributedTrainer: each step gathers every rank's time split on rank 0 (collective), and a
// step's time is the run's period, not rank 0's own step: from the moment the previous step was
// done on every rank (rank 0 leaves the per-step gather then) to the moment this one was,
// checkpoints and stop requests left out. Rank 0's own step ends with its optimizer while a rank
// with a longer optimizer (a slower device) is still in its own, and the next step cannot pass
// its first collective before that rank joins: timing rank 0 alone read the eth plan of
// bench/runtime_bench 7% faster than it ran.
#pragma once

#include <chrono>
#include <vector>

#include "comm/communicator.h"
#include "runtime/dist_trainer.h"
#include "train/train_loop.h"

namespace eth {

// The steps' times of a run on rank 0: each step's period and every rank's split of it. Means
// leave the first step out when there are more: it pays for first-touch and set-up.
class RunTimes {
 public:
  void add(double step_s, std::vector<RankTimes> ranks);
  std::size_t steps() const { return step_s_.size(); }
  double mean_step_s() const;         // 0 without steps
  RankTimes mean_rank(std::size_t rank) const;

 private:
  std::vector<double> step_s_;
  std::vector<std::vector<RankTimes>> ranks_;  // per step, per rank
};

class DistTrainingRun final : public TrainingRun {
 public:
  // `trainer` runs on `world` (the same communicator it was built with) and outlives this.
  // `validation` (null: none) is what validate() evaluates; every rank passes one or none.
  DistTrainingRun(DistributedTrainer& trainer, const Communicator& world,
                  const ValidationSet* validation = nullptr)
      : trainer_(trainer), world_(world), validation_(validation) {}

  const TrainConfig& config() const override { return trainer_.config().train; }
  std::int64_t next_step() const override { return trainer_.next_step(); }
  std::int64_t tokens_per_step() const override { return trainer_.tokens_per_step(); }
  void begin() override { clock_ = std::chrono::steady_clock::now(); }
  // Collective: DistributedTrainer::step and gather_times; seconds and tokens_per_s are the
  // run's period (above).
  StepStats step() override;
  // Collective; rank 0 writes the file.
  std::filesystem::path save_checkpoint(const std::filesystem::path& dir) override;
  bool is_lead() const override { return world_.rank() == 0; }
  // Collective: rank 0's value broadcast.
  bool agree(bool value) override;
  // Collective: DistributedTrainer::validation_loss.
  std::optional<double> validate() override {
    if (validation_ == nullptr) return std::nullopt;
    return trainer_.validation_loss(*validation_);
  }

  // Every rank's RankTimes of the last step, in rank order, on rank 0 (empty elsewhere).
  const std::vector<RankTimes>& last_rank_times() const { return times_; }
  // Every step's, on rank 0 (no steps elsewhere).
  const RunTimes& times() const { return all_; }

 private:
  DistributedTrainer& trainer_;
  Communicator world_;
  const ValidationSet* validation_;
  std::chrono::steady_clock::time_point clock_ = std::chrono::steady_clock::now();
  std::vector<RankTimes> times_;
  RunTimes all_;
};

}  // namespace eth
