// The distributed runtime, measured: (1) one gradient aggregation in each mode (block, tensor,
// device) on 4 and 8 MPI ranks, for an asymmetric plan and a plan of pipelines of different tp,
// each rank's gradients laid out as the trainer lays them out (in place: bytes copied beside the
// time) and the predictor's aggregation term beside the measured time; (2) on an emulated heterogeneous cluster (2 fast + 2 slow CPU ranks, the slow
// ones 3x slower), the measured iteration time of the eth, layer and uniform plans, each
// beside the predictor's figure for the same plan and the measured cpu profile (their ratio is
// the predictor's error; target within 15%).
//
// Usage: runtime_bench [--quick] [--steps N] [--format json] [--aggregation] (json: section (1)
// only, as one JSON document, for scripts/evaluate.sh; --aggregation: section (1) only, as a
// table; --quick: 4 ranks only there). It starts its own
// mpirun jobs (comm/mpirun.h) and `eth launch`; the machine is shared and noisy, so compare
// rows of one run, not runs.
#include <omp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "comm/mpi_comm.h"
#include "comm/mpirun.h"
#include "core/json_cursor.h"
#include "cost/blocks.h"
#include "cost/predictor.h"
#include "data/token_file.h"
#include "data/tokenize.h"
#include "profile/emulated.h"
#include "profile/profile_io.h"
#include "bench_json.h"
#include "runtime/grad_layout.h"
#include "runtime/grad_sync.h"
#include "runtime/placement.h"
#include "search/planner.h"
#include "train/measure_profile.h"

