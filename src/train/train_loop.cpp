// The training loop (train_loop.h).
#include "train/train_loop.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "core/error.h"

namespace eth {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TrainLoop::TrainLoop(TrainingRun& run, TrainLoopOptions opts)
    : run_(run),
      opts_(std::move(opts)),
      checkpoints_(opts_.checkpoint_dir, opts_.checkpoint_every),
      first_(run.next_step()) {
  const std::int64_t steps = run_.config().steps;
  end_ = opts_.stop_at > 0 ? std::min(opts_.stop_at, steps) : steps;
}

// Collective: the lead looks for the stop file and every rank takes its answer, so all stop at
// the same step.
bool TrainLoop::stop_asked() {
  if (opts_.stop_file.empty()) return false;
  bool here = false;
  if (run_.is_lead()) {
    std::error_code ec;
    here = std::filesystem::exists(opts_.stop_file, ec);
  }
  return run_.agree(here);
}

TrainLoopResult TrainLoop::run(TrainLoopSink& sink) {
  TrainLoopResult r;
  r.first_step = first_;
  const bool lead = run_.is_lead();
  const Cadence validation(opts_.validate_every > 0, opts_.validate_every);
  const auto t0 = std::chrono::steady_clock::now();
  if (run_.next_step() < end_) run_.begin();
  while (run_.next_step() < end_) {
    sink.before_step(run_.next_step());
    const StepStats s = run_.step();
    r.last = s;
    r.tokens += static_cast<double>(run_.tokens_per_step());
    if (!std::isfinite(s.loss)) {
      throw InputError("train", "--lr", "",
                       "the loss became " + std::to_string(s.loss) + " at step " +
                           std::to_string(s.step) + "; try a smaller learning rate (" +
                           std::to_string(run_.config().lr.lr_max) + ")");
    }
    const std::int64_t next = run_.next_step();
    if (validation.due(next, end_)) {
      const std::optional<double> loss = run_.validate();
      if (loss && lead) sink.on_validation(next, *loss);
    }
    if (lead) sink.on_step(s);
    if (checkpoints_.due(next, end_)) {
      sink.before_checkpoint(next);
      r.checkpoint = run_.save_checkpoint(checkpoints_.dir());
      if (lead) sink.on_checkpoint(r.checkpoint);
      if (next < end_ && stop_asked()) {
        end_ = next;
        r.stop_requested = true;
      }
    }
    if (lead && opts_.print_every > 0 && (s.step % opts_.print_every == 0 || next >= end_)) {
      TrainProgress p;
      p.step = s;
      p.total_steps = run_.config().steps;
      p.elapsed_s = seconds_since(t0);
      p.eta_s = p.elapsed_s / static_cast<double>(next - first_) *
                static_cast<double>(end_ - next);
      sink.on_progress(p);
    }
  }
  r.end_step = end_;
  r.seconds = seconds_since(t0);
  return r;
}

}  // namespace eth
