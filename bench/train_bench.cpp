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
#include <omp.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "bench_util.h"
#include "peak_probe.h"
#include "data/token_file.h"
#include "data/tokenize.h"
#include "kernels/cpu/bf16/gemm.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm.h"
#include "model/arithmetic.h"
#include "torch_server.h"
#include "train_bench_device.h"
#include "train/arena.h"
#include "train/trainer.h"

namespace {

using Clock = std::chrono::steady_clock;
using eth::bench::median;
using eth::cpu::Trans;

struct Gemm {
  const char* what;
  Trans ta, tb;
  std::int64_t M, N, K;
  std::int64_t count;  // calls per training step
  float beta;          // 1 where StageCompute accumulates (bias broadcast first, dW +=)
  double flops() const { return 2.0 * static_cast<double>(M * N * K); }
};

// The matmuls of one step as StageCompute issues them (forward, then the two backward
// products), N = B * T rows. Attention's per-head products are not included (the model FLOPs
// below include them, so the ratio slightly favours the GEMM side).
std::vector<Gemm> step_gemms(const eth::ModelSpec& m, std::int64_t n) {
  const std::int64_t C = m.hidden, F = m.ffn, V = m.vocab, L = m.layers;
  std::vector<Gemm> g;
  auto nt = [&](const char* w, std::int64_t oc, std::int64_t c, std::int64_t count, float bias) {
    g.push_back({w, Trans::No, Trans::Yes, n, oc, c, count, bias});  // out = inp W^T (+ bias)
    g.push_back({w, Trans::No, Trans::No, n, c, oc, count, 0.0f});   // dinp = dout W
    g.push_back({w, Trans::Yes, Trans::No, oc, c, n, count, 1.0f});  // dW += dout^T inp
  };
  auto nn = [&](const char* w, std::int64_t c, std::int64_t oc, std::int64_t count) {
    g.push_back({w, Trans::No, Trans::No, n, oc, c, count, 1.0f});   // out = bias + inp W
    g.push_back({w, Trans::No, Trans::Yes, n, c, oc, count, 0.0f});  // dinp = dout W^T
    g.push_back({w, Trans::Yes, Trans::No, c, oc, n, count, 1.0f});  // dW += inp^T dout
  };
  nt("qkv", 3 * C, C, L, 1.0f);
  nn("proj", C, C, L);
  nt("fc", F, C, L, 1.0f);
  nn("fcproj", F, C, L);
  nt("lm_head", V, C, 1, 0.0f);
  return g;
}

// The step's GEMMs on operands from one pre-faulted arena (mapped once), timed two ways: as the
// step issues them, every call back to back (timed like a step; run between ETH's steps so both
// meet the same machine load), and per shape (fastest single call of each, times its count: an
// optimistic figure on a shared machine, where each shape gets its own luckiest moment).
class GemmBench {
 public:
  explicit GemmBench(std::vector<Gemm> gemms) : gemms_(std::move(gemms)) {
    for (const Gemm& g : gemms_) most_ = std::max({most_, g.M * g.K, g.K * g.N, g.M * g.N});
    arena_ = eth::Arena(3 * eth::arena_bytes<float>(most_));
    a_ = arena_.take<float>(most_);
    b_ = arena_.take<float>(most_);
    c_ = arena_.take<float>(most_);
    for (std::int64_t i = 0; i < most_; ++i) {
      a_[i] = b_[i] = c_[i] = 1e-3f * static_cast<float>(i % 97);
    }
    for (const Gemm& g : gemms_) flops_ += g.flops() * static_cast<double>(g.count);
  }
  double flops() const { return flops_; }
  std::int64_t calls() const {
    std::int64_t n = 0;
    for (const Gemm& g : gemms_) n += g.count;
    return n;
  }

  double sequence_s() {
    const auto t0 = Clock::now();
    for (const Gemm& g : gemms_) {
      for (std::int64_t k = 0; k < g.count; ++k) call(g);
    }
    return since(t0);
  }

