// train_bench: one training step of a GPT (default gpt2-small, micro-batch 4, sequence 256,
// 2 threads) through ETH's trainer: tokens/s and achieved GFLOP/s, beside the GEMM library's own
// GFLOP/s on the step's matmul shapes measured in the same run, peak resident memory, and (with
// --torch) PyTorch CPU on the identical model via tools/torch_gpt2_step.py, tuned as
// /work/shared/notes/machine-figures.md says (--install-torch installs Debian's python3-torch
// first when it is missing). The machines are shared: --rounds alternates ETH, the GEMM baseline
// and PyTorch so a burst of someone else's load hits all three, the best of each is reported,
// and the load average is printed beside the figures. Prints a table (or --json). Not a test.
#include <omp.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
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

bool torch_importable(const std::string& python) {
  return std::system((python + " -c 'import torch' >/dev/null 2>&1").c_str()) == 0;
}

// Debian's python3-torch and the OpenMP OpenBLAS it is tuned with; returns whether torch imports
// afterwards. Needs root (the bench machines run as root).
bool install_torch(const std::string& python) {
  if (torch_importable(python)) return true;
  std::fprintf(stderr, "train_bench: installing python3-torch (apt-get)...\n");
  const int rc = std::system(
      "DEBIAN_FRONTEND=noninteractive apt-get install -y python3-torch libopenblas0-openmp "
      ">/tmp/eth_train_bench_apt.log 2>&1");
  if (rc != 0) {
    std::fprintf(stderr, "train_bench: apt-get failed, see /tmp/eth_train_bench_apt.log\n");
  }
  return torch_importable(python);
}

// tools/torch_gpt2_step.py --serve as a child process: one PyTorch step per step() call, so
// that ETH's and PyTorch's steps alternate and meet the same load from the machine's other users.
class TorchServer {
 public:
  TorchServer() = default;
  TorchServer(const TorchServer&) = delete;
  TorchServer& operator=(const TorchServer&) = delete;
  ~TorchServer() { finish(); }

  // Starts the script under /bin/sh and waits for its warm-up ("ready"). False on failure, with
  // the script's output in error().
  bool start(const std::string& cmd) {
    // A script that dies must not take the bench with it when we next write to its pipe.
    std::signal(SIGPIPE, SIG_IGN);
    int to_child[2], from_child[2];
    if (::pipe(to_child) != 0 || ::pipe(from_child) != 0) return fail("pipe failed");
    pid_ = ::fork();
    if (pid_ < 0) return fail("fork failed");
    if (pid_ == 0) {
      ::dup2(to_child[0], 0);
      ::dup2(from_child[1], 1);
      ::dup2(from_child[1], 2);
      ::close(to_child[0]);
      ::close(to_child[1]);
      ::close(from_child[0]);
      ::close(from_child[1]);
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(to_child[0]);
    ::close(from_child[1]);
    to_ = ::fdopen(to_child[1], "w");
    from_ = ::fdopen(from_child[0], "r");
    for (std::string line; read_line(&line);) {
      if (line == "ready") return true;
      output_ += line + "\n";
    }
    return fail("the script ended before it was ready");
  }

  // Seconds of one PyTorch step, or a negative number when the script failed.
  double step() {
    if (!to_ || !from_) return -1;
    std::fputs("step\n", to_);
    std::fflush(to_);
    for (std::string line; read_line(&line);) {
      if (line.empty() || line[0] != '{') {
        output_ += line + "\n";
        continue;
      }
      try {
        return nlohmann::json::parse(line).at("step_s").get<double>();
      } catch (const std::exception&) {
        output_ += line + "\n";
        return -1;
      }
    }
    return -1;
  }

  // Ends the script; its summary (version, peak RSS), or {"error", "hint"}.
  nlohmann::json finish() {
    if (pid_ <= 0) return summary_;
    if (to_) {
      std::fputs("quit\n", to_);
      std::fclose(to_);
      to_ = nullptr;
    }
    for (std::string line; read_line(&line);) {
      if (!line.empty() && line[0] == '{') {
        try {
          summary_ = nlohmann::json::parse(line);
        } catch (const std::exception&) {
          output_ += line + "\n";
        }
      } else {
        output_ += line + "\n";
      }
    }
    if (from_) std::fclose(from_);
    from_ = nullptr;
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    if (!summary_.contains("torch")) summary_ = error_json();
    return summary_;
  }

  nlohmann::json error_json() const {
    return {{"error", output_.empty() ? "no output" : output_.substr(0, 400)},
            {"hint", "apt-get install python3-torch libopenblas0-openmp, or --install-torch"}};
  }

 private:
  bool read_line(std::string* line) {
    if (!from_) return false;
    line->clear();
    for (int c; (c = std::fgetc(from_)) != EOF;) {
      if (c == '\n') return true;
      line->push_back(static_cast<char>(c));
    }
    return !line->empty();
  }
  bool fail(const std::string& why) {
    output_ += why + "\n";
    finish();
    return false;
  }

  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
  std::string output_;
  nlohmann::json summary_;
};

// The OpenBLAS kernel set for the PyTorch baseline, from this CPU's flags: OpenBLAS misreads
// the CPU of some virtual machines and picks a slow generic kernel, so the bench names one, but
// only one the CPU can run (SkylakeX needs AVX-512: on an AVX2-only CPU it dies of an illegal
// instruction). Empty: leave OpenBLAS to its own detection.
std::string openblas_coretype() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::set<std::string> flags;
    for (std::string w; words >> w;) flags.insert(w);
    if (flags.count("avx512f") && flags.count("avx512bw") && flags.count("avx512vl")) {
      return "SkylakeX";
    }
    if (flags.count("avx2") && flags.count("fma")) return "Haswell";
    return "";
  }
  return "";
}

