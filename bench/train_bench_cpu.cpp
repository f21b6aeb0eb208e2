// train_bench's CPU path (train_bench_cpu.h): the trainers and the PyTorch server set up, then
// rounds of one step of each configuration in turn, so a burst of someone else's load hits all
// of them.
#include "train_bench_cpu.h"

#include <omp.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bench_util.h"
#include "torch_server.h"
#include "train_bench_gemm.h"
#include "data/token_file.h"
#include "data/tokenize.h"
#include "train/trainer.h"

namespace eth::bench {

namespace {

double peak_rss_bytes() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) * 1024.0;
}

// The Llama family's own flags of tools/torch_llama_step.py (empty for GPT, whose script is
// tools/torch_gpt2_step.py).
std::string llama_flags(const ModelSpec& m) {
  const bool llama = m.norm == NormKind::RmsNorm || m.positions == PositionKind::Rope ||
                     m.mlp == MlpKind::Swiglu;
  if (!llama) return "";
  char eps[32], theta[32];
  std::snprintf(eps, sizeof eps, "%.9g", m.norm_eps);
  std::snprintf(theta, sizeof theta, "%.9g", m.rope_theta);
  return " --kv-heads " + std::to_string(m.num_kv_heads()) + " --norm-eps " + eps +
         " --rope-theta " + theta + (m.tied_embeddings ? " --tied" : "");
}

std::string torch_command(const std::string& python, const ModelSpec& m, std::int64_t batch,
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

// The trainers' configuration on a file of random tokens, enough for every step to draw fresh
// windows; nothing (after saying why) for an unknown --recompute operator.
std::optional<TrainConfig> train_config(const CpuBenchOptions& o, const ModelSpec& m) {
  const auto dir = std::filesystem::temp_directory_path() / "eth_train_bench";
  std::filesystem::create_directories(dir);
  const std::int64_t total_steps = o.warmup + o.steps * o.rounds;
  const std::int64_t ntok = o.batch * o.seq * (total_steps + 1) + 1;
  std::vector<std::uint16_t> tokens(static_cast<std::size_t>(ntok));
  SplitMix64 rng(1);
  for (auto& t : tokens) {
    t = static_cast<std::uint16_t>(rng.below(static_cast<std::uint64_t>(m.vocab)));
  }
  write_token_file(dir / "tokens.bin", tokens);
  TrainConfig cfg;
  cfg.model = m;
  cfg.data = dir / "tokens.bin";
  cfg.steps = total_steps;
  cfg.global_batch = o.batch;
  cfg.micro_batch = o.batch;
  cfg.seq_len = o.seq;
  cfg.lr = LrSchedule{1e-4, 1e-5, 0, cfg.steps};
  std::stringstream names(o.recompute == "none" ? "" : o.recompute);
  for (std::string name; std::getline(names, name, ',');) {
    const auto op = parse_recompute_op(name);
    if (!op) {
      std::cerr << "unknown --recompute operator " << name << "; expected "
                << recompute_op_names() << "\n";
      return std::nullopt;
    }
    cfg.recompute.add(*op);
  }
  return cfg;
}

// The timed rounds: each round one step of every configuration in turn (and of the GEMM
// sequence, with --gemm), the load average read before each.
void measure_rounds(CpuRun& r, Trainer& bf16, Trainer& fp32, ::bench::TorchServer* ts,
                    bool torch_ok, GemmBench* gemm) {
  for (int round = 0; round < r.opt.rounds; ++round) {
    r.load_rounds.push_back(load_1m());
    for (int i = 0; i < r.opt.steps; ++i) {
      const StepStats a = bf16.step();
      r.e16.step_s.push_back(a.seconds);
      r.loss16 = a.loss;
      const StepStats b = fp32.step();
      r.e32.step_s.push_back(b.seconds);
      r.loss32 = b.loss;
      if (gemm) r.gemm_s.push_back(gemm->sequence_s());
      for (Series* s : {&r.t32, &r.t16}) {
        if (!torch_ok) break;
        const double t = ts->step(s == &r.t32 ? "fp32" : "bf16");
        if (t < 0) torch_ok = false;
        else s->step_s.push_back(t);
      }
    }
  }
}

}  // namespace

int run_cpu_bench(CpuBenchOptions o) {
  if (o.rounds < 1 || o.steps < 1 || o.warmup < 0 || o.threads < 1) {
    std::cerr << "train_bench: need --rounds >= 1, --steps >= 1, --warmup >= 0, --threads >= 1\n";
    return 1;
  }
  CpuRun r;
  r.cpu = &cpu::cpu_features();
  r.native_bf16 = r.cpu->has_bf16_matmul();
  if (!cpu::missing_build_extensions(*r.cpu).empty()) {
    std::cerr << "train_bench: built for ISA extensions this CPU lacks; rebuild here\n";
    return 1;
  }
  const bool torch = !o.no_torch;
  if (torch && o.python.empty()) o.python = ::bench::ensure_torch_venv(o.venv);
  r.opt = o;

  omp_set_num_threads(o.threads);
  r.model = load_model(o.model_name);
  std::optional<TrainConfig> cfg = train_config(o, r.model);
  if (!cfg) return 1;
  r.load_start = load_1m();
  // Before anything else runs: after ETH's steps its OpenMP threads (and PyTorch's, in the
  // server) spin on the cores a while, and the probe's two threads read one core's rate.
  r.peak = ::bench::measure_arithmetic_peak(o.threads);
  // PyTorch first: its set-up and warm-up run alone, then its steps alternate with ETH's.
  std::unique_ptr<::bench::TorchServer> ts;
  bool torch_ok = false;
  if (torch && !o.python.empty()) {
    ts = std::make_unique<::bench::TorchServer>();
    torch_ok = ts->start(torch_command(o.python, r.model, o.batch, o.seq, o.threads, o.warmup));
  }
  const auto t_setup = std::chrono::steady_clock::now();
  cfg->precision = Precision::Bf16;
  Trainer bf16(*cfg);
  cfg->precision = Precision::Fp32;
  Trainer fp32(*cfg);
  r.setup_s = seconds_since(t_setup);
  for (int i = 0; i < o.warmup; ++i) {
    bf16.step();
    fp32.step();
  }
  r.rss = peak_rss_bytes();  // both trainers, after steps that held everything
  std::unique_ptr<GemmBench> gemm;
  if (o.gemm_baseline) {
    gemm = std::make_unique<GemmBench>(step_gemms(r.model, o.batch * o.seq));
    gemm->sequence_s();  // warm-up: oneDNN's kernels generated, operands in place
    r.gemm = true;
    r.gemm_flops = gemm->flops();
  }
  measure_rounds(r, bf16, fp32, ts.get(), torch_ok, gemm.get());
  if (ts) r.torch_result = ts->finish();
  if (torch && !r.torch_result.contains("torch")) {
    r.torch_result =
        ts ? ts->error_json() : nlohmann::json{{"error", "no PyTorch (see the log)"}};
  }
  r.act16 = static_cast<double>(bf16.compute().arena_bytes_total());
  r.act32 = static_cast<double>(fp32.compute().arena_bytes_total());
  r.held16 = static_cast<double>(bf16.compute().held_bytes_per_slot());
  r.held32 = static_cast<double>(fp32.compute().held_bytes_per_slot());
  r.state16 = static_cast<double>(bf16.state().state_bytes());
  r.state32 = static_cast<double>(fp32.state().state_bytes());
  if (o.json) {
    print_cpu_json(r);
  } else {
    print_cpu_text(r);
  }
  return 0;
}

}  // namespace eth::bench
