// train_bench's CPU path (the default, --device cpu): ETH bf16 and fp32 training steps beside
// PyTorch fp32 and bf16, alternated round by round (train_bench_cpu.cpp), and the report of
// their figures, ratios and issue 13's targets (train_bench_cpu_report.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "peak_probe.h"
#include "kernels/cpu/cpu_features.h"
#include "model/model_spec.h"

namespace eth::bench {

struct CpuBenchOptions {
  std::string model_name = "gpt2-small", recompute = "none";
  std::string python;  // "": the virtualenv's
  std::string venv;
  std::int64_t batch = 4, seq = 256;
  int threads = 2, steps = 3, warmup = 1, rounds = 2;
  bool no_torch = false, gemm_baseline = false, json = false;
};

// Measures and prints; the exit code (1: bad options or a build for another CPU).
int run_cpu_bench(CpuBenchOptions o);

// The fastest of `v` (0 for none): the step least disturbed by the shared machine's other load.
inline double fastest(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::min_element(v.begin(), v.end());
}

// One configuration's steps.
struct Series {
  std::string name;
  std::vector<double> step_s;
  double tok_s(std::int64_t tokens) const {
    return step_s.empty() ? 0 : static_cast<double>(tokens) / fastest(step_s);
  }
};

// What one run measured, as the report reads it.
struct CpuRun {
  CpuBenchOptions opt;
  ModelSpec model;
  const cpu::CpuFeatures* cpu = nullptr;
  bool native_bf16 = false;
  Series e16{"ETH bf16", {}}, e32{"ETH fp32", {}}, t32{"PyTorch fp32", {}}, t16{"PyTorch bf16", {}};
  double loss16 = 0, loss32 = 0;
  double act16 = 0, act32 = 0;                    // activation arenas
  double held16 = 0, held32 = 0;                  // held bytes per slot
  double state16 = 0, state32 = 0;                // model state
  double rss = 0;                                 // peak RSS with both trainers
  double setup_s = 0;
  ::bench::ArithmeticPeak peak;
  double load_start = 0;
  std::vector<double> load_rounds;
  bool gemm = false;                              // --gemm ran
  double gemm_flops = 0;                          // per sequence of the step's GEMMs
  std::vector<double> gemm_s;
  nlohmann::json torch_result;                    // the server's summary or its error
  std::int64_t tokens() const { return opt.batch * opt.seq; }
};

void print_cpu_json(const CpuRun& r);
void print_cpu_text(const CpuRun& r);

}  // namespace eth::bench
