// Measured profiles: times each unit's forward and backward (and the extra backward time of
// recomputing each operator class) with the training kernels on this machine, and reads the
// activation bytes off the buffers StageCompute really allocates, giving a ProfileEntry of
// device type "cpu" that the planner uses like any other. `eth profile --measure` calls this.
// Not a benchmark harness: one process, the caller's OpenMP thread count, median of repeats.
#pragma once

#include <cstdint>
#include <string>

#include "model/model_spec.h"
#include "profile/profile.h"

namespace eth {

struct MeasureOptions {
  ModelSpec model;
  std::int64_t micro_batch = 1;
  std::int64_t seq_len = 0;     // 0: the model's
  int warmup = 1;               // untimed runs first (caches, GEMM library set-up)
  int repeats = 3;              // timed runs; the median is kept
  bool recompute_times = true;  // also time backward under each operator class's recompute
  float dropout = 0;
  std::string device_type = "cpu";
  std::uint64_t seed = 1;
};

// One entry (tp 1, mbs = micro_batch, source "measured"). ETH_CHECKs the options; throws
// InputError("profile", "--micro-batch-sizes"/"--seq", ...) for sizes the model cannot take.
ProfileEntry measure_profile(const MeasureOptions& opt);

}  // namespace eth