  double per_shape_s(int reps) {
    double total = 0;
    for (const Gemm& g : gemms_) {
      double best = 1e30;
      for (int r = 0; r < reps; ++r) {
        const auto t0 = Clock::now();
        call(g);
        best = std::min(best, since(t0));
      }
      total += best * static_cast<double>(g.count);
    }
    return total;
  }

 private:
  static double since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
  }
  void call(const Gemm& g) {
    const std::int64_t lda = g.ta == Trans::No ? g.K : g.M;
    const std::int64_t ldb = g.tb == Trans::No ? g.N : g.K;
    eth::cpu::sgemm(g.ta, g.tb, g.M, g.N, g.K, 1.0f, a_, lda, b_, ldb, g.beta, c_, g.N);
  }

  std::vector<Gemm> gemms_;
  std::int64_t most_ = 0;
  eth::Arena arena_;
  float *a_ = nullptr, *b_ = nullptr, *c_ = nullptr;
  double flops_ = 0;
};

double peak_rss_bytes() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) * 1024.0;
}

// The 1-minute load average (the machines are shared; figures taken above 2 are suspect).
double load_average() {
  double l[1] = {0};
  return ::getloadavg(l, 1) == 1 ? l[0] : -1;
}

// The Llama family's own flags of tools/torch_llama_step.py (empty for GPT, whose script is
// tools/torch_gpt2_step.py).
std::string llama_flags(const eth::ModelSpec& m) {
  const bool llama = m.norm == eth::NormKind::RmsNorm || m.positions == eth::PositionKind::Rope ||
                     m.mlp == eth::MlpKind::Swiglu;
  if (!llama) return "";
  char eps[32], theta[32];
  std::snprintf(eps, sizeof eps, "%.9g", m.norm_eps);
  std::snprintf(theta, sizeof theta, "%.9g", m.rope_theta);
  return " --kv-heads " + std::to_string(m.num_kv_heads()) + " --norm-eps " + eps +
         " --rope-theta " + theta + (m.tied_embeddings ? " --tied" : "");
}

std::string torch_command(const std::string& python, const eth::ModelSpec& m, std::int64_t batch,
                          std::int64_t seq, int threads, int warmup) {
  const std::string llama = llama_flags(m);
  const std::string script =
      std::string(ETH_SOURCE_DIR) +
      (llama.empty() ? "/tools/torch_gpt2_step.py" : "/tools/torch_llama_step.py");
  // The tuning guide's settings: threads = the cores used, a huge-page-friendly allocator.
  std::string env = "OMP_NUM_THREADS=" + std::to_string(threads) +
                    " GLIBC_TUNABLES=glibc.malloc.hugetlb=1";
  return "exec env " + env + " " + python + " -u " + script + " --layers " +
         std::to_string(m.layers) + " --hidden " + std::to_string(m.hidden) + " --heads " +
         std::to_string(m.heads) + " --ffn " + std::to_string(m.ffn) + " --vocab " +
         std::to_string(m.vocab) + " --max-seq " + std::to_string(m.seq_len) + " --batch " +
         std::to_string(batch) + " --seq " + std::to_string(seq) + " --threads " +
         std::to_string(threads) + " --warmup " + std::to_string(warmup) +
         " --precisions fp32,bf16 --serve" + llama;
}

double best(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::min_element(v.begin(), v.end());
}

