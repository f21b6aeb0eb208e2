// train_bench's CPU report (train_bench_cpu.h): each configuration's tokens/s, the same-run
// ratios, memory, and the verdict of every target of issue 13 that applies to this CPU, as text
// or one JSON object.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "bench_util.h"
#include "train_bench_cpu.h"
#include "kernels/cpu/bf16/gemm.h"
#include "kernels/cpu/gemm.h"
#include "model/arithmetic.h"

namespace eth::bench {

namespace {

std::string list(const std::vector<double>& v, int digits) {
  std::string out;
  for (double x : v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.*f", digits, x);
    out += (out.empty() ? "" : " ") + std::string(b);
  }
  return out;
}

struct Target {
  std::string what;
  double value = 0, want = 0;
  bool at_most = false;  // value <= want (memory), else value >= want
  // The most any implementation could reach on this CPU (0: no ceiling known): a target above it
  // is out of the hardware's reach, whatever the code.
  double ceiling = 0;
  bool met() const { return at_most ? value <= want : value >= want; }
};

// The figures every report reads, derived once from the run.
struct Derived {
  std::int64_t tok = 0;
  double step_flops = 0;       // one step's model FLOPs (forward x 3)
  const Series* torch_best = nullptr;
  bool have_torch = false;
  double bf16_over_fp32 = 0;
  std::string gemm_path;
  std::vector<Target> targets;
};

Derived derive(const CpuRun& r) {
  Derived d;
  const std::int64_t tok = d.tok = r.tokens();
  d.step_flops = 3.0 * model_forward_flops(r.model, r.opt.batch, r.opt.seq);
  d.torch_best = r.t16.tok_s(tok) > r.t32.tok_s(tok) ? &r.t16 : &r.t32;
  d.have_torch = !d.torch_best->step_s.empty();
  d.bf16_over_fp32 = r.e16.tok_s(tok) / r.e32.tok_s(tok);
  d.gemm_path = cpu::bf16::gemm_path_name(cpu::bf16::gemm_path());
  std::vector<Target>& targets = d.targets;
  const Series& torch_best = *d.torch_best;
  if (r.native_bf16) {
    targets.push_back({"ETH bf16 / ETH fp32", d.bf16_over_fp32, 1.6, false});
    if (d.have_torch) {
      // ETH bf16 cannot run faster than the CPU's bf16 dot-product peak (AMX would lift it).
      const double torch_flops = d.step_flops / fastest(torch_best.step_s);
      targets.push_back({"ETH bf16 / " + torch_best.name, r.e16.tok_s(tok) / torch_best.tok_s(tok),
                         2.0, false, r.cpu->amx_bf16 ? 0.0 : r.peak.bf16_flops / torch_flops});
    }
  } else {
    targets.push_back({"ETH bf16 / ETH fp32", d.bf16_over_fp32, 0.9, false});
    targets.push_back({"activation memory bf16 / fp32", r.act16 / r.act32, 0.55, true});
    if (d.have_torch) {
      targets.push_back({"ETH fp32 / " + torch_best.name, r.e32.tok_s(tok) / torch_best.tok_s(tok),
                         1.5, false});
    }
  }
  return d;
}

}  // namespace

void print_cpu_json(const CpuRun& r) {
  const Derived d = derive(r);
  nlohmann::json configs = nlohmann::json::array();
  for (const Series* s : {&r.e16, &r.e32, &r.t32, &r.t16}) {
    configs.push_back({{"name", s->name},
                       {"step_s_all", s->step_s},
                       {"step_s_best", fastest(s->step_s)},
                       {"tokens_per_s", s->tok_s(d.tok)}});
  }
  nlohmann::json verdicts = nlohmann::json::array();
  for (const Target& t : d.targets) {
    verdicts.push_back({{"target", t.what},
                        {"value", t.value},
                        {"want", t.want},
                        {"at_most", t.at_most},
                        {"met", t.met()}});
    if (t.ceiling > 0) verdicts.back()["ceiling"] = t.ceiling;
  }
  nlohmann::json j{{"model", r.model.name},
                   {"batch", r.opt.batch},
                   {"seq", r.opt.seq},
                   {"threads", r.opt.threads},
                   {"rounds", r.opt.rounds},
                   {"cpu_model", r.cpu->model},
                   {"cpu_extensions", r.cpu->extensions()},
                   {"bf16_matmul_instructions", r.native_bf16},
                   {"bf16_gemm_path", d.gemm_path},
                   {"gemm_library", std::string(cpu::gemm_library())},
                   {"configs", configs},
                   {"eth_bf16_over_fp32", d.bf16_over_fp32},
                   {"eth_bf16_over_fp32_median", median(r.e32.step_s) / median(r.e16.step_s)},
                   {"activation_bytes_bf16", r.act16},
                   {"activation_bytes_fp32", r.act32},
                   {"held_bytes_per_slot_bf16", r.held16},
                   {"held_bytes_per_slot_fp32", r.held32},
                   {"state_bytes_bf16", r.state16},
                   {"state_bytes_fp32", r.state32},
                   {"peak_rss_bytes_both_trainers", r.rss},
                   {"peak_fp32_gflops", r.peak.fp32_flops / 1e9},
                   {"peak_bf16_dot_gflops", r.peak.bf16_flops / 1e9},
                   {"setup_s", r.setup_s},
                   {"loss_bf16", r.loss16},
                   {"loss_fp32", r.loss32},
                   {"targets", verdicts},
                   {"load_average_start", r.load_start},
                   {"load_average_rounds", r.load_rounds}};
  if (!r.opt.no_torch) j["torch"] = r.torch_result;
  if (r.gemm) j["gemm_fp32_gflops"] = r.gemm_flops / fastest(r.gemm_s) / 1e9;
  std::cout << j.dump(2) << "\n";
}

void print_cpu_text(const CpuRun& r) {
  const Derived d = derive(r);
  std::printf("%s, batch %lld x seq %lld, %d threads, %d round%s of %d steps per configuration\n",
              r.model.name.c_str(), static_cast<long long>(r.opt.batch),
              static_cast<long long>(r.opt.seq), r.opt.threads, r.opt.rounds,
              r.opt.rounds == 1 ? "" : "s", r.opt.steps);
  std::printf("CPU %s: %s (%s bf16 matrix instructions; bf16 GEMMs %s, fp32 GEMMs %s)\n",
              r.cpu->model.c_str(), r.cpu->extensions().c_str(), r.native_bf16 ? "with" : "no",
              d.gemm_path.c_str(), std::string(cpu::gemm_library()).c_str());
  std::printf("load average (1 min): %.2f at start, %s at each round\n\n", r.load_start,
              list(r.load_rounds, 2).c_str());
  std::printf("  %-14s %9s %10s %9s   %s\n", "configuration", "best s", "tok/s", "GFLOP/s",
              "steps (s)");
  for (const Series* s : {&r.e16, &r.e32, &r.t32, &r.t16}) {
    if (s->step_s.empty()) {
      std::printf("  %-14s %9s\n", s->name.c_str(), "-");
      continue;
    }
    std::printf("  %-14s %9.3f %10.1f %9.1f   %s\n", s->name.c_str(), fastest(s->step_s),
                s->tok_s(d.tok), d.step_flops / fastest(s->step_s) / 1e9, list(s->step_s, 2).c_str());
  }
  if (!r.opt.no_torch) {
    if (r.torch_result.contains("torch")) {
      std::printf("  PyTorch %s (%d threads, %s attention, %s AdamW, peak RSS %.2f GB)\n",
                  r.torch_result.value("torch", std::string("?")).c_str(),
                  r.torch_result.value("threads", 0),
                  r.torch_result.value("attention", std::string("?")).c_str(),
                  r.torch_result.value("adamw", std::string("?")).c_str(),
                  r.torch_result.value("peak_rss_bytes", 0.0) / 1e9);
      if (r.torch_result.contains("implementation")) {
        std::printf("  PyTorch model: %s, %.1fM parameters\n",
                    r.torch_result.value("implementation", std::string("?")).c_str(),
                    r.torch_result.value("parameters", 0.0) / 1e6);
      }
    } else {
      std::printf("  PyTorch: %s\n", r.torch_result.dump().c_str());
    }
  }
  if (r.gemm) {
    std::printf("  fp32 GEMM library on the step's shapes: %.1f GFLOP/s (ETH fp32 at %.0f%%)\n",
                r.gemm_flops / fastest(r.gemm_s) / 1e9,
                100.0 * (d.step_flops / fastest(r.e32.step_s)) / (r.gemm_flops / fastest(r.gemm_s)));
  }
  std::printf("  arithmetic peak, %d threads, measured before the steps: fp32 %.0f GFLOP/s (%s)",
              r.opt.threads, r.peak.fp32_flops / 1e9, r.peak.fp32_instr);
  if (r.peak.bf16_flops > 0) {
    std::printf(", bf16 %.0f GFLOP/s (VDPBF16PS); ETH bf16 at %.0f%% of it, PyTorch bf16 at %s",
                r.peak.bf16_flops / 1e9, 100.0 * d.step_flops / fastest(r.e16.step_s) / r.peak.bf16_flops,
                r.t16.step_s.empty()
                    ? "-"
                    : (std::to_string(static_cast<int>(std::lround(
                           100.0 * d.step_flops / fastest(r.t16.step_s) / r.peak.bf16_flops))) + "%").c_str());
  }
  std::printf("\n");
  std::printf("\nsame-run ratios (best step against best step; medians of the alternated steps "
              "in brackets):\n");
  std::printf("  ETH bf16 / ETH fp32        %.2fx  (%.2fx)\n", d.bf16_over_fp32,
              median(r.e32.step_s) / median(r.e16.step_s));
  if (d.have_torch) {
    for (const Series* s : {&r.t32, &r.t16}) {
      if (s->step_s.empty()) continue;
      std::printf("  ETH bf16 / %-15s %.2fx  (%.2fx);  ETH fp32 / %s %.2fx  (%.2fx)\n",
                  s->name.c_str(), r.e16.tok_s(d.tok) / s->tok_s(d.tok),
                  median(s->step_s) / median(r.e16.step_s), s->name.c_str(),
                  r.e32.tok_s(d.tok) / s->tok_s(d.tok), median(s->step_s) / median(r.e32.step_s));
    }
  }
  std::printf("  activations (arena): bf16 %.0f MB, fp32 %.0f MB (%.2fx); model state: bf16 %.0f MB, "
              "fp32 %.0f MB\n",
              r.act16 / 1e6, r.act32 / 1e6, r.act16 / r.act32,
              r.state16 / 1e6,
              r.state32 / 1e6);
  std::printf("  peak RSS (both trainers) %.2f GB, set-up %.2f s, loss bf16 %.4f fp32 %.4f\n",
              r.rss / 1e9, r.setup_s, r.loss16, r.loss32);
  std::printf("\ntargets (%s bf16 instructions):\n", r.native_bf16 ? "CPU with" : "CPU without");
  for (const Target& t : d.targets) {
    std::printf("  %-36s %.2f%s (want %s %.2f): %s", t.what.c_str(), t.value,
                t.at_most ? "" : "x", t.at_most ? "<=" : ">=", t.want, t.met() ? "met" : "MISSED");
    if (t.ceiling > 0 && t.ceiling < t.want) {
      std::printf(" (out of this CPU's reach: at its bf16 peak a step would be %.2fx)", t.ceiling);
    }
    std::printf("\n");
  }
  if (!d.have_torch && !r.opt.no_torch) {
    std::printf("  (the PyTorch targets need PyTorch: see above)\n");
  }
}

}  // namespace eth::bench
