// train_bench: one training step of a GPT (default gpt2-small, micro-batch 4, sequence 256,
// 2 threads) in four configurations measured in one run: ETH bf16 (bf16 compute, fp32 master
// weights), ETH fp32, PyTorch fp32 and PyTorch bf16 (torch.autocast) on the identical model,
// PyTorch configured as its CPU tuning guide recommends (tools/torch_gpt2_step.py) and installed
// by this bench into a virtualenv under the build folder (the newest torch on PyPI). Prints the
// CPU model and its extensions, the load average, tokens/s of each configuration, the same-run
// ratios and the verdict of every target of issue 13 that applies to this CPU:
//   - with bf16 instructions: ETH bf16 >= 1.6x ETH fp32 and >= 2x the faster PyTorch;
//   - without: ETH bf16 >= 0.9x ETH fp32 with <= 0.55x its activation memory, and ETH fp32
//     >= 1.5x the faster PyTorch.
// The machines are shared: every round runs one step of each configuration in turn, so a burst
// of someone else's load hits all of them; the best step of each is reported beside the ratio of
// medians. --gemm adds the fp32 GEMM library's rate on the step's shapes. Not a test.
// The pieces: this file (the options), train_bench_cpu.cpp (the CPU measurement),
// train_bench_cpu_report.cpp (its report), train_bench_gemm.h (--gemm), train_bench_device.cpp
// (--device cuda|emulated).
#include <CLI/CLI.hpp>

#include "train_bench_cpu.h"
#include "train_bench_device.h"

int main(int argc, char** argv) {
  CLI::App app{"One GPT training step on the CPU: ETH bf16 and fp32 beside PyTorch fp32 and bf16"};
  eth::bench::CpuBenchOptions o;  // the defaults: train_bench_cpu.h
  o.venv = ETH_BENCH_VENV;
  app.add_option("--model", o.model_name,
                 "Model preset or JSON file; a Llama-family one runs tools/torch_llama_step.py")
      ->capture_default_str();
  app.add_option("--batch", o.batch, "Micro-batch = batch (one micro-batch per step)")
      ->capture_default_str();
  app.add_option("--seq", o.seq, "Sequence length")->capture_default_str();
  app.add_option("--threads", o.threads, "OpenMP threads (ETH and PyTorch)")
      ->capture_default_str();
  app.add_option("--steps", o.steps, "Timed steps per round of each configuration")
      ->capture_default_str();
  app.add_option("--warmup", o.warmup, "Untimed steps of each configuration first")
      ->capture_default_str();
  app.add_option("--rounds", o.rounds, "Rounds of alternated steps; best of all rounds")
      ->capture_default_str();
  app.add_option("--recompute", o.recompute, "Recompute set for ETH (see eth train)")
      ->capture_default_str();
  app.add_flag("--no-torch", o.no_torch, "Leave PyTorch out");
  app.add_option("--torch-venv", o.venv,
                 "Virtualenv with PyTorch; created (newest torch from PyPI) when it has none")
      ->capture_default_str();
  app.add_option("--python", o.python,
                 "Use this interpreter with torch instead of the virtualenv");
  app.add_flag("--gemm", o.gemm_baseline,
               "Also time the fp32 GEMM library on the step's matmul shapes (ETH fp32's ceiling)");
  app.add_flag("--json", o.json, "Print one JSON object");
  eth::bench::DeviceBenchOptions device;  // --device cuda|emulated: train_bench_device.h
  eth::bench::add_device_options(app, &device);
  CLI11_PARSE(app, argc, argv);
  if (device.device != "cpu") {
    // The device path's own defaults, unless the shared flags were given.
    if (app.count("--model")) device.model = o.model_name;
    if (app.count("--batch")) device.batch = o.batch;
    if (app.count("--seq")) device.seq = o.seq;
    if (app.count("--steps")) device.steps = o.steps;
    if (app.count("--warmup")) device.warmup = o.warmup;
    device.python = o.python;
    device.no_torch = o.no_torch;
    device.json = o.json;
    return eth::bench::run_device_bench(device);
  }
  return eth::bench::run_cpu_bench(o);
}
