// train_bench: one training step of a GPT (default gpt2-small, micro-batch 4, sequence 256,
// 2 threads) through ETH's trainer: tokens/s and achieved GFLOP/s, beside the GEMM library's own
// GFLOP/s on the step's matmul shapes measured in the same run, peak resident memory, and (with
// --torch) PyTorch CPU on the identical model via tools/torch_gpt2_step.py, tuned as
// /work/shared/notes/machine-figures.md says. Prints a table (or --json). Not a test.
#include <omp.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "data/token_file.h"
#include "data/tokenize.h"
#include "kernels/cpu/gemm.h"
#include "model/arithmetic.h"
#include "train/arena.h"
#include "train/trainer.h"

namespace {

using Clock = std::chrono::steady_clock;
using eth::cpu::Trans;

struct Gemm {
  const char* what;
  Trans ta, tb;
  std::int64_t M, N, K;
  std::int64_t count;  // calls per training step
  double flops() const { return 2.0 * static_cast<double>(M * N * K); }
};

// The matmuls of one step as StageCompute issues them (forward, then the two backward
// products), N = B * T rows. Attention's per-head products are not included (the model FLOPs
// below include them, so the ratio slightly favours the GEMM side).
std::vector<Gemm> step_gemms(const eth::ModelSpec& m, std::int64_t n) {
  const std::int64_t C = m.hidden, F = m.ffn, V = m.vocab, L = m.layers;
  std::vector<Gemm> g;
  auto nt = [&](const char* w, std::int64_t oc, std::int64_t c, std::int64_t count) {
    g.push_back({w, Trans::No, Trans::Yes, n, oc, c, count});  // out = inp W^T
    g.push_back({w, Trans::No, Trans::No, n, c, oc, count});   // dinp = dout W
    g.push_back({w, Trans::Yes, Trans::No, oc, c, n, count});  // dW += dout^T inp
  };
  auto nn = [&](const char* w, std::int64_t c, std::int64_t oc, std::int64_t count) {
    g.push_back({w, Trans::No, Trans::No, n, oc, c, count});   // out = inp W
    g.push_back({w, Trans::No, Trans::Yes, n, c, oc, count});  // dinp = dout W^T
    g.push_back({w, Trans::Yes, Trans::No, c, oc, n, count});  // dW += inp^T dout
  };
  nt("qkv", 3 * C, C, L);
  nn("proj", C, C, L);
  nt("fc", F, C, L);
  nn("fcproj", F, C, L);
  nt("lm_head", V, C, 1);
  return g;
}

// Seconds of the fastest of `reps` calls of each GEMM; operands from one pre-faulted arena.
double time_gemms(const std::vector<Gemm>& gemms, int reps, double* flops_out) {
  std::int64_t most = 0;
  for (const Gemm& g : gemms) most = std::max({most, g.M * g.K, g.K * g.N, g.M * g.N});
  eth::Arena arena(3 * eth::arena_bytes<float>(most));
  float* a = arena.take<float>(most);
  float* b = arena.take<float>(most);
  float* c = arena.take<float>(most);
  for (std::int64_t i = 0; i < most; ++i) a[i] = b[i] = 1e-3f * static_cast<float>(i % 97);
  double seconds = 0, flops = 0;
  for (const Gemm& g : gemms) {
    const std::int64_t lda = g.ta == Trans::No ? g.K : g.M;
    const std::int64_t ldb = g.tb == Trans::No ? g.N : g.K;
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
      const auto t0 = Clock::now();
      eth::cpu::sgemm(g.ta, g.tb, g.M, g.N, g.K, 1.0f, a, lda, b, ldb, 0.0f, c, g.N);
      best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
    }
    seconds += best * static_cast<double>(g.count);
    flops += g.flops() * static_cast<double>(g.count);
  }
  *flops_out = flops;
  return seconds;
}

std::string run_capture(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), p)) out += buf.data();
  ::pclose(p);
  return out;
}

