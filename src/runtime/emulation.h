// Emulated heterogeneity: a rank of a device type with slowdown f makes each compute op last f
// times its own compute. The op's CPU time (this thread's, when it runs on one thread) is the
// measure of its compute, not its wall time: on a shared machine the wall time includes waiting
// for a core, and stretching that by f would multiply the noise by f. So the op is stretched to
// f x CPU time by sleeping the difference; with several OpenMP threads the wall time is used.
//
// The sleep ends at a deadline on the monotonic clock (clock_nanosleep, TIMER_ABSTIME, with the
// thread's timer slack cut to 1 ns), and whatever an op still ends late (a wake-up that came
// late, a compute that ran longer than its whole target) is carried into the next op as a
// shorter deadline, so thousands of small ops do not each add a scheduler wake-up: over a run
// of back-to-back ops the rank's time is the sum of its targets. Idle time between two ops (a
// wait on a neighbour) absorbs the carried lateness first: a device that waits would not be
// late. docs/runtime.md "Emulated heterogeneity" has what this moved.
//
// An op may instead be given its nominal length: the emulated device's time for it, from the
// profile (eth train --emulate-from profile). The op then lasts that long whatever its CPU time
// was (at least its real compute): the device has a fixed speed, where f x CPU time inherits
// every slowdown of the machine emulating it, multiplied by f (this VM's CPU time per op rises
// 1.3-1.9x for seconds at a time under its host's load, with no steal accounted).
#pragma once

#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/trace_recorder.h"

namespace eth {

// The nominal lengths of one emulated device's ops (EmulatedOp's nominal_ns), in ms: what the
// profile says a device of its type takes for its stage (the predictor's own per-stage figures).
struct NominalStageTimes {
  double forward_ms = 0, backward_ms = 0;            // a full micro-batch
  double last_forward_ms = 0, last_backward_ms = 0;  // the last micro-batch (partial or not)
  // Per unit of the stage in unit order, the backward's part (sums to backward_ms and
  // last_backward_ms): when each unit's gradient is complete.
  std::vector<double> unit_backward_ms, last_unit_backward_ms;
  double optimizer_ms = 0;  // norm, clipping and AdamW of the device's parameters
};

// A nominal length in ms as EmulatedOp takes it.
inline std::int64_t nominal_ns(double ms) {
  return static_cast<std::int64_t>(std::llround(ms * 1e6));
}

// One rank's emulation state: its slowdown and the lateness carried from op to op. One thread.
class Emulator {
 public:
  // `slowdown` >= 1 (1: ops run as they are); `trace` records each sleep as a Stretch event.
  explicit Emulator(double slowdown = 1.0, TraceRecorder* trace = nullptr);
  ~Emulator();
  Emulator(const Emulator&) = delete;
  Emulator& operator=(const Emulator&) = delete;
  double slowdown() const { return slowdown_; }
  // Called every kProgressNs while an op sleeps, as long as it returns true (work pending): the
  // runtime drives its pending transfers there, as a device's network engine keeps moving data
  // while the device computes. Empty: the sleep is one sleep.
  void set_progress(std::function<bool()> progress) { progress_ = std::move(progress); }
  static constexpr std::int64_t kProgressNs = 100'000;
  // Also drive `progress` while an op computes, from a thread of the emulator's own, every
  // kProgressNs as long as it returns true: a device's copy engine moves data while the device
  // computes, but MPI moves a large message over shared memory only inside its sender's MPI
  // calls, and the compute makes none (traced: a median 0.81 ms, at most 13.6, between a send
  // and its arrival; docs/runtime.md). The thread and the op's own thread never call
  // `progress` at once: an op's finish() waits for a call in flight before it goes on. Only
  // for ranks whose ops make no communication of their own (tp 1), and where the communicator
  // allows calls from a second thread one at a time (MPI_THREAD_SERIALIZED). No effect without
  // a slowdown or a progress function.
  void set_background_progress(bool on);
  // Runs `fn` when the emulated device reaches the point the running op has reached now: the
  // op's start plus slowdown x its compute so far. An op finishes its compute long before its
  // stretch ends, so a result it hands on mid-op (a gradient block whose collective may start)
  // would otherwise leave up to (slowdown - 1) x compute early, and the collective would hide
  // in the stretch where a real device would still be computing. Runs `fn` now when no op
  // runs or nothing is stretched; whatever is still waiting runs when the op finishes.
  void at_emulated_now(std::function<void()> fn);
  // The same for an op of a nominal length: `fn` runs `offset_ns` after the op's start (the
  // emulated device's time for the part of the op done so far; capped at the op's length).
  // Without a nominal length, or with offset_ns < 0, as at_emulated_now.
  void at_emulated_offset(std::int64_t offset_ns, std::function<void()> fn);

 private:
  friend class EmulatedOp;
  struct Due {
    std::int64_t at_ns;
    std::function<void()> fn;
  };
  const class EmulatedOp* running_ = nullptr;
  std::vector<Due> due_;  // the running op's deferred hand-overs, in the order they came
  double slowdown_;
  bool single_thread_;
  TraceRecorder* trace_;
  std::function<bool()> progress_;
  std::int64_t late_ns_ = 0;      // how far the last op ended past its deadline
  std::int64_t last_end_ns_ = 0;  // when it ended (steady clock)

  // The background progress of set_background_progress: computing_ while an op computes,
  // calling_ while the thread is inside progress_.
  void background_loop();
  void compute_begins();
  void compute_ends();
  std::mutex mu_;
  std::condition_variable cv_;
  bool computing_ = false;
  bool calling_ = false;
  bool quit_ = false;
  std::unique_ptr<std::thread> background_;
};

class EmulatedOp {
 public:
  // Starts timing an op of `emulator`'s rank. `nominal_ns` > 0: the op lasts that long (the
  // emulated device's time for it) instead of the slowdown times its compute.
  explicit EmulatedOp(Emulator& emulator, std::int64_t nominal_ns = 0);
  // A lone op (nothing carried from or to other ops), e.g. the optimizer step after the sync.
  explicit EmulatedOp(double slowdown, TraceRecorder* trace = nullptr,
                      std::int64_t nominal_ns = 0);
  ~EmulatedOp();  // an op left by an exception drops what it deferred
  EmulatedOp(const EmulatedOp&) = delete;
  EmulatedOp& operator=(const EmulatedOp&) = delete;
  // Sleeps until the op's deadline; returns the op's whole wall time in seconds.
  double finish();

 private:
  friend class Emulator;
  // Runs the deferred hand-overs due by `now_ns` (all of them when `all`).
  void run_due(std::int64_t now_ns, bool all);

  Emulator own_;  // the lone op's
  Emulator& e_;
  std::int64_t wall0_ = 0;
  std::int64_t cpu0_ = 0;
  std::int64_t nominal_ns_ = 0;
};

}  // namespace eth