std::string torch_command(const std::string& python, const eth::ModelSpec& m, std::int64_t batch,
                          std::int64_t seq, int threads, int warmup) {
  const std::string script = std::string(ETH_SOURCE_DIR) + "/tools/torch_gpt2_step.py";
  const std::string coretype = openblas_coretype();
  std::fprintf(stderr, "train_bench: PyTorch baseline with OPENBLAS_CORETYPE=%s\n",
               coretype.empty() ? "(unset: OpenBLAS detects the CPU itself)" : coretype.c_str());
  std::string env = "OMP_NUM_THREADS=" + std::to_string(threads) +
                    (coretype.empty() ? "" : " OPENBLAS_CORETYPE=" + coretype) +
                    " GLIBC_TUNABLES=glibc.malloc.hugetlb=1";
  if (std::filesystem::exists("/usr/lib/x86_64-linux-gnu/openblas-openmp")) {
    env += " LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp";
  }
  return "exec env " + env + " " + python + " -u " + script + " --layers " +
         std::to_string(m.layers) + " --hidden " + std::to_string(m.hidden) + " --heads " +
         std::to_string(m.heads) + " --ffn " + std::to_string(m.ffn) + " --vocab " +
         std::to_string(m.vocab) + " --max-seq " + std::to_string(m.seq_len) + " --batch " +
         std::to_string(batch) + " --seq " + std::to_string(seq) + " --threads " +
         std::to_string(threads) + " --warmup " + std::to_string(warmup) + " --serve";
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"One GPT training step on the CPU: ETH beside its GEMM library and PyTorch"};
  std::string model_name = "gpt2-small", recompute = "none", python = "/usr/bin/python3";
  std::int64_t batch = 4, seq = 256;
  int threads = 2, steps = 3, warmup = 1, rounds = 2;
  bool torch = false, install = false, json = false;
  app.add_option("--model", model_name, "Model preset or JSON file")->capture_default_str();
  app.add_option("--batch", batch, "Micro-batch = batch (one micro-batch per step)")
      ->capture_default_str();
  app.add_option("--seq", seq, "Sequence length")->capture_default_str();
  app.add_option("--threads", threads, "OpenMP threads (ETH, the GEMM baseline and PyTorch)")
      ->capture_default_str();
  app.add_option("--steps", steps, "Timed steps per round (best is reported)")
      ->capture_default_str();
  app.add_option("--warmup", warmup, "Untimed steps first")->capture_default_str();
  app.add_option("--rounds", rounds,
                 "Rounds of (ETH steps, GEMM baseline, PyTorch steps); best of all rounds")
      ->capture_default_str();
  app.add_option("--recompute", recompute, "Recompute set for ETH (see eth train)")
      ->capture_default_str();
  app.add_flag("--torch", torch, "Also run tools/torch_gpt2_step.py (Debian python3-torch)");
  app.add_flag("--install-torch", install,
               "With --torch: apt-get install python3-torch libopenblas0-openmp when missing");
  app.add_option("--python", python, "Interpreter with torch")->capture_default_str();
  app.add_flag("--json", json, "Print one JSON object");
  CLI11_PARSE(app, argc, argv);
  if (rounds < 1 || steps < 1 || warmup < 0 || threads < 1) {
    std::cerr << "train_bench: need --rounds >= 1, --steps >= 1, --warmup >= 0, --threads >= 1\n";
    return 1;
  }
  if (torch && install && !install_torch(python)) {
    std::cerr << "train_bench: torch still not importable by " << python << "\n";
  }

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
  // PyTorch first: its set-up and warm-up run alone, then its steps alternate with ETH's.
  std::unique_ptr<TorchServer> ts;
  bool torch_ok = false;
  if (torch) {
    ts = std::make_unique<TorchServer>();
    torch_ok = ts->start(torch_command(python, m, batch, seq, threads, warmup));
  }
  const auto t_setup = Clock::now();
  eth::Trainer trainer(cfg);
  const double setup_s = std::chrono::duration<double>(Clock::now() - t_setup).count();
  std::vector<double> step_s, torch_s, gemm_seq_s, load_rounds;
  double loss = 0, gemm_shape_s = 1e30;
  for (int i = 0; i < warmup; ++i) loss = trainer.step().loss;
  // ETH's own peak (the warm-up steps held everything a step holds), before the GEMM baseline
  // maps its operands.
  const double rss = peak_rss_bytes();
  GemmBench gemm(step_gemms(m, batch * seq));
  gemm.sequence_s();  // warm-up: oneDNN's kernels generated, operands in place
  // Each step: ETH, then the GEMM sequence, then PyTorch, so a burst of someone else's load
  // falls on all three alike; the best of each is reported.
  for (int r = 0; r < rounds; ++r) {
    load_rounds.push_back(load_average());
    for (int i = 0; i < steps; ++i) {
      const eth::StepStats st = trainer.step();
      loss = st.loss;
      step_s.push_back(st.seconds);
      gemm_seq_s.push_back(gemm.sequence_s());
      if (torch_ok) {
        const double t = ts->step();
        if (t < 0) {
          torch_ok = false;
        } else {
          torch_s.push_back(t);
        }
      }
    }
    gemm_shape_s = std::min(gemm_shape_s, gemm.per_shape_s(2));
  }
  const double gemm_s = *std::min_element(gemm_seq_s.begin(), gemm_seq_s.end());
  const double gemm_flops = gemm.flops();
  const std::int64_t ncalls = gemm.calls();
  nlohmann::json torch_result;
  if (ts) torch_result = ts->finish();
  if (!torch_s.empty() && torch_result.contains("torch")) {
    torch_result["step_s_all"] = torch_s;  // the alternated steps (the script saw the same)
  } else if (torch && !torch_result.contains("error")) {
    torch_result = ts->error_json();
  }
  const double best = *std::min_element(step_s.begin(), step_s.end());
  const double step_flops = 3.0 * eth::model_forward_flops(m, batch, seq);
  const double eth_tok_s = static_cast<double>(batch * seq) / best;
  const double eth_gflops = step_flops / best / 1e9;
  const double gemm_gflops = gemm_flops / gemm_s / 1e9;
  const double gemm_shape_gflops = gemm_flops / gemm_shape_s / 1e9;
  const double torch_best =
      torch_s.empty() ? 0 : *std::min_element(torch_s.begin(), torch_s.end());
  const double torch_tok_s = torch_best > 0 ? static_cast<double>(batch * seq) / torch_best : 0;
  // Step by step: ETH's i-th step beside PyTorch's i-th (they ran back to back).
  const double median_ratio = torch_s.empty() ? 0 : median(torch_s) / median(step_s);

  const double frac = eth_gflops / gemm_gflops;
  if (json) {
    nlohmann::json j{{"model", m.name},
                     {"batch", batch},
                     {"seq", seq},
                     {"threads", threads},
                     {"rounds", rounds},
                     {"gemm_library", std::string(eth::cpu::gemm_library())},
                     {"eth_step_s", best},
                     {"eth_step_s_all", step_s},
                     {"eth_tokens_per_s", eth_tok_s},
                     {"eth_gflops", eth_gflops},
                     {"gemm_gflops", gemm_gflops},
                     {"gemm_gflops_best_per_shape", gemm_shape_gflops},
                     {"gemm_sequence_s_all", gemm_seq_s},
                     {"eth_fraction_of_gemm", frac},
                     {"peak_rss_bytes", rss},
                     {"setup_s", setup_s},
                     {"loss", loss},
                     {"load_average_start", load_start},
                     {"load_average_rounds", load_rounds}};
    if (torch) {
      j["torch"] = torch_result;
      if (torch_tok_s > 0) {
        j["torch_tokens_per_s"] = torch_tok_s;
        j["eth_over_torch"] = eth_tok_s / torch_tok_s;
        j["eth_over_torch_median"] = median_ratio;
      }
    }
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::printf("%s, batch %lld x seq %lld, %d threads, GEMM library %s, %d round%s of %d steps\n",
              m.name.c_str(), static_cast<long long>(batch), static_cast<long long>(seq), threads,
              std::string(eth::cpu::gemm_library()).c_str(), rounds, rounds == 1 ? "" : "s",
              steps);
  std::printf(
      "  ETH step          %8.3f s   %8.1f tok/s   %6.1f GFLOP/s (%.0f%% of the GEMM rate; "
      "target 70%%: %s)\n",
      best, eth_tok_s, eth_gflops, 100.0 * frac, frac >= 0.7 ? "met" : "missed");
  std::printf(
      "  GEMM same shapes  %8.3f s                  %6.1f GFLOP/s (the step's %lld calls back to "
      "back; best single call per shape: %.1f GFLOP/s, ETH at %.0f%% of that)\n",
      gemm_s, gemm_gflops, static_cast<long long>(ncalls), gemm_shape_gflops,
      100.0 * eth_gflops / gemm_shape_gflops);
  if (torch) {
    if (torch_tok_s > 0) {
      const double ratio = eth_tok_s / torch_tok_s;
      std::printf("  PyTorch %-9s %8.3f s   %8.1f tok/s   %6.1f GFLOP/s  (peak RSS %.2f GB)\n",
                  torch_result.value("torch", std::string("?")).c_str(), torch_best, torch_tok_s,
                  step_flops / torch_best / 1e9,
                  torch_result.value("peak_rss_bytes", 0.0) / 1e9);
      std::printf(
          "  ETH / PyTorch     %.2fx tokens/s, best step against best step (target 1.2x: %s); "
          "%.2fx median against median, over %zu alternated steps each\n",
          ratio, ratio >= 1.2 ? "met" : "missed", median_ratio, torch_s.size());
    } else {
      std::printf("  PyTorch: %s\n", torch_result.dump().c_str());
    }
  }
  auto list = [](const std::vector<double>& v, int digits) {
    std::string out;
    for (double x : v) {
      char b[32];
      std::snprintf(b, sizeof b, "%.*f", digits, x);
      out += (out.empty() ? "" : " ") + std::string(b);
    }
    return out;
  };
  std::printf("  ETH steps (s):     %s\n", list(step_s, 2).c_str());
  std::printf("  GEMM sequence (s): %s\n", list(gemm_seq_s, 2).c_str());
  if (!torch_s.empty()) std::printf("  PyTorch steps (s): %s\n", list(torch_s, 2).c_str());
  std::printf("  peak RSS %.2f GB (ETH), set-up %.2f s, loss %.4f\n", rss / 1e9, setup_s, loss);
  std::printf("  load average (1 min): %.2f at start, %s at each round\n", load_start,
              list(load_rounds, 2).c_str());
  return 0;
}
