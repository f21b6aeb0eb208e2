// Stretching compute ops for emulation. See emulation.h.
#include "runtime/emulation.h"

#include <omp.h>
#include <time.h>

#include <thread>

namespace eth {

namespace {

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

EmulatedOp::EmulatedOp(double slowdown, TraceRecorder* trace)
    : slowdown_(slowdown),
      single_thread_(omp_get_max_threads() == 1),
      trace_(trace),
      wall0_(std::chrono::steady_clock::now()),
      cpu0_(slowdown > 1.0 && single_thread_ ? thread_cpu_seconds() : 0) {}

double EmulatedOp::finish() {
  if (slowdown_ > 1.0) {
    const double wall = since(wall0_);
    const double compute = single_thread_ ? thread_cpu_seconds() - cpu0_ : wall;
    const double extra = slowdown_ * compute - wall;
    if (extra > 0) {
      TraceScope stretch(trace_, TraceKind::Stretch);
      std::this_thread::sleep_for(std::chrono::duration<double>(extra));
    }
  }
  return since(wall0_);
}

}  // namespace eth
