// See train_bench_device.h.
#include "train_bench_device.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench_util.h"
#include "cluster/cluster_spec.h"
#include "core/format.h"
#include "data/token_file.h"
#include "data/tokenize.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cuda/runtime.h"
#include "kernels/rng.h"
#include "model/arithmetic.h"
#include "train/compute_device.h"
#include "train/train_memory.h"
#include "train/trainer.h"

namespace eth::bench {

namespace {

using nlohmann::json;

// Issue 24's targets on a GPU.
constexpr double kMfuTarget = 0.40;
// Of the GPU's free memory, what ETH's sizing may fill: the rest is for what the sizing does not
// see (the matmul library's workspace, the allocator's granularity).
constexpr double kFitFraction = 0.92;

struct Resolved {
  ComputeDevice device = ComputeDevice::Cuda;
  ModelSpec model;
  std::int64_t seq = 0, batch = 0;
  int steps = 0, warmup = 0;
  std::string gpu_name;
  double free_bytes = 0, total_bytes = 0;
  double peak_tflops = 0;  // 0: none (the emulated device)
  std::string batch_rule;  // how the micro-batch was chosen
};

struct EthResult {
  std::vector<double> step_s;
  double loss = 0;
  double device_bytes = 0;  // what the run allocated on the device
  std::string error;
};

TrainConfig run_config(const Resolved& r, std::int64_t batch, const std::filesystem::path& data) {
  TrainConfig cfg;
  cfg.model = r.model;
  cfg.data = data;
  cfg.steps = r.warmup + r.steps;
  cfg.global_batch = batch;
  cfg.micro_batch = batch;
  cfg.seq_len = r.seq;
  cfg.lr = LrSchedule{1e-4, 1e-5, 0, cfg.steps};
  cfg.precision = Precision::Bf16;
  cfg.device = r.device;
  return cfg;
}

// 1, 2, 3, 4, 6, 8, 12, ... up to max_batch.
std::vector<std::int64_t> batch_candidates(std::int64_t max_batch) {
  std::vector<std::int64_t> out;
  for (std::int64_t p = 1; p <= max_batch; p *= 2) {
    out.push_back(p);
    if (p > 1 && p + p / 2 <= max_batch) out.push_back(p + p / 2);
  }
  return out;
}

// The largest candidate below `below` whose state, arena and io fit in kFitFraction of the free
// memory, by train_memory's arithmetic (nothing allocated); 0 for none.
std::int64_t largest_fitting_batch(const Resolved& r, std::int64_t max_batch,
                                   std::int64_t below) {
  std::int64_t best = 0;
  for (std::int64_t b : batch_candidates(max_batch)) {
    if (b >= below) continue;
    const TrainMemory need = train_memory(run_config(r, b, {}));
    if (need.device_bytes() <= kFitFraction * r.free_bytes) best = std::max(best, b);
  }
  return best;
}

// Random tokens for every step of `batch` samples (fresh windows each step).
std::filesystem::path write_tokens(const Resolved& r, std::int64_t batch) {
  const auto dir = std::filesystem::temp_directory_path() / "eth_train_bench_device";
  std::filesystem::create_directories(dir);
  const std::int64_t n = batch * r.seq * (r.warmup + r.steps + 1) + 1;
  std::vector<std::uint16_t> tokens(static_cast<std::size_t>(n));
  SplitMix64 rng(1);
  for (auto& t : tokens) {
    t = static_cast<std::uint16_t>(rng.below(static_cast<std::uint64_t>(r.model.vocab)));
  }
  const auto path = dir / "tokens.bin";
  write_token_file(path, tokens);
  return path;
}

EthResult run_eth(const Resolved& r) {
  EthResult out;
  try {
    const TrainConfig cfg = run_config(r, r.batch, write_tokens(r, r.batch));
    const double before = device_memory(r.device).in_use_bytes;
    Trainer trainer(cfg);
    out.device_bytes = device_memory(r.device).in_use_bytes - before;
    for (int i = 0; i < r.warmup; ++i) trainer.step();
    for (int i = 0; i < r.steps; ++i) {
      const StepStats s = trainer.step();
      out.step_s.push_back(s.seconds);
      out.loss = s.loss;
    }
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  return out;
}

// tools/torch_gpt2_gpu.py on the same model and sequence, its JSON (or {"error": ...}).
json run_torch(const DeviceBenchOptions& o, const Resolved& r) {
  const std::string python = o.python.empty() ? "python3" : o.python;
  const auto out = std::filesystem::temp_directory_path() / "eth_train_bench_torch.json";
  std::filesystem::remove(out);
  const ModelSpec& m = r.model;
  const std::string cmd =
      "timeout " + std::to_string(o.torch_timeout_s) + " " + python + " -u " +
      (o.torch_script.empty() ? std::string(ETH_SOURCE_DIR) + "/tools/torch_gpt2_gpu.py"
                              : o.torch_script) +
      " --layers " +
      std::to_string(m.layers) + " --hidden " + std::to_string(m.hidden) + " --heads " +
      std::to_string(m.heads) + " --vocab " + std::to_string(m.vocab) + " --seq " +
      std::to_string(r.seq) + " --peak-tflops " + std::to_string(r.peak_tflops) + " --out " +
      out.string() + " 1>&2";
  std::cerr << "[train_bench] PyTorch: " << cmd << "\n" << std::flush;
  const int rc = std::system(cmd.c_str());
  // The script writes its file after every mode: a timeout in torch.compile keeps eager's.
  std::ifstream in(out);
  json j = json::object();
  if (in) {
    try {
      in >> j;
    } catch (const std::exception& e) {
      j = json{{"error", std::string("unreadable output: ") + e.what()}};
    }
  }
  if (rc != 0) j["exit_status"] = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  if (!j.contains("modes") && !j.contains("error")) j["error"] = "PyTorch measured nothing";
  return j;
}

double mfu(const Resolved& r, std::int64_t batch, double step_s) {
  if (r.peak_tflops <= 0 || step_s <= 0) return 0;
  return 3.0 * model_forward_flops(r.model, batch, r.seq) / step_s / (r.peak_tflops * 1e12);
}

// The defaults of each device, the GPU's memory and peak, and the micro-batch. Returns an exit
// code (0: go on) with the reason printed.
int resolve(const DeviceBenchOptions& o, Resolved* r) {
  const bool cuda = o.device == "cuda";
  r->device = cuda ? ComputeDevice::Cuda : ComputeDevice::Emulated;
  r->model = load_model(o.model.empty() ? (cuda ? "gpt2-small" : "tiny") : o.model);
  r->seq = o.seq > 0 ? o.seq : (cuda ? r->model.seq_len : std::min<std::int64_t>(64, r->model.seq_len));
  r->steps = o.steps > 0 ? o.steps : (cuda ? 6 : 2);
  r->warmup = o.warmup > 0 ? o.warmup : (cuda ? 2 : 1);
  const DeviceMemoryInfo dev = device_memory(r->device);
  r->gpu_name = dev.name;
  r->free_bytes = dev.free_bytes;
  r->total_bytes = dev.total_bytes;
  if (cuda) {
    r->peak_tflops = o.peak_tflops;
    if (r->peak_tflops <= 0) {
      const auto preset = find_device_type_preset(gpu_device_type_preset(dev.name));
      if (!preset) {
        std::cerr << "train_bench: " << dev.name << " has no device type preset; give its dense "
                  << "bf16 peak with --peak-tflops\n";
        return 1;
      }
      r->peak_tflops = preset->tflops;
    }
  }
  if (o.batch > 0) {
    r->batch = o.batch;
    r->batch_rule = "given";
  } else if (cuda) {
    r->batch = largest_fitting_batch(*r, o.max_batch, o.max_batch + 1);
    r->batch_rule = "the largest of 1, 2, 3, 4, 6, 8, ... <= " + std::to_string(o.max_batch) +
                    " whose state and activations fit in " +
                    std::to_string(static_cast<int>(kFitFraction * 100)) + "% of the free memory";
    if (r->batch == 0) {
      std::cerr << "train_bench: not even micro-batch 1 of " << r->model.name << " at sequence "
                << r->seq << " fits in " << fmt_bytes(r->free_bytes) << " free\n";
      return 1;
    }
  } else {
    r->batch = 2;
    r->batch_rule = "the emulated smoke's size";
  }
  return 0;
}

// ETH's MFU >= kMfuTarget and tokens/s >= torch.compile's (when measured): issue 24's targets.
struct Verdicts {
  double eth_tok_s = 0, compile_tok_s = 0, mfu = 0;
  bool have_compile() const { return compile_tok_s > 0; }
};

Verdicts verdicts(const Resolved& r, const EthResult& e, const json& torch) {
  Verdicts v;
  const double step = median(e.step_s);
  if (step > 0) v.eth_tok_s = static_cast<double>(r.batch * r.seq) / step;
  v.mfu = mfu(r, r.batch, step);
  if (torch.contains("modes") && torch["modes"].contains("compile") &&
      torch["modes"]["compile"].contains("tokens_per_s")) {
    v.compile_tok_s = torch["modes"]["compile"]["tokens_per_s"].get<double>();
  }
  return v;
}

void print_text(const Resolved& r, const EthResult& e, const json& torch, bool with_torch) {
  const std::int64_t tok = r.batch * r.seq;
  const double step = median(e.step_s);
  const bool emulated = r.device == ComputeDevice::Emulated;
  std::printf("train_bench --device %s: %s, micro-batch %lld (%s) x seq %lld, bf16\n",
              emulated ? "emulated" : "cuda", r.model.name.c_str(),
              static_cast<long long>(r.batch), r.batch_rule.c_str(),
              static_cast<long long>(r.seq));
  std::printf("device: %s, %.1f GB, %.1f GB free at start; host CPU %s\n", r.gpu_name.c_str(),
              r.total_bytes / 1e9, r.free_bytes / 1e9, cpu::cpu_features().model.c_str());
  if (emulated) {
    std::printf("EMULATED DEVICE: the GPU kernel set runs on this CPU (device memory behind page "
                "protection). A smoke of the path: these figures are no GPU's speed.\n");
  }
  std::printf("\n  %-22s %6s %9s %12s %7s   %s\n", "configuration", "batch", "step s", "tokens/s",
              "MFU", "steps (s)");
  std::string steps;
  for (double s : e.step_s) steps += (steps.empty() ? "" : " ") + std::to_string(s).substr(0, 6);
  char mfu_cell[16] = "-";
  if (!emulated) std::snprintf(mfu_cell, sizeof mfu_cell, "%.1f%%", 100 * mfu(r, r.batch, step));
  if (e.error.empty()) {
    std::printf("  %-22s %6lld %9.4f %12.0f %7s   %s\n", "ETH (GpuKernels, bf16)",
                static_cast<long long>(r.batch), step, static_cast<double>(tok) / step, mfu_cell,
                steps.c_str());
  } else {
    std::printf("  %-22s %6lld   FAILED: %s\n", "ETH (GpuKernels, bf16)",
                static_cast<long long>(r.batch), e.error.c_str());
  }
  if (!with_torch) return;
  for (const char* mode : {"eager", "compile"}) {
    const json m = torch.contains("modes") ? torch["modes"].value(mode, json()) : json();
    if (m.is_null() || !m.contains("tokens_per_s")) {
      std::printf("  %-22s %6s   not measured\n", (std::string("PyTorch ") + mode).c_str(), "-");
      continue;
    }
    const double t = m["tokens_per_s"].get<double>();
    std::printf("  %-22s %6lld %9.4f %12.0f %6.1f%%\n", (std::string("PyTorch ") + mode).c_str(),
                static_cast<long long>(m["micro_batch"].get<std::int64_t>()),
                m["step_s"].get<double>(), t, 100 * m["mfu"].get<double>());
  }
  if (torch.contains("error")) std::printf("  PyTorch: %s\n", torch["error"].dump().c_str());
  if (torch.contains("torch")) {
    std::printf("  (PyTorch %s on %s)\n", torch["torch"].get<std::string>().c_str(),
                torch.value("device", std::string("?")).c_str());
  }
  if (!e.error.empty()) return;
  const Verdicts v = verdicts(r, e, torch);
  std::printf("\ntargets (issue 24):\n");
  if (v.have_compile()) {
    std::printf("  ETH / torch.compile tokens/s   %.2fx (want >= 1.00): %s\n",
                v.eth_tok_s / v.compile_tok_s, v.eth_tok_s >= v.compile_tok_s ? "met" : "MISSED");
  } else {
    std::printf("  ETH / torch.compile tokens/s   not measured (no torch.compile figure)\n");
  }
  std::printf("  ETH MFU against %.0f TFLOP/s     %.1f%% (want >= %.0f%%): %s\n", r.peak_tflops,
              100 * v.mfu, 100 * kMfuTarget, v.mfu >= kMfuTarget ? "met" : "MISSED");
}

json result_json(const Resolved& r, const EthResult& e, const json& torch) {
  const double step = median(e.step_s);
  json j{{"device", r.device == ComputeDevice::Emulated ? "emulated" : "cuda"},
         {"measured", e.error.empty()},
         {"gpu", r.gpu_name},
         {"host_cpu", cpu::cpu_features().model},
         {"model", r.model.name},
         {"seq", r.seq},
         {"micro_batch", r.batch},
         {"micro_batch_rule", r.batch_rule},
         {"eth", {{"step_s_all", e.step_s},
                  {"step_s_median", step},
                  {"tokens_per_s", static_cast<double>(r.batch * r.seq) / step},
                  {"loss", e.loss},
                  {"device_bytes", e.device_bytes}}}};
  if (!e.error.empty()) j["eth"]["error"] = e.error;
  if (r.device == ComputeDevice::Emulated) {
    j["note"] = "emulated device: a smoke of the path on the host CPU, not a speed figure";
    return j;
  }
  j["peak_tflops"] = r.peak_tflops;
  j["eth"]["mfu"] = mfu(r, r.batch, step);
  j["torch"] = torch;
  if (e.error.empty()) {
    const Verdicts v = verdicts(r, e, torch);
    j["targets"] = {{"eth_over_compile_tokens_per_s",
                     v.have_compile() ? json(v.eth_tok_s / v.compile_tok_s) : json(nullptr)},
                    {"eth_over_compile_met", v.have_compile() && v.eth_tok_s >= v.compile_tok_s},
                    {"mfu_target", kMfuTarget},
                    {"mfu_met", v.mfu >= kMfuTarget}};
  }
  return j;
}

}  // namespace

void add_device_options(CLI::App& app, DeviceBenchOptions* o) {
  app.add_option("--device", o->device,
                 "cpu (default: the CPU bench), cuda (the GPU trainer: gpt2-small, seq 1024, bf16, "
                 "the largest micro-batch that fits, beside PyTorch eager and torch.compile; says "
                 "so and exits 2 where there is no GPU) or emulated (the same path on the "
                 "host-emulated GPU at a tiny size: a smoke, not a speed figure)")
      ->check(CLI::IsMember({"cpu", "cuda", "emulated"}))
      ->capture_default_str();
  app.add_option("--max-batch", o->max_batch,
                 "--device cuda: the largest micro-batch tried when --batch is not given")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 16))
      ->capture_default_str();
  app.add_option("--peak-tflops", o->peak_tflops,
                 "--device cuda: the dense bf16 peak MFU is against (default: the GPU's device "
                 "type preset, 989 for the H200)");
  app.add_option("--torch-timeout", o->torch_timeout_s,
                 "--device cuda: seconds PyTorch's eager and torch.compile runs may take together")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  app.add_option("--json-out", o->json_out,
                 "--device cuda|emulated: also write the result as JSON to this file");
  app.add_option("--torch-script", o->torch_script,
                 "--device cuda: PyTorch's side (default: tools/torch_gpt2_gpu.py of the source "
                 "tree this was built from; give it where the bench runs from elsewhere)");
}

