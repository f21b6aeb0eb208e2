// Stretching compute ops for emulation. See emulation.h.
#include "runtime/emulation.h"

#include <omp.h>
#include <sys/prctl.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>

namespace eth {

namespace {

// Sleeps until `deadline_ns` on the monotonic clock (std::chrono::steady_clock's), resuming
// after signals.
void sleep_until_ns(std::int64_t deadline_ns) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(deadline_ns / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(deadline_ns % 1'000'000'000);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

}  // namespace

Emulator::Emulator(double slowdown, TraceRecorder* trace)
    : slowdown_(slowdown), single_thread_(omp_get_max_threads() == 1), trace_(trace) {
  // The default timer slack (50 us) would let every sleep end up to 50 us late.
  if (slowdown_ > 1.0) prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
}

Emulator::~Emulator() {
  if (!background_) return;
  {
    const std::lock_guard<std::mutex> lock(mu_);
    quit_ = true;
  }
  cv_.notify_all();
  background_->join();
}

void Emulator::set_background_progress(bool on) {
  if (!on || background_ || slowdown_ <= 1.0 || !progress_) return;
  background_ = std::make_unique<std::thread>([this] { background_loop(); });
}

void Emulator::background_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return quit_ || computing_; });
    if (quit_) return;
    // Polls while the op computes and transfers are pending; then waits for the next op.
    bool pending = true;
    while (computing_ && pending && !quit_) {
      calling_ = true;
      lock.unlock();
      pending = progress_();
      lock.lock();
      calling_ = false;
      cv_.notify_all();
      if (pending) {
        cv_.wait_for(lock, std::chrono::nanoseconds(kProgressNs),
                     [this] { return quit_ || !computing_; });
      }
    }
    cv_.wait(lock, [this] { return quit_ || !computing_; });
  }
}

void Emulator::compute_begins() {
  if (!background_) return;
  {
    const std::lock_guard<std::mutex> lock(mu_);
    computing_ = true;
  }
  cv_.notify_all();
}

void Emulator::compute_ends() {
  if (!background_) return;
  std::unique_lock<std::mutex> lock(mu_);
  computing_ = false;
  cv_.notify_all();
  cv_.wait(lock, [this] { return !calling_; });
}

void Emulator::at_emulated_now(std::function<void()> fn) {
  if (running_ == nullptr || slowdown_ <= 1.0) {
    fn();
    return;
  }
  const EmulatedOp& op = *running_;
  const std::int64_t compute = single_thread_ ? TraceRecorder::thread_cpu_ns() - op.cpu0_
                                              : TraceRecorder::now_ns() - op.wall0_;
  due_.push_back({op.wall0_ + static_cast<std::int64_t>(std::llround(slowdown_ * static_cast<double>(compute))),
                  std::move(fn)});
}

void Emulator::at_emulated_offset(std::int64_t offset_ns, std::function<void()> fn) {
  if (running_ == nullptr || slowdown_ <= 1.0 || running_->nominal_ns_ <= 0 || offset_ns < 0) {
    at_emulated_now(std::move(fn));
    return;
  }
  const EmulatedOp& op = *running_;
  due_.push_back({op.wall0_ + std::min(offset_ns, op.nominal_ns_), std::move(fn)});
}

EmulatedOp::EmulatedOp(Emulator& emulator, std::int64_t nominal_ns)
    : e_(emulator),
      wall0_(TraceRecorder::now_ns()),
      cpu0_(e_.slowdown_ > 1.0 && e_.single_thread_ ? TraceRecorder::thread_cpu_ns() : 0),
      nominal_ns_(nominal_ns) {
  e_.running_ = this;
  e_.compute_begins();
}

EmulatedOp::EmulatedOp(double slowdown, TraceRecorder* trace, std::int64_t nominal_ns)
    : own_(slowdown, trace),
      e_(own_),
      wall0_(TraceRecorder::now_ns()),
      cpu0_(e_.slowdown_ > 1.0 && e_.single_thread_ ? TraceRecorder::thread_cpu_ns() : 0),
      nominal_ns_(nominal_ns) {
  e_.running_ = this;
}

EmulatedOp::~EmulatedOp() {
  if (e_.running_ == this) {
    e_.compute_ends();
    e_.running_ = nullptr;
    e_.due_.clear();
  }
}

void EmulatedOp::run_due(std::int64_t now_ns, bool all) {
  // In arrival order: a hand-over computed later is never due earlier (compute, or the nominal
  // offset of the units done, only grows).
  std::size_t n = 0;
  while (n < e_.due_.size() && (all || e_.due_[n].at_ns <= now_ns)) e_.due_[n++].fn();
  e_.due_.erase(e_.due_.begin(), e_.due_.begin() + static_cast<std::ptrdiff_t>(n));
}

double EmulatedOp::finish() {
  std::int64_t end = TraceRecorder::now_ns();
  e_.compute_ends();  // from here on this thread drives the transfers
  if (e_.slowdown_ > 1.0) {
    const std::int64_t compute =
        e_.single_thread_ ? TraceRecorder::thread_cpu_ns() - cpu0_ : end - wall0_;
    const std::int64_t target =
        nominal_ns_ > 0
            ? nominal_ns_
            : static_cast<std::int64_t>(std::llround(e_.slowdown_ * static_cast<double>(compute)));
    // Lateness carried from the previous op, less the idle time since it ended.
    const std::int64_t carried = std::max<std::int64_t>(0, e_.late_ns_ - (wall0_ - e_.last_end_ns_));
    const std::int64_t deadline = wall0_ + target - carried;
    if (end < deadline) {
      TraceEvent stretch;
      stretch.kind = TraceKind::Stretch;
      stretch.start_ns = end;
      stretch.cpu_ns = compute;
      // Hand on each deferred result at its emulated time, and drive pending transfers in
      // slices while there are any; then sleep out the rest.
      for (;;) {
        run_due(end, false);
        std::int64_t wake = deadline;
        if (!e_.due_.empty()) wake = std::min(wake, e_.due_.front().at_ns);
        const bool pending = e_.progress_ && e_.progress_();
        if (pending) wake = std::min(wake, end + Emulator::kProgressNs);
        if (wake >= deadline) break;
        sleep_until_ns(wake);
        end = TraceRecorder::now_ns();
      }
      if (end < deadline) sleep_until_ns(deadline);
      end = TraceRecorder::now_ns();
      stretch.end_ns = end;
      stretch.late_ns = end - deadline;
      if (e_.trace_ != nullptr) e_.trace_->add(stretch);
    }
    e_.late_ns_ = std::max<std::int64_t>(0, end - deadline);
    e_.last_end_ns_ = end;
  }
  run_due(end, true);
  e_.running_ = nullptr;
  return static_cast<double>(end - wall0_) * 1e-9;
}

}  // namespace eth