namespace {

using namespace eth;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// 12 blocks of hidden 256: 9.6 M parameters, 38 MB of fp32 gradients on a whole-model holder.
ModelSpec aggregation_model() { return ModelSpec{"bench-12x256", 12, 256, 4, 128, 2048, 1024}; }

// Stages of an aggregation plan: (first unit, last unit, tp).
struct BenchStage {
  int first, last, tp;
};

Plan make_plan(const std::vector<std::vector<BenchStage>>& pipes) {
  Plan p;
  p.model = aggregation_model();
  p.model_is_preset = false;
  p.seq_len = 128;
  std::int64_t dev = 0;
  for (const auto& pipe : pipes) {
    PipelinePlan pp;
    pp.micro_batch_size = 1;
    pp.local_batch = 1;
    for (const BenchStage& b : pipe) {
      StagePlan st;
      st.device_type = "cpu";
      st.tp = b.tp;
      for (int t = 0; t < b.tp; ++t) st.devices.push_back(dev++);
      st.first_unit = b.first;
      st.last_unit = b.last;
      pp.stages.push_back(st);
    }
    p.pipelines.push_back(pp);
  }
  p.gbs = static_cast<std::int64_t>(pipes.size());
  return p;
}

// Pipelines that cut the 14 units in different places (DESIGN.md section 5's case).
Plan asymmetric_plan(int ranks) {
  if (ranks == 4) return make_plan({{{0, 6, 1}, {7, 13, 1}}, {{0, 3, 1}, {4, 13, 1}}});
  return make_plan({{{0, 3, 1}, {4, 7, 1}, {8, 10, 1}, {11, 13, 1}},
                    {{0, 5, 1}, {6, 13, 1}},
                    {{0, 8, 1}, {9, 13, 1}}});
}

// Pipelines of different tp: lcm(tp) > tp on some ranks, whose gradients are cut into chunks
// of different blocks. 4 ranks: a tp 2 stage of every unit beside two tp 1 stages; 8 ranks: two
// tp 2 stages beside one tp 4 stage.
Plan tp_plan(int ranks) {
  if (ranks == 4) return make_plan({{{0, 13, 2}}, {{0, 6, 1}, {7, 13, 1}}});
  return make_plan({{{0, 5, 2}, {6, 13, 2}}, {{0, 13, 4}}});
}

Plan aggregation_plan(const std::string& kind, int ranks) {
  return kind == "tp" ? tp_plan(ranks) : asymmetric_plan(ranks);
}

// One node of `ranks` `cpu` devices: the link the predictor prices MPI over shared memory with.
ClusterSpec aggregation_cluster(int ranks) {
  ClusterSpec c;
  c.name = "cpu-" + std::to_string(ranks);
  c.nodes.push_back(NodeSpec{"cpu", ranks});
  c.device_types.emplace("cpu", *find_device_type_preset("cpu"));
  return c;
}

int run_command(const std::string& cmd, std::string* out) {
  const fs::path tmp = fs::temp_directory_path() / ("eth_bench_" + std::to_string(::getpid()));
  const int status = std::system((cmd + " >" + tmp.string()).c_str());
  std::ifstream in(tmp);
  std::stringstream ss;
  ss << in.rdbuf();
  if (out) *out = ss.str();
  fs::remove(tmp);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string join(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

// Worker: every rank lays out its gradients as the trainer does for each mode (plan_layout) and
// times start() + finish() of that mode; rank 0 prints one JSON line per mode (ms: the median
// over `reps` timed repetitions of the slowest rank, warm-ups left out) with the bytes copied
// outside the collectives (the most any rank copies) and the predictor's aggregation term.
int aggregation_worker(const std::string& kind, int ranks, int reps) {
  MpiSession mpi;
  CommOptions co;
  if (const char* c = std::getenv("ETH_CHUNK")) co.chunk_bytes = std::stoul(c);
  Communicator world = mpi.world(co);
  omp_set_num_threads(1);
  const Plan plan = aggregation_plan(kind, ranks);
  ETH_CHECK(world.size() == plan.num_devices(), "rank count");
  const RankPlace place = place_ranks(plan)[static_cast<std::size_t>(world.rank())];
  const StagePlan& st = plan.pipelines[static_cast<std::size_t>(place.pipeline)]
                            .stages[static_cast<std::size_t>(place.stage)];
  const Communicator tp_comm = world.split(
      st.tp > 1 ? static_cast<int>(stage_device(st, place.dp_rank, 0)) : -1,
      static_cast<int>(place.tp_rank));
  const ClusterSpec cluster = aggregation_cluster(ranks);
  PredictOptions po;
  po.element_bytes = sizeof(float);
  for (AggregationMode mode : {AggregationMode::Block, AggregationMode::Tensor,
                               AggregationMode::Device}) {
    const ParamLayout layout = plan_layout(plan, place.device, mode);
    std::vector<float> grads(static_cast<std::size_t>(layout.grad_numel()), 1.0f);
    GradSync sync(plan, mode, world, layout, tp_comm);
    std::vector<double> times;
    const int warmup = 2;
    for (int rep = 0; rep < warmup + reps; ++rep) {
      std::fill(grads.begin(), grads.end(), 1.0f);
      world.barrier();
      const auto t0 = Clock::now();
      sync.start(grads.data());
      sync.finish(grads.data());
      std::vector<double> mine{std::chrono::duration<double>(Clock::now() - t0).count()};
      std::vector<double> all = world.gather(mine);
      if (rep >= warmup && world.rank() == 0) {
        times.push_back(*std::max_element(all.begin(), all.end()));
      }
    }
    const std::vector<double> copied = world.gather(std::vector<double>{sync.bytes_copied()});
    const AggregationStats stats =
        aggregation_stats(aggregation_collectives(plan, mode), sizeof(float));
    if (world.rank() == 0) {
      std::sort(times.begin(), times.end());
      std::cout << Json{{"plan", kind},
                        {"ranks", ranks},
                        {"mode", aggregation_mode_name(mode)},
                        {"ms", times[times.size() / 2]* 1e3},
                        {"ms_min", times.front() * 1e3},
                        {"ms_max", times.back() * 1e3},
                        {"reps", times.size()},
                        {"predicted_ms", predict_aggregation(plan, cluster, mode, po).end_ms},
                        {"copied_bytes_max", *std::max_element(copied.begin(), copied.end())},
                        {"bytes_per_rank_max", stats.bytes_per_device_max},
                        {"collectives", stats.collectives},
                        {"communicators", stats.communicators}}
                       .dump()
                << std::endl;
    }
  }
  return 0;
}

// json: collect the rows into `*json` instead of printing the table: "aggregation" for the
// asymmetric plan (the rows scripts/evaluate.sh reads), "aggregation_tp" for the tp plan.
void aggregation_section(const std::string& self, Json* json, bool quick) {
  const int reps = quick ? 5 : 21;
  if (json) {
    (*json)["aggregation"] = Json::array();
    (*json)["aggregation_tp"] = Json::array();
  } else {
    std::printf("== gradient aggregation, one step's (%s, %.1f M parameters, fp32, in MPI over "
                "shared memory), median of %d repetitions of the slowest rank\n   %s\n",
                aggregation_model().name.c_str(),
                static_cast<double>(total_params(aggregation_model())) / 1e6, reps,
                bench::machine_line(bench::machine_info()).c_str());
    std::printf("%-10s %5s %-7s %9s %9s %9s %9s %10s %11s %6s %6s %9s\n", "plan", "ranks",
                "mode", "ms", "min ms", "pred ms", "pred/ms", "MB/rank", "copied MB", "coll.",
                "comms", "vs block");
  }
  for (const std::string kind : {"asymmetric", "tp"}) {
    for (int ranks : quick ? std::vector<int>{4} : std::vector<int>{4, 8}) {
      MpirunOptions o;
      o.num_ranks = ranks;
      o.as_root = running_as_root();
      std::string out;
      const int code = run_command(
          join(mpirun_argv(o, {self, "--worker-aggregation", kind, std::to_string(ranks),
                               std::to_string(reps)})),
          &out);
      if (code != 0) {
        std::printf("%-10s %5d  (mpirun failed with exit code %d)\n", kind.c_str(), ranks, code);
        continue;
      }
      std::istringstream lines(out);
      double block_ms = 0;
      for (std::string line; std::getline(lines, line);) {
        if (line.empty() || line[0] != '{') continue;
        const Json j = Json::parse(line);
        if (json) {
          (*json)[kind == "tp" ? "aggregation_tp" : "aggregation"].push_back(j);
          continue;
        }
        const double ms = j["ms"];
        if (j["mode"] == "block") block_ms = ms;
        std::printf("%-10s %5d %-7s %9.2f %9.2f %9.2f %9.2f %10.2f %11.2f %6lld %6lld %8.2fx\n",
                    kind.c_str(), ranks, j["mode"].get<std::string>().c_str(), ms,
                    j["ms_min"].get<double>(), j["predicted_ms"].get<double>(),
                    j["predicted_ms"].get<double>() / ms,
                    j["bytes_per_rank_max"].get<double>() / 1e6,
                    j["copied_bytes_max"].get<double>() / 1e6,
                    static_cast<long long>(j["collectives"].get<std::int64_t>()),
                    static_cast<long long>(j["communicators"].get<std::int64_t>()),
                    block_ms > 0 ? ms / block_ms : 1.0);
      }
    }
  }
  if (!json) {
    std::printf("   (copied: bytes a rank copies or fills outside the collectives per step; "
                "device-wise zero-fills its padding)\n   at the end: %s\n",
                bench::machine_line(bench::machine_info()).c_str());
  }
}

// 4 blocks of hidden 256 over sequences of 128: a forward of 4 samples is ~0.4 GFLOP per block,
// long enough that compute, not message latency, dominates on 2 cores.
ModelSpec emulated_model() { return ModelSpec{"bench-4x256", 4, 256, 4, 128, 512, 1024}; }

void emulated_section(const std::string& eth_binary, int steps, bool quick) {
  const fs::path dir = fs::temp_directory_path() / ("eth_runtime_bench_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const ModelSpec model = emulated_model();
  const ClusterSpec cluster = load_cluster("cpu-emulated");
  const std::int64_t gbs = 16, seq = model.seq_len;
  std::printf("\n== emulated heterogeneous cluster: 2 x cpu-fast + 2 x cpu-slow (EMULATED: every op "
              "stretched 4x on fast, 12x on slow ranks), %s, gbs %lld, seq %lld\n",
              model.name.c_str(), static_cast<long long>(gbs), static_cast<long long>(seq));
  // The measured cpu profile, on one thread (each rank runs one), scaled to the emulated types.
  omp_set_num_threads(1);
  ProfileDb measured(model);
  const std::vector<std::int64_t> sizes = quick ? std::vector<std::int64_t>{1, 4}
                                                : std::vector<std::int64_t>{1, 2, 4, 8};
  for (std::int64_t m : sizes) {
    MeasureOptions mo;
    mo.model = model;
    mo.micro_batch = m;
    mo.seq_len = seq;
    mo.repeats = quick ? 1 : 3;
    mo.recompute_times = false;
    measured.add(measure_profile(mo));
    std::fprintf(stderr, "measured cpu profile at micro-batch %lld\n", static_cast<long long>(m));
  }
  write_profile_dir(measured, dir / "profile");
  const ProfileDb profile = emulated_profile(measured, cluster);
  {
    std::ofstream(dir / "cluster.json") << cluster_to_json(cluster).dump(1);
    SyntheticSpec s;
    s.num_tokens = 200000;
    s.vocab = model.vocab;
    write_token_file(dir / "data.bin", synthetic_tokens(s));
  }
  PlannerOptions po;
  po.tp = {1};
  po.micro_batch_sizes = sizes;
  std::printf("%-8s %-44s %12s %12s %10s\n", "method", "plan", "predicted ms", "measured ms",
              "pred/meas");
  double measured_ms[3] = {0, 0, 0}, predicted_ms[3] = {0, 0, 0};
  int i = 0;
  for (PlanMethod m : {PlanMethod::Eth, PlanMethod::Layer, PlanMethod::Uniform}) {
    const PlannerResult r = plan_training(m, model, cluster, profile, gbs, seq, po);
    const fs::path plan_file = dir / (std::string(plan_method_name(m)) + ".json");
    Plan plan = r.plan;
    plan.cluster = cluster;
    save_plan(plan, plan_file.string());
    std::string shape;
    for (const auto& pp : plan.pipelines) {
      shape += (shape.empty() ? "" : "; ") + std::to_string(pp.micro_batch_size) + "/" +
               std::to_string(pp.local_batch) + ":";
      for (const auto& st : pp.stages) {
        shape += " " + st.device_type.substr(4) + "[" + std::to_string(st.first_unit) + "-" +
                 std::to_string(st.last_unit) + "]";
      }
    }
    std::string out;
    const std::string cmd = eth_binary + " launch --plan " + plan_file.string() +
                            " -- --data " + (dir / "data.bin").string() + " --steps " +
                            std::to_string(steps) + " --profile " + (dir / "profile").string() +
                            " --print-every 0 --format json --threads 1 2>/dev/null";
    if (run_command(cmd, &out) != 0) {
      std::printf("%-8s (run failed: %s)\n", std::string(plan_method_name(m)).c_str(), cmd.c_str());
      ++i;
      continue;
    }
    const Json j = Json::parse(out.substr(out.find('{')));
    measured_ms[i] = j["measured_iteration_ms"];
    predicted_ms[i] = j["predicted_iteration_ms"];
    std::printf("%-8s %-44s %12.1f %12.1f %9.2f\n", std::string(plan_method_name(m)).c_str(),
                shape.substr(0, 44).c_str(), predicted_ms[i], measured_ms[i],
                predicted_ms[i] / measured_ms[i]);
    ++i;
  }
  if (measured_ms[0] > 0) {
    std::printf("eth speedup, measured: %.2fx over layer, %.2fx over uniform; predicted: %.2fx "
                "over layer, %.2fx over uniform\n",
                measured_ms[1] / measured_ms[0], measured_ms[2] / measured_ms[0],
                predicted_ms[1] / predicted_ms[0], predicted_ms[2] / predicted_ms[0]);
  }
  if (!std::getenv("ETH_BENCH_KEEP")) fs::remove_all(dir);
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 4 && args[0] == "--worker-aggregation") {
    return aggregation_worker(args[1], std::stoi(args[2]), std::stoi(args[3]));
  }
  bool quick = false, json = false, aggregation_only = false;
  int steps = 10;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--quick") {
      quick = true;
      steps = 3;
    } else if (args[i] == "--aggregation") {
      aggregation_only = true;
    } else if (args[i] == "--steps" && i + 1 < args.size()) {
      steps = std::stoi(args[++i]);
    } else if (args[i] == "--format" && i + 1 < args.size() && args[i + 1] == "json") {
      json = true;  // the aggregation section only, as JSON (scripts/evaluate.sh)
      ++i;
    } else {
      std::cerr << "usage: runtime_bench [--quick] [--steps N] [--format json] [--aggregation]\n";
      return 1;
    }
  }
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  if (json) {
    Json doc{{"bench", "runtime_bench"}};
    aggregation_section(self, &doc, quick);
    std::cout << doc.dump(1) << std::endl;
    return 0;
  }
  aggregation_section(self, nullptr, quick);
  if (aggregation_only) return 0;
  emulated_section(ETH_BINARY_PATH, steps, quick);
  return 0;
}