int run_device_bench(const DeviceBenchOptions& o) {
  if (o.device == "cuda" && (!cuda::compiled() || cuda::device_count() == 0)) {
    const std::string why = cuda::unavailable_reason();
    if (o.json) {
      std::cout << json{{"device", "cuda"}, {"measured", false}, {"reason", why}}.dump(2) << "\n";
    } else {
      std::printf("train_bench --device cuda: no GPU here (%s). Nothing measured: no ETH or "
                  "PyTorch figure.\n",
                  why.c_str());
    }
    return 2;
  }
  Resolved r;
  if (const int rc = resolve(o, &r); rc != 0) return rc;
  std::cerr << "[train_bench] ETH on " << r.gpu_name << ": " << r.model.name << ", micro-batch "
            << r.batch << " x " << r.seq << ", " << r.warmup << " warm-up + " << r.steps
            << " timed steps\n"
            << std::flush;
  EthResult e = run_eth(r);  // the trainer is gone (the GPU freed) before PyTorch starts
  // What the sizing does not see can still make the allocation fail: then the next size down.
  for (int retry = 0; retry < 3 && o.batch == 0 && r.device == ComputeDevice::Cuda &&
                      e.error.find("out of memory") != std::string::npos;
       ++retry) {
    const std::int64_t smaller = largest_fitting_batch(r, o.max_batch, r.batch);
    if (smaller == 0) break;
    std::cerr << "[train_bench] micro-batch " << r.batch << " did not fit (" << e.error
              << "); trying " << smaller << "\n";
    r.batch_rule += "; " + std::to_string(r.batch) + " failed to allocate";
    r.batch = smaller;
    e = run_eth(r);
  }
  if (e.error.empty() && (e.step_s.empty() || !std::isfinite(e.loss))) e.error = "no finite loss";
  if (!e.error.empty()) std::cerr << "train_bench: ETH's run failed: " << e.error << "\n";
  // PyTorch's side even when ETH's failed: the baseline is worth having on record.
  const bool with_torch = r.device == ComputeDevice::Cuda && !o.no_torch;
  const json torch = with_torch ? run_torch(o, r) : json();
  const json j = result_json(r, e, torch);
  if (!o.json_out.empty()) std::ofstream(o.json_out) << j.dump(2) << "\n";
  if (o.json) {
    std::cout << j.dump(2) << "\n";
  } else {
    print_text(r, e, torch, with_torch);
  }
  return e.error.empty() ? 0 : 1;
}

}  // namespace eth::bench
