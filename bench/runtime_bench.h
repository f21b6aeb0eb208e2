// What runtime_bench's pieces share: the aggregation model (the MPI worker times its plans, the
// section prints it), the sections' setup, and the summary row every section ends with.
// The sections and the file each lives in: runtime_bench.cpp's head.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/json_cursor.h"
#include "model/model_spec.h"

namespace eth::bench {

// 12 blocks of hidden 256: 9.6 M parameters, 38 MB of fp32 gradients on a whole-model holder.
inline ModelSpec aggregation_model() {
  return ModelSpec{"bench-12x256", 12, 256, 4, 128, 2048, 1024};
}

// The MPI worker of section (1) (runtime_bench --worker-aggregation KIND RANKS REPS): times each
// aggregation mode of the plan; rank 0 prints one JSON line per mode.
int aggregation_worker(const std::string& kind, int ranks, int reps);

// Section (1): launches the worker (`self`: this program) under mpirun and reports its rows.
Json aggregation_section(const std::string& self, bool quick, bool json);

// What the sections share: the tool, a scratch folder, the steps per run and runs per plan.
struct Setup {
  std::string eth;
  std::filesystem::path dir;
  // 20 steps a run: with 10, one run in five of some plan left 0.90-1.10 on the quiet machine
  // (four ranks time-sharing two vCPUs); with 20 all fifteen held (docs/runtime.md).
  int steps = 20;
  int runs = 5;
  bool quick = false;
  bool json = false;  // rows into the document, no tables
  std::string emulate_from = "auto";  // eth train --emulate-from for the emulated runs
};

// Sections (2) and (3), through the built `eth`.
Json emulated_section(const Setup& s);
Json cpu2_section(const Setup& s);

// A summary row: min, median and max of `v`, printed unless `json`, and whether they meet the
// target: every run inside [lo, hi], or with `median_only` the median (the cpu-2 target is on
// the median of its runs, the emulated ones on each run).
Json summary(const std::string& section, const std::string& what, const std::vector<double>& v,
             double lo, double hi, bool json, bool median_only = false);

}  // namespace eth::bench
