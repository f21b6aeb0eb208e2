// Measured profiles: times each unit's forward and backward (and the extra backward time of
// recomputing each operator class) with the training kernels of a compute device, reads the
// activation bytes off the buffers StageCompute really allocates, giving a ProfileEntry that the
// planner uses like any other. `eth profile --measure` calls this.
//   cpu: the CPU kernel sets, on one thread in the thread's CPU time (as the runtime's emulation
//     measures an op), on more in wall time; memory is host memory (the process's resident set
//     as the baseline). Device type "cpu".
//   emulated, cuda: the GPU kernel set (GpuKernels<EmulatedApi> / <CudaApi>, bf16 only), on cuda
//     each op in wall time between two device synchronizations (the emulated device's calls run
//     to completion on the calling thread: timed as the CPU's); the stage, the model state and the
//     boundary tensors in device memory, so the activation bytes are device bytes, and the
//     baseline is the device memory the process holds besides its model buffers (the driver's
//     figure on cuda: context and cuBLASLt workspaces). The caller names the device type (the
//     CLI: the GPU's preset, e.g. H200; "emulated" for the emulated device, whose times are the
//     host CPU's and model no GPU).
// Not a benchmark harness: one process, median of repeats, nothing printed.
//
// How to use:
//   MeasureOptions o{.model = m, .micro_batch = 4, .seq_len = 256, .threads = 1};
//   check_measure_options(o, physical_memory_bytes);   // InputError naming the flag, no work
//   ProfileDb db(m); db.add(measure_profile(o));        // then profile/profile_io.h writes it
#pragma once

#include <cstdint>
#include <string>

#include "core/precision.h"
#include "train/compute_device.h"
#include "model/model_spec.h"
#include "profile/profile.h"

namespace eth {

struct MeasureOptions {
  ModelSpec model;
  std::int64_t micro_batch = 1;
  std::int64_t seq_len = 0;     // 0: the model's
  int threads = 0;              // OpenMP threads while measuring; 0: the caller's setting
  int warmup = 1;               // untimed runs first (caches, GEMM library set-up)
  int repeats = 3;              // timed runs; the median is kept
  bool recompute_times = true;  // also time backward under each operator class's recompute
  float dropout = 0;            // > 0 also holds (and measures) the dropout masks
  // Stream 64 MiB through the caches before each timed forward and backward, so every op starts
  // with its weights and activations out of cache: the condition of a rank that shares its core
  // (the runtime's emulation) or whose stage outgrows the caches. false: back-to-back repeats,
  // caches warm (a small stage alone on its core). docs/runtime.md has what each gives.
  // The cpu device only: a GPU's caches are not the host's.
  bool cold_cache = true;
  // Other cores that stream an optimizer step of their own while the optimizer is timed: a run
  // whose ranks fill the node takes every rank's step at once, right after the gradient sync,
  // and the step is bound by the memory bandwidth they share. `eth profile --measure` uses
  // every other core by default (--optimizer-neighbours); 0 times the step alone. The cpu
  // device only (a GPU's optimizer step streams its own memory): 0 on the others.
  int optimizer_neighbours = 0;
  // The kernels measured and where the buffers live (compute_device.h); a GPU device measures
  // bf16 only.
  ComputeDevice device = ComputeDevice::Cpu;
  std::string device_type = "cpu";
  std::uint64_t seed = 1;
  // The kernels measured (fp32 or bf16); the entry records it, and its activation bytes and the
  // optimizer step are that precision's.
  Precision precision = Precision::Fp32;
  // The process's resident memory before any model buffer, recorded in the entry
  // (ProfileEntry::process_baseline_bytes): `eth profile --measure` reads it once at start-up
  // (process_resident_bytes) and passes it to every size. Negative: read it when measuring
  // starts (on a GPU device: the device memory in use before the first model buffer or after
  // the last is freed, whichever is larger; the second includes cuBLASLt's workspace).
  double process_baseline_bytes = -1;
};

// This process's resident set size now (VmRSS of /proc/self/status), bytes; 0 where unknown.
double process_resident_bytes();

// Bytes measure_profile(opt) maps at its peak: the largest unit's model state (parameters,
// gradients, AdamW moments, the bf16 copy), two StageCompute arenas (base and recompute), the
// boundary tensors and, cold, the 64 MiB the caches are flushed with. On a GPU device these are
// device bytes (no flush buffer, no neighbours).
// Requires options that pass check_measure_options' size checks.
double measure_peak_bytes(const MeasureOptions& opt);

// Throws InputError("profile", flag, ...) for options that cannot be measured, before any
// work: micro_batch < 1 (--micro-batch-sizes), seq_len outside 1..model seq_len (--seq),
// threads < 0 (--threads), optimizer_neighbours < 0 (--optimizer-neighbours), dropout outside
// [0, 1) (--dropout), a precision other than fp32 and bf16 (--precision; on a GPU device other
// than bf16), neighbours on a GPU device (--optimizer-neighbours), and a peak above
// memory_limit_bytes (--micro-batch-sizes, naming the size and the bytes it needs; on a GPU
// device pass its free memory).
void check_measure_options(const MeasureOptions& opt, double memory_limit_bytes);

// One entry (tp 1, mbs = micro_batch, source "measured", seq_len = the resolved T, precision
// opt.precision). Throws what
// check_measure_options throws (without the memory check). Units are measured one at a time
// (each with its own state and buffers), so the peak is one unit's, not the model's.
ProfileEntry measure_profile(const MeasureOptions& opt);

}  // namespace eth
