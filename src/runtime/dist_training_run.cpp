// DistributedTrainer as a TrainingRun (dist_training_run.h).
#include "runtime/dist_training_run.h"

#include <algorithm>
#include <cstdint>
#include <span>

namespace eth {

StepStats DistTrainingRun::step() {
  StepStats s = trainer_.step();
  times_ = trainer_.gather_times();
  const auto done = std::chrono::steady_clock::now();
  s.seconds = std::chrono::duration<double>(done - clock_).count();
  s.tokens_per_s = static_cast<double>(trainer_.tokens_per_step()) / std::max(s.seconds, 1e-9);
  clock_ = done;
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
