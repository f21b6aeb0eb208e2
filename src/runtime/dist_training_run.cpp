// DistributedTrainer as a TrainingRun (dist_training_run.h).
#include "runtime/dist_training_run.h"

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>

namespace eth {

void RunTimes::add(double step_s, std::vector<RankTimes> ranks) {
  step_s_.push_back(step_s);
  ranks_.push_back(std::move(ranks));
}

double RunTimes::mean_step_s() const {
  if (step_s_.empty()) return 0;
  const std::size_t from = step_s_.size() > 1 ? 1 : 0;
  double t = 0;
  for (std::size_t i = from; i < step_s_.size(); ++i) t += step_s_[i];
  return t / static_cast<double>(step_s_.size() - from);
}

RankTimes RunTimes::mean_rank(std::size_t rank) const {
  RankTimes m;
  const std::size_t from = ranks_.size() > 1 ? 1 : 0;
  for (std::size_t i = from; i < ranks_.size(); ++i) {
    const RankTimes& t = ranks_[i][rank];
    m.compute_s += t.compute_s;
    m.wait_s += t.wait_s;
    m.sync_s += t.sync_s;
    m.optimizer_s += t.optimizer_s;
    m.step_s += t.step_s;
  }
  const double n = static_cast<double>(std::max<std::size_t>(1, ranks_.size() - from));
  m.compute_s /= n, m.wait_s /= n, m.sync_s /= n, m.optimizer_s /= n, m.step_s /= n;
  return m;
}

StepStats DistTrainingRun::step() {
  StepStats s = trainer_.step();
  times_ = trainer_.gather_times();
  const auto done = std::chrono::steady_clock::now();
  s.seconds = std::chrono::duration<double>(done - clock_).count();
  s.tokens_per_s = static_cast<double>(trainer_.tokens_per_step()) / std::max(s.seconds, 1e-9);
  clock_ = done;
  if (world_.rank() == 0) all_.add(s.seconds, times_);
  return s;
}

std::filesystem::path DistTrainingRun::save_checkpoint(const std::filesystem::path& dir) {
  std::filesystem::path path = trainer_.save_checkpoint(dir);
  clock_ = std::chrono::steady_clock::now();  // the checkpoint is not the next step's
  return path;
}

bool DistTrainingRun::agree(bool value) {
  std::int64_t v = value ? 1 : 0;
  world_.broadcast(std::span<std::int64_t>(&v, 1), 0);
  clock_ = std::chrono::steady_clock::now();  // nor is the stop request
  return v != 0;
}

}  // namespace eth