// One configuration's steps.
struct Series {
  std::string name;
  std::vector<double> step_s;
  double tok_s(std::int64_t tokens) const {
    return step_s.empty() ? 0 : static_cast<double>(tokens) / best(step_s);
  }
};

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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"One GPT training step on the CPU: ETH bf16 and fp32 beside PyTorch fp32 and bf16"};
  std::string model_name = "gpt2-small", recompute = "none", python;
  std::string venv = ETH_BENCH_VENV;
  std::int64_t batch = 4, seq = 256;
  int threads = 2, steps = 3, warmup = 1, rounds = 2;
  bool no_torch = false, gemm_baseline = false, json = false;
  app.add_option("--model", model_name,
                 "Model preset or JSON file; a Llama-family one runs tools/torch_llama_step.py")
      ->capture_default_str();
  app.add_option("--batch", batch, "Micro-batch = batch (one micro-batch per step)")
      ->capture_default_str();
  app.add_option("--seq", seq, "Sequence length")->capture_default_str();
  app.add_option("--threads", threads, "OpenMP threads (ETH and PyTorch)")->capture_default_str();
  app.add_option("--steps", steps, "Timed steps per round of each configuration")
      ->capture_default_str();
  app.add_option("--warmup", warmup, "Untimed steps of each configuration first")
      ->capture_default_str();
  app.add_option("--rounds", rounds, "Rounds of alternated steps; best of all rounds")
      ->capture_default_str();
  app.add_option("--recompute", recompute, "Recompute set for ETH (see eth train)")
      ->capture_default_str();
  app.add_flag("--no-torch", no_torch, "Leave PyTorch out");
  app.add_option("--torch-venv", venv,
                 "Virtualenv with PyTorch; created (newest torch from PyPI) when it has none")
      ->capture_default_str();
  app.add_option("--python", python, "Use this interpreter with torch instead of the virtualenv");
  app.add_flag("--gemm", gemm_baseline,
               "Also time the fp32 GEMM library on the step's matmul shapes (ETH fp32's ceiling)");
  app.add_flag("--json", json, "Print one JSON object");
  eth::bench::DeviceBenchOptions device;  // --device cuda|emulated: train_bench_device.h
  eth::bench::add_device_options(app, &device);
  CLI11_PARSE(app, argc, argv);
  if (device.device != "cpu") {
    // The device path's own defaults, unless the shared flags were given.
    if (app.count("--model")) device.model = model_name;
    if (app.count("--batch")) device.batch = batch;
    if (app.count("--seq")) device.seq = seq;
    if (app.count("--steps")) device.steps = steps;
    if (app.count("--warmup")) device.warmup = warmup;
    device.python = python;
    device.no_torch = no_torch;
    device.json = json;
    return eth::bench::run_device_bench(device);
  }
  if (rounds < 1 || steps < 1 || warmup < 0 || threads < 1) {
    std::cerr << "train_bench: need --rounds >= 1, --steps >= 1, --warmup >= 0, --threads >= 1\n";
    return 1;
  }
  const eth::cpu::CpuFeatures& cpu = eth::cpu::cpu_features();
  const bool native_bf16 = cpu.has_bf16_matmul();
  if (!eth::cpu::missing_build_extensions(cpu).empty()) {
    std::cerr << "train_bench: built for ISA extensions this CPU lacks; rebuild here\n";
    return 1;
  }
  const bool torch = !no_torch;
  if (torch && python.empty()) python = bench::ensure_torch_venv(venv);

  omp_set_num_threads(threads);
  const eth::ModelSpec m = eth::load_model(model_name);
  // Random tokens, enough for every step to draw fresh windows.
  const auto dir = std::filesystem::temp_directory_path() / "eth_train_bench";
  std::filesystem::create_directories(dir);
  const std::int64_t total_steps = warmup + steps * rounds;
  const std::int64_t ntok = batch * seq * (total_steps + 1) + 1;
  std::vector<std::uint16_t> tokens(static_cast<std::size_t>(ntok));
  eth::SplitMix64 rng(1);
  for (auto& t : tokens)
    t = static_cast<std::uint16_t>(rng.below(static_cast<std::uint64_t>(m.vocab)));
  eth::write_token_file(dir / "tokens.bin", tokens);

  eth::TrainConfig cfg;
  cfg.model = m;
  cfg.data = dir / "tokens.bin";
  cfg.steps = total_steps;
  cfg.global_batch = batch;
  cfg.micro_batch = batch;
  cfg.seq_len = seq;
  cfg.lr = eth::LrSchedule{1e-4, 1e-5, 0, cfg.steps};
  std::stringstream names(recompute == "none" ? "" : recompute);
  for (std::string name; std::getline(names, name, ',');) {
    const auto op = eth::parse_recompute_op(name);
    if (!op) {
      std::cerr << "unknown --recompute operator " << name << "; expected "
                << eth::recompute_op_names() << "\n";
      return 1;
    }
    cfg.recompute.add(*op);
  }
  const double load_start = load_average();
  // Before anything else runs: after ETH's steps its OpenMP threads (and PyTorch's, in the
  // server) spin on the cores a while, and the probe's two threads read one core's rate.
  const bench::ArithmeticPeak peak = bench::measure_arithmetic_peak(threads);
  // PyTorch first: its set-up and warm-up run alone, then its steps alternate with ETH's.
  std::unique_ptr<bench::TorchServer> ts;
  bool torch_ok = false;
  if (torch && !python.empty()) {
    ts = std::make_unique<bench::TorchServer>();
    torch_ok = ts->start(torch_command(python, m, batch, seq, threads, warmup));
  }
  const auto t_setup = Clock::now();
  cfg.precision = eth::Precision::Bf16;
  eth::Trainer bf16(cfg);
  cfg.precision = eth::Precision::Fp32;
  eth::Trainer fp32(cfg);
  const double setup_s = std::chrono::duration<double>(Clock::now() - t_setup).count();
  for (int i = 0; i < warmup; ++i) {
    bf16.step();
    fp32.step();
  }
  const double rss = peak_rss_bytes();  // both trainers, after steps that held everything
  std::unique_ptr<GemmBench> gemm;
  if (gemm_baseline) {
    gemm = std::make_unique<GemmBench>(step_gemms(m, batch * seq));
    gemm->sequence_s();  // warm-up: oneDNN's kernels generated, operands in place
  }
  Series e16{"ETH bf16", {}}, e32{"ETH fp32", {}}, t32{"PyTorch fp32", {}}, t16{"PyTorch bf16", {}};
  std::vector<double> gemm_s, load_rounds;
  double loss16 = 0, loss32 = 0;
  for (int r = 0; r < rounds; ++r) {
    load_rounds.push_back(load_average());
    for (int i = 0; i < steps; ++i) {
      const eth::StepStats a = bf16.step();
      e16.step_s.push_back(a.seconds);
      loss16 = a.loss;
      const eth::StepStats b = fp32.step();
      e32.step_s.push_back(b.seconds);
      loss32 = b.loss;
      if (gemm) gemm_s.push_back(gemm->sequence_s());
      for (Series* s : {&t32, &t16}) {
        if (!torch_ok) break;
        const double t = ts->step(s == &t32 ? "fp32" : "bf16");
        if (t < 0) torch_ok = false;
        else s->step_s.push_back(t);
      }
    }
  }
  nlohmann::json torch_result;
  if (ts) torch_result = ts->finish();
  if (torch && !torch_result.contains("torch")) {
    torch_result = ts ? ts->error_json() : nlohmann::json{{"error", "no PyTorch (see the log)"}};
  }

  const std::int64_t tok = batch * seq;
  const double step_flops = 3.0 * eth::model_forward_flops(m, batch, seq);
  const Series& torch_best = t16.tok_s(tok) > t32.tok_s(tok) ? t16 : t32;
  const bool have_torch = !torch_best.step_s.empty();
  const double act16 = static_cast<double>(bf16.compute().arena_bytes_total());
  const double act32 = static_cast<double>(fp32.compute().arena_bytes_total());
  const double bf16_over_fp32 = e16.tok_s(tok) / e32.tok_s(tok);
  std::vector<Target> targets;
  if (native_bf16) {
    targets.push_back({"ETH bf16 / ETH fp32", bf16_over_fp32, 1.6, false});
    if (have_torch) {
      // ETH bf16 cannot run faster than the CPU's bf16 dot-product peak (AMX would lift it).
      const double torch_flops = step_flops / best(torch_best.step_s);
      targets.push_back({"ETH bf16 / " + torch_best.name, e16.tok_s(tok) / torch_best.tok_s(tok),
                         2.0, false, cpu.amx_bf16 ? 0.0 : peak.bf16_flops / torch_flops});
    }
  } else {
    targets.push_back({"ETH bf16 / ETH fp32", bf16_over_fp32, 0.9, false});
    targets.push_back({"activation memory bf16 / fp32", act16 / act32, 0.55, true});
    if (have_torch) {
      targets.push_back({"ETH fp32 / " + torch_best.name, e32.tok_s(tok) / torch_best.tok_s(tok),
                         1.5, false});
    }
  }
  const std::string gemm_path(eth::cpu::bf16::gemm_path_name(eth::cpu::bf16::gemm_path()));

  if (json) {
    nlohmann::json configs = nlohmann::json::array();
    for (const Series* s : {&e16, &e32, &t32, &t16}) {
      configs.push_back({{"name", s->name},
                         {"step_s_all", s->step_s},
                         {"step_s_best", best(s->step_s)},
                         {"tokens_per_s", s->tok_s(tok)}});
    }
    nlohmann::json verdicts = nlohmann::json::array();
    for (const Target& t : targets) {
      verdicts.push_back({{"target", t.what},
                          {"value", t.value},
                          {"want", t.want},
                          {"at_most", t.at_most},
                          {"met", t.met()}});
      if (t.ceiling > 0) verdicts.back()["ceiling"] = t.ceiling;
    }
    nlohmann::json j{{"model", m.name},
                     {"batch", batch},
                     {"seq", seq},
                     {"threads", threads},
                     {"rounds", rounds},
                     {"cpu_model", cpu.model},
                     {"cpu_extensions", cpu.extensions()},
                     {"bf16_matmul_instructions", native_bf16},
                     {"bf16_gemm_path", gemm_path},
                     {"gemm_library", std::string(eth::cpu::gemm_library())},
                     {"configs", configs},
                     {"eth_bf16_over_fp32", bf16_over_fp32},
                     {"eth_bf16_over_fp32_median", median(e32.step_s) / median(e16.step_s)},
                     {"activation_bytes_bf16", act16},
                     {"activation_bytes_fp32", act32},
                     {"held_bytes_per_slot_bf16", bf16.compute().held_bytes_per_slot()},
                     {"held_bytes_per_slot_fp32", fp32.compute().held_bytes_per_slot()},
                     {"state_bytes_bf16", static_cast<double>(bf16.state().state_bytes())},
                     {"state_bytes_fp32", static_cast<double>(fp32.state().state_bytes())},
                     {"peak_rss_bytes_both_trainers", rss},
                     {"peak_fp32_gflops", peak.fp32_flops / 1e9},
                     {"peak_bf16_dot_gflops", peak.bf16_flops / 1e9},
                     {"setup_s", setup_s},
                     {"loss_bf16", loss16},
                     {"loss_fp32", loss32},
                     {"targets", verdicts},
                     {"load_average_start", load_start},
                     {"load_average_rounds", load_rounds}};
    if (torch) j["torch"] = torch_result;
    if (gemm) j["gemm_fp32_gflops"] = gemm->flops() / best(gemm_s) / 1e9;
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::printf("%s, batch %lld x seq %lld, %d threads, %d round%s of %d steps per configuration\n",
              m.name.c_str(), static_cast<long long>(batch), static_cast<long long>(seq), threads,
              rounds, rounds == 1 ? "" : "s", steps);
  std::printf("CPU %s: %s (%s bf16 matrix instructions; bf16 GEMMs %s, fp32 GEMMs %s)\n",
              cpu.model.c_str(), cpu.extensions().c_str(), native_bf16 ? "with" : "no",
              gemm_path.c_str(), std::string(eth::cpu::gemm_library()).c_str());
  std::printf("load average (1 min): %.2f at start, %s at each round\n\n", load_start,
              list(load_rounds, 2).c_str());
  std::printf("  %-14s %9s %10s %9s   %s\n", "configuration", "best s", "tok/s", "GFLOP/s",
              "steps (s)");
  for (const Series* s : {&e16, &e32, &t32, &t16}) {
    if (s->step_s.empty()) {
      std::printf("  %-14s %9s\n", s->name.c_str(), "-");
      continue;
    }
    std::printf("  %-14s %9.3f %10.1f %9.1f   %s\n", s->name.c_str(), best(s->step_s),
                s->tok_s(tok), step_flops / best(s->step_s) / 1e9, list(s->step_s, 2).c_str());
  }
  if (torch) {
    if (torch_result.contains("torch")) {
      std::printf("  PyTorch %s (%d threads, %s attention, %s AdamW, peak RSS %.2f GB)\n",
                  torch_result.value("torch", std::string("?")).c_str(),
                  torch_result.value("threads", 0),
                  torch_result.value("attention", std::string("?")).c_str(),
                  torch_result.value("adamw", std::string("?")).c_str(),
                  torch_result.value("peak_rss_bytes", 0.0) / 1e9);
      if (torch_result.contains("implementation")) {
        std::printf("  PyTorch model: %s, %.1fM parameters\n",
                    torch_result.value("implementation", std::string("?")).c_str(),
                    torch_result.value("parameters", 0.0) / 1e6);
      }
    } else {
      std::printf("  PyTorch: %s\n", torch_result.dump().c_str());
    }
  }
  if (gemm) {
    std::printf("  fp32 GEMM library on the step's shapes: %.1f GFLOP/s (ETH fp32 at %.0f%%)\n",
                gemm->flops() / best(gemm_s) / 1e9,
                100.0 * (step_flops / best(e32.step_s)) / (gemm->flops() / best(gemm_s)));
  }
  std::printf("  arithmetic peak, %d threads, measured before the steps: fp32 %.0f GFLOP/s (%s)",
              threads, peak.fp32_flops / 1e9, peak.fp32_instr);
  if (peak.bf16_flops > 0) {
    std::printf(", bf16 %.0f GFLOP/s (VDPBF16PS); ETH bf16 at %.0f%% of it, PyTorch bf16 at %s",
                peak.bf16_flops / 1e9, 100.0 * step_flops / best(e16.step_s) / peak.bf16_flops,
                t16.step_s.empty()
                    ? "-"
                    : (std::to_string(static_cast<int>(std::lround(
                           100.0 * step_flops / best(t16.step_s) / peak.bf16_flops))) + "%").c_str());
  }
  std::printf("\n");
  std::printf("\nsame-run ratios (best step against best step; medians of the alternated steps "
              "in brackets):\n");
  std::printf("  ETH bf16 / ETH fp32        %.2fx  (%.2fx)\n", bf16_over_fp32,
              median(e32.step_s) / median(e16.step_s));
  if (have_torch) {
    for (const Series* s : {&t32, &t16}) {
      if (s->step_s.empty()) continue;
      std::printf("  ETH bf16 / %-15s %.2fx  (%.2fx);  ETH fp32 / %s %.2fx  (%.2fx)\n",
                  s->name.c_str(), e16.tok_s(tok) / s->tok_s(tok),
                  median(s->step_s) / median(e16.step_s), s->name.c_str(),
                  e32.tok_s(tok) / s->tok_s(tok), median(s->step_s) / median(e32.step_s));
    }
  }
  std::printf("  activations (arena): bf16 %.0f MB, fp32 %.0f MB (%.2fx); model state: bf16 %.0f MB, "
              "fp32 %.0f MB\n",
              act16 / 1e6, act32 / 1e6, act16 / act32,
              static_cast<double>(bf16.state().state_bytes()) / 1e6,
              static_cast<double>(fp32.state().state_bytes()) / 1e6);
  std::printf("  peak RSS (both trainers) %.2f GB, set-up %.2f s, loss bf16 %.4f fp32 %.4f\n",
              rss / 1e9, setup_s, loss16, loss32);
  std::printf("\ntargets (%s bf16 instructions):\n", native_bf16 ? "CPU with" : "CPU without");
  for (const Target& t : targets) {
    std::printf("  %-36s %.2f%s (want %s %.2f): %s", t.what.c_str(), t.value,
                t.at_most ? "" : "x", t.at_most ? "<=" : ">=", t.want, t.met() ? "met" : "MISSED");
    if (t.ceiling > 0 && t.ceiling < t.want) {
      std::printf(" (out of this CPU's reach: at its bf16 peak a step would be %.2fx)", t.ceiling);
    }
    std::printf("\n");
  }
  if (!have_torch && torch) std::printf("  (the PyTorch targets need PyTorch: see above)\n");
  return 0;
}
