// Emulated heterogeneity: a rank of a device type with slowdown f makes each compute op last f
// times its own compute. The op's CPU time (this thread's, when it runs on one thread) is the
// measure of its compute, not its wall time: on a shared machine the wall time includes waiting
// for a core, and stretching that by f would multiply the noise by f. So the op is stretched to
// f x CPU time by sleeping the difference; with several OpenMP threads the wall time is used.
#pragma once

#include <chrono>

#include "runtime/trace_recorder.h"

namespace eth {

class EmulatedOp {
 public:
  // Starts timing an op on a rank whose ops are stretched by `slowdown` (>= 1; 1: no stretch).
  // With `trace`, the sleep is recorded as a Stretch event.
  explicit EmulatedOp(double slowdown, TraceRecorder* trace = nullptr);
  // Sleeps until the op has lasted slowdown x its compute; returns the op's whole wall time.
  double finish();

 private:
  double slowdown_;
  bool single_thread_;
  TraceRecorder* trace_;
  std::chrono::steady_clock::time_point wall0_;
  double cpu0_ = 0;
};

}  // namespace eth