double peak_rss_bytes() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) * 1024.0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"One GPT training step on the CPU: ETH beside its GEMM library and PyTorch"};
  std::string model_name = "gpt2-small", recompute = "none", python = "/usr/bin/python3";
  std::int64_t batch = 4, seq = 256;
  int threads = 2, steps = 3, warmup = 1;
  bool torch = false, json = false;
  app.add_option("--model", model_name, "Model preset or JSON file")->capture_default_str();
  app.add_option("--batch", batch, "Micro-batch = batch (one micro-batch per step)")
      ->capture_default_str();
  app.add_option("--seq", seq, "Sequence length")->capture_default_str();
  app.add_option("--threads", threads, "OpenMP threads (ETH, the GEMM baseline and PyTorch)")
      ->capture_default_str();
  app.add_option("--steps", steps, "Timed steps (best is reported)")->capture_default_str();
  app.add_option("--warmup", warmup, "Untimed steps first")->capture_default_str();
  app.add_option("--recompute", recompute, "Recompute set for ETH (see eth train)")
      ->capture_default_str();
  app.add_flag("--torch", torch, "Also run tools/torch_gpt2_step.py (Debian python3-torch)");
  app.add_option("--python", python, "Interpreter with torch")->capture_default_str();
  app.add_flag("--json", json, "Print one JSON object");
  CLI11_PARSE(app, argc, argv);

  omp_set_num_threads(threads);
  const eth::ModelSpec m = eth::load_model(model_name);
  // Random tokens, enough for every step to draw fresh windows.
  const auto dir = std::filesystem::temp_directory_path() / "eth_train_bench";
  std::filesystem::create_directories(dir);
  const std::int64_t ntok = batch * seq * (warmup + steps + 1) + 1;
  std::vector<std::uint16_t> tokens(static_cast<std::size_t>(ntok));
  eth::SplitMix64 rng(1);
  for (auto& t : tokens)
    t = static_cast<std::uint16_t>(rng.below(static_cast<std::uint64_t>(m.vocab)));
  eth::write_token_file(dir / "tokens.bin", tokens);

  eth::TrainConfig cfg;
  cfg.model = m;
  cfg.data = dir / "tokens.bin";
  cfg.steps = warmup + steps;
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
  const auto t_setup = Clock::now();
  eth::Trainer trainer(cfg);
  const double setup_s = std::chrono::duration<double>(Clock::now() - t_setup).count();
  std::vector<double> step_s;
  double loss = 0;
  while (!trainer.done()) {
    const eth::StepStats s = trainer.step();
    loss = s.loss;
    if (s.step >= warmup) step_s.push_back(s.seconds);
  }
  const double best = *std::min_element(step_s.begin(), step_s.end());
  const double step_flops = 3.0 * eth::model_forward_flops(m, batch, seq);
  const double eth_tok_s = static_cast<double>(batch * seq) / best;
  const double eth_gflops = step_flops / best / 1e9;
  double gemm_flops = 0;
  const double gemm_s = time_gemms(step_gemms(m, batch * seq), 3, &gemm_flops);
  const double gemm_gflops = gemm_flops / gemm_s / 1e9;
  const double rss = peak_rss_bytes();

  nlohmann::json torch_result;
  if (torch) {
    const std::string script = std::string(ETH_SOURCE_DIR) + "/tools/torch_gpt2_step.py";
    std::string env = "OMP_NUM_THREADS=" + std::to_string(threads) +
                      " OPENBLAS_CORETYPE=SkylakeX GLIBC_TUNABLES=glibc.malloc.hugetlb=1";
    if (std::filesystem::exists("/usr/lib/x86_64-linux-gnu/openblas-openmp")) {
      env += " LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp";
    }
    const std::string cmd =
        env + " " + python + " " + script + " --layers " + std::to_string(m.layers) + " --hidden " +
        std::to_string(m.hidden) + " --heads " + std::to_string(m.heads) + " --ffn " +
        std::to_string(m.ffn) + " --vocab " + std::to_string(m.vocab) + " --max-seq " +
        std::to_string(m.seq_len) + " --batch " + std::to_string(batch) + " --seq " +
        std::to_string(seq) + " --threads " + std::to_string(threads) + " --warmup " +
        std::to_string(warmup) + " --steps " + std::to_string(steps) + " 2>&1";
    const std::string out = run_capture(cmd);
    const auto brace = out.rfind('{');
    try {
      torch_result = nlohmann::json::parse(out.substr(brace == std::string::npos ? 0 : brace));
    } catch (const std::exception&) {
      torch_result = {{"error", out.empty() ? "no output" : out.substr(0, 400)},
                      {"hint", "apt-get install python3-torch libopenblas0-openmp"}};
    }
  }

  if (json) {
    nlohmann::json j{{"model", m.name},
                     {"batch", batch},
                     {"seq", seq},
                     {"threads", threads},
                     {"gemm_library", std::string(eth::cpu::gemm_library())},
                     {"eth_step_s", best},
                     {"eth_step_s_all", step_s},
                     {"eth_tokens_per_s", eth_tok_s},
                     {"eth_gflops", eth_gflops},
                     {"gemm_gflops", gemm_gflops},
                     {"eth_fraction_of_gemm", eth_gflops / gemm_gflops},
                     {"peak_rss_bytes", rss},
                     {"setup_s", setup_s},
                     {"loss", loss}};
    if (torch) j["torch"] = torch_result;
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::printf("%s, batch %lld x seq %lld, %d threads, GEMM library %s\n", m.name.c_str(),
              static_cast<long long>(batch), static_cast<long long>(seq), threads,
              std::string(eth::cpu::gemm_library()).c_str());
  std::printf(
      "  ETH step          %8.3f s   %8.1f tok/s   %6.1f GFLOP/s (%.0f%% of the GEMM rate)\n", best,
      eth_tok_s, eth_gflops, 100.0 * eth_gflops / gemm_gflops);
  std::printf("  GEMM same shapes  %8.3f s                  %6.1f GFLOP/s\n", gemm_s, gemm_gflops);
  if (torch) {
    if (torch_result.contains("tokens_per_s")) {
      const double tt = torch_result["tokens_per_s"].get<double>();
      std::printf("  PyTorch %-9s %8.3f s   %8.1f tok/s   %6.1f GFLOP/s  -> ETH is %.2fx\n",
                  torch_result["torch"].get<std::string>().c_str(),
                  torch_result["step_s_best"].get<double>(), tt,
                  step_flops / torch_result["step_s_best"].get<double>() / 1e9, eth_tok_s / tt);
    } else {
      std::printf("  PyTorch: %s\n", torch_result.dump().c_str());
    }
  }
  std::printf("  peak RSS %.2f GB, set-up %.2f s, loss %.4f\n", rss / 1e9, setup_s, loss);
  return 0;
}
