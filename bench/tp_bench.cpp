// Tensor parallelism inside a stage, measured: a stage holding the whole bench-4x256 model at
// tp 2 and at tp 4 trains a few steps under mpirun (one MPI rank per tp rank, the runtime's own
// DistributedTrainer); per step, each rank's time inside the tp all-reduces and the bytes it fed
// them are printed beside the predictor's tp communication term for the same stage (the
// analytic profile's all-reduce terms, profile/analytic.cpp: 2 (t-1)/t x bytes / link per
// all-reduce, over the `cpu` device type's link, in the fp32 the runtime moves). The time inside
// training includes waiting for the slowest rank of the group (on a shared 2-core machine, for a
// core); the same all-reduces of one step run alone after a barrier ("alone") are the transfer
// the predictor prices. At tp 4 four ranks share 2 cores.
//
// Usage: tp_bench [--steps N]. The machine is shared: the CPU model and load average are printed
// beside the figures; compare rows of one run, not runs.
#include <omp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_util.h"
#include "cluster/cluster_spec.h"
#include "comm/mpi/mpi_comm.h"
#include "launch/mpirun.h"
#include "core/json_cursor.h"
#include "data/token_file.h"
#include "data/tokenize.h"
#include "profile/analytic.h"
#include "runtime/dist_trainer.h"

