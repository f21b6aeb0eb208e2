// train_bench --device cuda|emulated (bench/train_bench.cpp hands over here): the GPU trainer's
// speed, measured beside PyTorch in the same run.
//   cuda: gpt2-small (default), sequence 1024, bf16, at the largest micro-batch ETH's own sizing
//     (train/train_memory.h) fits in the GPU's free memory with 8% to spare (or --batch); ETH's
//     tokens/s and model-FLOPs utilization against the GPU preset's dense bf16 peak (989
//     TFLOP/s for the H200; --peak-tflops otherwise), then PyTorch eager and torch.compile on the
//     same GPU (tools/torch_gpt2_gpu.py, each at its own largest micro-batch) and the verdicts of
//     issue 24's targets (ETH >= torch.compile's tokens/s, MFU >= 40%). Where there is no GPU it
//     says so and exits 2 without a figure.
//   emulated: the same code path on the host-emulated GPU at a tiny size (tiny, sequence 64,
//     micro-batch 2), a smoke of the path: it prints that its figures are no GPU's speed.
// ETH runs first and frees the GPU before PyTorch starts, so neither holds memory the other
// could have used.
#pragma once

#include <string>

namespace CLI {
class App;  // <CLI/CLI.hpp> in the .cpp files: src/cli/cli_fwd.h says why
}  // namespace CLI

namespace eth::bench {

struct DeviceBenchOptions {
  std::string device = "cpu";  // cpu: the CPU bench (train_bench.cpp); emulated | cuda: here
  std::string model;           // "": gpt2-small on cuda, tiny on emulated
  std::int64_t batch = 0;      // 0: the largest that fits (cuda), 2 (emulated)
  std::int64_t max_batch = 256;
  std::int64_t seq = 0;        // 0: the model's (1024 for gpt2-small) on cuda, 64 on emulated
  int steps = 0;               // 0: 6 on cuda, 2 on emulated
  int warmup = 0;              // 0: 2 on cuda, 1 on emulated
  std::string python;          // "": python3 (with torch and CUDA)
  bool no_torch = false;
  double peak_tflops = 0;      // 0: the GPU's device type preset
  int torch_timeout_s = 240;
  std::string torch_script;    // "": tools/torch_gpt2_gpu.py of the source tree built from
  bool json = false;
  std::string json_out;        // also write the JSON object to this file (text on stdout)
};

// --device, --max-batch, --peak-tflops, --torch-timeout, --torch-script, --json-out (the rest are train_bench's own flags,
// copied in by its main when given).
void add_device_options(CLI::App& app, DeviceBenchOptions* o);

// Runs the bench and returns the exit code: 0 when ETH's side was measured (the targets' verdicts
// are printed, not the exit code), 1 when it failed (PyTorch's side is still run and printed), 2
// when --device cuda has no GPU here.
int run_device_bench(const DeviceBenchOptions& o);

}  // namespace eth::bench