namespace {

using namespace eth;
namespace fs = std::filesystem;

// 4 blocks of hidden 256 (8 heads, ffn 1024) over sequences of 128, vocabulary 2048.
ModelSpec bench_model() { return ModelSpec{"bench-4x256", 4, 256, 8, 128, 2048, 1024}; }
constexpr std::int64_t kMicroBatch = 2, kLocalBatch = 4;  // 2 micro-batches per step

// One pipeline, one stage of every unit on devices 0..tp-1.
Plan tp_plan(std::int64_t tp) {
  Plan p;
  p.model = bench_model();
  p.model_is_preset = false;
  p.seq_len = p.model.seq_len;
  p.gbs = kLocalBatch;
  PipelinePlan pp;
  pp.micro_batch_size = kMicroBatch;
  pp.local_batch = kLocalBatch;
  StagePlan st;
  st.device_type = "cpu";
  st.tp = tp;
  for (std::int64_t d = 0; d < tp; ++d) st.devices.push_back(d);
  st.first_unit = 0;
  st.last_unit = p.model.num_units() - 1;
  pp.stages.push_back(st);
  p.pipelines.push_back(pp);
  return p;
}

// The predictor's tp all-reduces of one step of that stage: per micro-batch of b samples
// (N = b T tokens, fp32), the embedding's forward lookup (N C), per block two forward and two
// backward (N C each), the head's loss statistics forward (3 N) and input gradient backward
// (N C): the terms of profile/analytic.cpp, each priced by analytic_allreduce_ms.
struct Predicted {
  double ms = 0, bytes = 0;
  std::int64_t collectives = 0;
};
Predicted predicted(const ModelSpec& m, std::int64_t tp, const DeviceType& d) {
  Predicted p;
  const double N = static_cast<double>(kMicroBatch * m.seq_len);
  const double C = static_cast<double>(m.hidden);
  auto add = [&](double bytes, std::int64_t count) {
    p.ms += static_cast<double>(count) * analytic_allreduce_ms(d, tp, bytes);
    p.bytes += static_cast<double>(count) * bytes;
    p.collectives += count;
  };
  const std::int64_t mbs = kLocalBatch / kMicroBatch;
  add(4 * N * C, mbs);                 // embedding forward
  add(4 * N * C, 4 * m.layers * mbs);  // blocks: 2 forward + 2 backward
  add(4 * N, mbs);                     // head forward: the row maxima
  add(4 * 2 * N, mbs);                 // head forward: sums of exp and target logits
  add(4 * N * C, mbs);                 // head backward
  return p;
}

// Worker (one MPI rank): trains `steps` steps of tp_plan(world size) and, on rank 0, prints one
// JSON line with each rank's mean per-step tp figures (the first step left out).
int worker(int steps) {
  MpiSession mpi;
  Communicator world = mpi.world();
  omp_set_num_threads(1);
  const Plan plan = tp_plan(world.size());
  const fs::path dir = fs::temp_directory_path() / ("eth_tp_bench_" + std::to_string(::getppid()));
  const fs::path data = dir / "data.bin";
  if (world.rank() == 0) {
    fs::create_directories(dir);
    SyntheticSpec s;
    s.num_tokens = 200000;
    s.vocab = plan.model.vocab;
    write_token_file(data, synthetic_tokens(s));
  }
  world.barrier();
  DistTrainConfig c;
  c.plan = plan;
  c.train.model = plan.model;
  c.train.data = data;
  c.train.steps = steps;
  c.train.global_batch = plan.gbs;
  c.train.seq_len = plan.seq_len;
  DistributedTrainer t(c, world);
  double seconds = 0, bytes = 0, collectives = 0, step_s = 0, compute_s = 0;
  for (int i = 0; i < steps; ++i) {
    t.step();
    if (i == 0) continue;
    seconds += t.last_tp_stats().seconds;
    bytes += t.last_tp_stats().bytes;
    collectives += static_cast<double>(t.last_tp_stats().collectives);
    step_s += t.last_times().step_s;
    compute_s += t.last_times().compute_s;
  }
  const double n = std::max(1, steps - 1);
  // The step's all-reduces alone (the sizes the tp group issued: predicted() lists them), best of
  // 5 after a barrier each.
  const std::int64_t N = kMicroBatch * plan.model.seq_len, C = plan.model.hidden;
  const std::int64_t mbs = kLocalBatch / kMicroBatch;
  std::vector<float> big(static_cast<std::size_t>(N * C), 1.0f);
  std::vector<float> small(static_cast<std::size_t>(2 * N), 1.0f);
  double alone = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    world.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    const Communicator& tp = t.tp_group()->comm();
    for (std::int64_t k = 0; k < mbs * (2 + 4 * plan.model.layers); ++k) tp.allreduce_sum(big);
    for (std::int64_t k = 0; k < mbs; ++k) {
      tp.allreduce_max(std::span<float>(small.data(), static_cast<std::size_t>(N)));
      tp.allreduce_sum(small);
    }
    alone = std::min(alone,
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  const std::vector<double> mine{seconds / n, bytes / n,     collectives / n,
                                 step_s / n,  compute_s / n, alone};
  const std::vector<double> all = world.gather(mine);
  if (world.rank() == 0) {
    Json ranks = Json::array();
    for (std::size_t r = 0; r + 6 <= all.size(); r += 6) {
      ranks.push_back(Json{{"tp_s", all[r]},
                           {"bytes", all[r + 1]},
                           {"collectives", all[r + 2]},
                           {"step_s", all[r + 3]},
                           {"compute_s", all[r + 4]},
                           {"alone_s", all[r + 5]}});
    }
    std::cout << Json{{"tp", world.size()}, {"ranks", ranks}}.dump() << std::endl;
    fs::remove_all(dir);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 2 && args[0] == "--worker") return worker(std::stoi(args[1]));
  int steps = 6;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--steps" && i + 1 < args.size()) {
      steps = std::max(2, std::stoi(args[++i]));
    } else {
      std::cerr << "usage: tp_bench [--steps N]\n";
      return 1;
    }
  }
  const ModelSpec m = bench_model();
  const DeviceType cpu = *find_device_type_preset("cpu");
  std::printf(
      "== tp communication of a whole-model stage (%s, %lld micro-batches of %lld x %lld "
      "tokens per step, fp32), mean per step over %d steps (first left out)\n",
      m.name.c_str(), static_cast<long long>(kLocalBatch / kMicroBatch),
      static_cast<long long>(kMicroBatch), static_cast<long long>(m.seq_len), steps);
  std::printf("%s, 1 OpenMP thread per rank\n", bench::machine_line(bench::machine_info()).c_str());
  std::printf("predicted: the analytic all-reduce terms over the cpu type's link (%.1f Gbit/s)\n\n",
              cpu.intra_node_bandwidth_gbps);
  std::printf("%3s %5s %14s %10s %10s %10s %10s %12s %11s %9s\n", "tp", "rank", "in training ms",
              "alone ms", "pred ms", "MB/step", "pred MB", "collectives", "pred coll.", "step ms");
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  for (int tp : {2, 4}) {
    MpirunOptions o;
    o.num_ranks = tp;
    o.as_root = running_as_root();
    std::string cmd;
    for (const auto& a : mpirun_argv(o, {self, "--worker", std::to_string(steps)})) {
      cmd += (cmd.empty() ? "" : " ") + a;
    }
    std::string out;
    const int code = bench::run_capture(cmd, &out);
    const auto at = out.find('{');
    if (code != 0 || at == std::string::npos) {
      std::printf("%3d  (mpirun failed with exit code %d)\n", tp, code);
      continue;
    }
    const Json j = Json::parse(out.substr(at, out.find('\n', at) - at));
    const Predicted p = predicted(m, tp, cpu);
    int r = 0;
    for (const Json& rank : j["ranks"]) {
      std::printf("%3d %5d %14.2f %10.2f %10.2f %10.2f %10.2f %12.0f %11lld %9.1f\n", tp, r++,
                  rank["tp_s"].get<double>() * 1e3, rank["alone_s"].get<double>() * 1e3, p.ms,
                  rank["bytes"].get<double>() / 1e6, p.bytes / 1e6,
                  rank["collectives"].get<double>(), static_cast<long long>(p.collectives),
                  rank["step_s"].get<double>() * 1e3);
    }
  }
  std::printf("\nat the end: %s\n", bench::machine_line(bench::machine_info()).c_str());
  return 0;
}
