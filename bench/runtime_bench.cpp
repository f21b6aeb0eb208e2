// The distributed runtime, measured, and the predictor held to it.
//
// (1) aggregation: one gradient aggregation in each mode (block, tensor, device) on 4 and 8 MPI
//     ranks, for an asymmetric plan (pipelines cut in different places) and a tp plan
//     (pipelines of different tp, so lcm(tp) chunks), each rank's gradients laid out as the
//     trainer lays them out (runtime/grad_layout.h); beside the time: the bytes a rank copies
//     outside the collectives (block-wise: zero), bytes fed, collectives issued, the most bytes
//     of pieces a rank had in flight (the window, docs/comm.md) and the predictor's aggregation
//     term (predict_aggregation; target: within 15% of measured), once with the `cpu` preset's
//     link figures and once with those a link probe (bench/link_probe.h) measured in the same
//     launch, each over that launch's median. The modes and the probe take turns within each
//     repetition, and each configuration runs in 3 launches (1 with --quick).
// (2) emulated: the eth, layer and uniform plans of bench-4x256 on `cpu-emulated` (2 fast + 2
//     slow CPU ranks, EMULATED: every op lasts the profile's time for its device type, 4x / 12x
//     the cpu profile's; --emulate-from cpu-time: 4x / 12x its CPU time in the run), each
//     trained --runs times in a row
//     (the runs interleaved: run 1 of each plan, then run 2, ...), every run's measured
//     iteration beside the predictor's for the same plan and profile; then the eth-over-layer
//     speedup, measured against predicted. Targets (issue #12): predicted / measured within
//     0.90-1.10 in every run, measured speedup within 10% of the predicted one.
// (3) cpu-2: a real (not emulated) 2-rank plan of the same model on this 2-core machine, one
//     core and one thread per rank (--pin), with the same profile (one thread, thread CPU time,
//     caches cold: the run's conditions); --runs runs and their median. Target: predicted /
//     measured within 0.95-1.05.
// Everything but (1) goes through the built `eth` tool, as a user would run it (profile, plan,
// launch).
//
// Output: the machine line (CPU model, cores, load), then per section one row per measurement,
// each text row starting with its section tag; with --format json one document with the same
// rows: {"bench", "machine", "aggregation": [...], "emulated": {...}, "cpu2": {...}}.
//   aggregation[]: plan ranks mode ms (median over launches) ms_launches ms_min ms_max reps
//                  launches predicted_ms copied_bytes_max in_flight_bytes_max
//                  bytes_per_rank_max collectives communicators vs_block vs_block_launches
//                  idle_before_min predicted_measured_ms (first launch) pred_over_ms
//                  pred_measured_over_ms pred_measured_over_ms_launches link_shared_gbps
//                  link_gbps link_piece_latency_ms (first launch) and link_*_launches
//                  (every launch's) pieces (MPI collectives the runtime posts, all ranks)
//   emulated.runs[]: run method predicted_ms measured_ms ratio load_1m  (ratio = pred / meas)
//   emulated.speedups[]: run measured predicted error   (eth over layer; error relative)
//   cpu2.runs[]: run predicted_ms measured_ms ratio load_1m
//   <section>.summary[]: what min median max target_lo target_hi in_target
// load_1m is the 1-minute load average read just before the run; the machine is shared, so
// measure when it is below ~0.5 and compare rows of one run, not runs.
//
// Usage: runtime_bench [--quick] [--steps N] [--runs N] [--only aggregation|emulated|cpu2]
//                      [--emulate-from auto|profile|cpu-time]
//                      [--format json]
// --format json without --only runs the aggregation section only (scripts/evaluate.sh reads
// it); --quick: 4 ranks only there, 2 runs of 4 steps in the others.
#include <malloc.h>
#include <omp.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_json.h"
#include "bench_util.h"
#include "link_probe.h"
#include "comm/mpi_comm.h"
#include "launch/mpirun.h"
#include "core/json_cursor.h"
#include "cost/blocks.h"
#include "cost/predictor.h"
#include "model/model_spec.h"
#include "runtime/grad_layout.h"
#include "runtime/grad_sync.h"
#include "runtime/placement.h"

namespace {

using namespace eth;
using bench::run_capture;
using bench::median;
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

// `values` printed with `format` (one double), comma-separated.
std::string comma_list(const std::vector<double>& values, const char* format) {
  std::string out;
  for (double v : values) {
    char b[32];
    std::snprintf(b, sizeof b, format, v);
    out += (out.empty() ? "" : ",") + std::string(b);
  }
  return out;
}

std::string join(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

double load1() {
  std::ifstream in("/proc/loadavg");
  double l = -1;
  in >> l;
  return l;
}

// The share of the CPUs' time idle over the next `seconds` (/proc/stat): other jobs on this
// shared machine show up here, where the load average also counts this bench's own ranks.
double idle_share(double seconds) {
  auto sample = [] {
    std::ifstream in("/proc/stat");
    std::string cpu;
    in >> cpu;
    std::vector<double> t;
    for (double v; t.size() < 8 && in >> v;) t.push_back(v);
    double total = 0;
    for (double v : t) total += v;
    return std::pair<double, double>{t.size() > 3 ? t[3] : 0.0, total};
  };
  const auto [idle0, total0] = sample();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const auto [idle1, total1] = sample();
  return total1 > total0 ? (idle1 - idle0) / (total1 - total0) : 0.0;
}

// A summary row: min, median and max of `v`, printed unless `json`, and whether they meet the
// target: every run inside [lo, hi], or with `median_only` the median (the cpu-2 target is on
// the median of its runs, the emulated ones on each run).
Json summary(const std::string& section, const std::string& what, const std::vector<double>& v,
             double lo, double hi, bool json, bool median_only = false) {
  if (v.empty()) return Json();
  const auto [mn, mx] = std::minmax_element(v.begin(), v.end());
  const double med = median(v);
  const bool in = median_only ? med >= lo && med <= hi : *mn >= lo && *mx <= hi;
  if (!json) {
    std::printf("summary   %-9s %-22s min=%.3f median=%.3f max=%.3f target=%.2f-%.2f in_target=%s\n",
                section.c_str(), what.c_str(), *mn, med, *mx, lo, hi, in ? "yes" : "no");
  }
  return Json{{"what", what}, {"min", *mn},     {"median", med}, {"max", *mx},
              {"target_lo", lo}, {"target_hi", hi}, {"in_target", in}};
}

// Worker: every rank lays out its gradients as the trainer does for each mode (plan_layout) and
// times start() + finish() of that mode; rank 0 prints one JSON line per mode (ms: the median
// over `reps` timed repetitions of the slowest rank, warm-ups left out) with the bytes copied
// outside the collectives (the most any rank copies) and the predictor's aggregation term.
int aggregation_worker(const std::string& kind, int ranks, int reps) {
  MpiSession mpi;
  CommOptions co;
  // The piece size of the collectives (bytes; default the communicator's 512 KiB), to measure
  // its effect: ETH_BENCH_CHUNK=1048576 runtime_bench --only aggregation.
  if (const char* c = std::getenv("ETH_BENCH_CHUNK")) co.chunk_bytes = std::stoul(c);
  // The bytes of pieces in flight at once (default the communicator's window_bytes).
  if (const char* w = std::getenv("ETH_BENCH_WINDOW")) co.window_bytes = std::stoul(w);
  // glibc's fixed default thresholds instead of the session's (MpiSession keeps freed memory
  // resident): ETH_BENCH_MALLOC_DEFAULTS=1 shows what the per-step page faults cost.
  if (std::getenv("ETH_BENCH_MALLOC_DEFAULTS")) {
    mallopt(M_MMAP_THRESHOLD, 128 << 10);
    mallopt(M_TRIM_THRESHOLD, 128 << 10);
  }
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
  const ClusterIndex index(cluster);
  PredictOptions po;
  po.precision = Precision::Fp32;  // the gradients are fp32 in both runtime precisions
  po.collective_chunk_bytes = static_cast<double>(co.chunk_bytes);  // ETH_BENCH_CHUNK's pieces
  // ETH_BENCH_MODES=tensor,block: only those modes, in that order within each repetition
  // (experiments; the table wants all three).
  const char* only_modes = std::getenv("ETH_BENCH_MODES");
  struct ModeRun {
    AggregationMode mode;
    std::vector<float> grads;
    std::unique_ptr<GradSync> sync;
    std::vector<double> times;  // rank 0: the slowest rank's time of each timed repetition
    long faults = 0;            // minor page faults inside the timed start() + finish()
  };
  // In the order ETH_BENCH_MODES lists them (default block, tensor, device).
  std::vector<AggregationMode> order{AggregationMode::Block, AggregationMode::Tensor,
                                     AggregationMode::Device};
  if (only_modes) {
    const std::string list = only_modes;
    std::sort(order.begin(), order.end(), [&](AggregationMode a, AggregationMode b) {
      return list.find(aggregation_mode_name(a)) < list.find(aggregation_mode_name(b));
    });
  }
  std::vector<ModeRun> runs;
  for (AggregationMode mode : order) {
    if (only_modes &&
        std::string(only_modes).find(aggregation_mode_name(mode)) == std::string::npos) {
      continue;
    }
    const ParamLayout layout = plan_layout(plan, place.device, mode);
    ModeRun& r = runs.emplace_back();
    r.mode = mode;
    r.grads.assign(static_cast<std::size_t>(layout.grad_numel()), 1.0f);
    r.sync = std::make_unique<GradSync>(plan, mode, world, layout, tp_comm);
  }
  auto minflt = [] {
    rusage ru{};
    ::getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
  };
  // The modes take turns within each repetition, so a burst of load from another job on this
  // shared machine lands on all of them rather than on whichever ran its repetitions then; the
  // link probe takes its turn after them, so its figures are this launch's.
  bench::LinkProbe probe(world);
  bench::LinkSamples link;
  const int warmup = 2;
  for (int rep = 0; rep < warmup + reps; ++rep) {
    if (rep >= warmup) probe.sample(link);
    for (ModeRun& r : runs) {
      std::fill(r.grads.begin(), r.grads.end(), 1.0f);
      world.barrier();
      const long f0 = minflt();
      const auto t0 = Clock::now();
      r.sync->start(r.grads.data());
      r.sync->finish(r.grads.data());
      std::vector<double> mine{std::chrono::duration<double>(Clock::now() - t0).count()};
      if (rep >= warmup) r.faults += minflt() - f0;
      std::vector<double> all = world.gather(mine);
      if (rep >= warmup && world.rank() == 0) {
        r.times.push_back(*std::max_element(all.begin(), all.end()));
      }
      // The gather lets a rank that is done go on before the others are (it only sends), and
      // the next mode's fill (42 MB a rank before device-wise) then took the cores from the
      // ranks still aggregating: 8 ranks, asymmetric plan, block-wise 34-36 ms right before
      // device-wise against 25-27 right after it or before tensor-wise. No rank starts the
      // next fill before every rank is done.
      world.barrier();
    }
  }
  // The predictor's term with the `cpu` preset's figures, and with the figures this launch's
  // probe measured (the same formula, other inputs).
  PredictOptions po_measured = po;
  ClusterSpec measured = cluster;
  bench::LinkFigures lf;
  if (world.rank() == 0) {
    lf = bench::LinkProbe::figures(link, ranks);
    DeviceType& cpu = measured.device_types.at("cpu");
    cpu.intra_node_bandwidth_gbps = lf.link_gbps;
    cpu.node_shared_bandwidth_gbps = lf.shared_gbps;
    // The launch's pieces priced at the tiny probe's latency; a collective adds nothing beyond
    // its pieces (the runtime posts pieces, not collectives).
    po_measured.collective_latency_ms = 0;
    po_measured.collective_piece_latency_ms = lf.piece_latency_ms;
  }
  for (ModeRun& r : runs) {
    const std::vector<double> copied = world.gather(std::vector<double>{r.sync->bytes_copied()});
    const std::vector<double> faulted =
        world.gather(std::vector<double>{static_cast<double>(r.faults) / reps});
    const std::vector<double> window = world.gather(
        std::vector<double>{static_cast<double>(r.sync->peak_bytes_in_flight())});
    const std::vector<GradBlock> collectives = aggregation_collectives(plan, r.mode);
    const AggregationStats stats = aggregation_stats(collectives, sizeof(float));
    // The pieces the communicators cut the mode's collectives into (docs/comm.md, "Chunking"),
    // as the predictor cuts them (po has the communicator's piece size).
    double pieces = 0;
    for (const GradBlock& b : collectives) {
      pieces += collective_time(index, b.holders, static_cast<double>(b.elements) * sizeof(float),
                                po).pieces;
    }
    if (world.rank() == 0) {
      const std::vector<double>& times = r.times;
      std::cout << Json{{"plan", kind},
                        {"ranks", ranks},
                        {"mode", aggregation_mode_name(r.mode)},
                        {"ms", median(times) * 1e3},
                        {"ms_min", *std::min_element(times.begin(), times.end()) * 1e3},
                        {"ms_max", *std::max_element(times.begin(), times.end()) * 1e3},
                        {"reps", times.size()},
                        {"predicted_ms", predict_aggregation(plan, cluster, r.mode, po).end_ms},
                        {"predicted_measured_ms",
                         predict_aggregation(plan, measured, r.mode, po_measured).end_ms},
                        {"link_shared_gbps", lf.shared_gbps},
                        {"link_gbps", lf.link_gbps},
                        {"link_piece_latency_ms", lf.piece_latency_ms},
                        {"copied_bytes_max", *std::max_element(copied.begin(), copied.end())},
                        {"page_faults_max", *std::max_element(faulted.begin(), faulted.end())},
                        {"in_flight_bytes_max", *std::max_element(window.begin(), window.end())},
                        {"bytes_per_rank_max", stats.bytes_per_device_max},
                        {"collectives", stats.collectives},
                        {"pieces", static_cast<std::int64_t>(pieces)},
                        {"communicators", stats.communicators}}
                       .dump()
                << std::endl;
    }
  }
  return 0;
}

// The rows of section (1), printed as a table unless `json`. Each configuration runs in
// `launches` separate mpirun launches, interleaved with the other configurations: with 8 ranks
// on 2 cores one launch's scheduling pattern persists through all its repetitions, and the
// same configuration measured 13-39 ms from one launch to the next, while the modes of one
// launch stayed within a few percent of each other. ms is the median over the launches of each
// launch's median; vs_block the median over the launches of the mode's time over block-wise's
// in the same launch (paired, so the launch pattern cancels).
Json aggregation_section(const std::string& self, bool quick, bool json) {
  const int reps = quick ? 5 : 21;
  const int launches = quick ? 1 : 3;
  struct Config {
    std::string kind;
    int ranks;
    std::vector<Json> rows;                   // per mode, the first launch's row
    std::vector<std::vector<double>> ms;      // per mode, per launch
    std::vector<std::vector<double>> ratio;   // per mode, per launch: over block-wise's
    // Per mode, per launch: the predictor's term over the launch's measured median, with the
    // preset's figures and with the launch's own probe's.
    std::vector<std::vector<double>> pred_ratio, pred_measured_ratio;
    // Per launch: the probe's figures.
    std::vector<double> shared_gbps, link_gbps, piece_latency_ms;
    std::vector<double> idle;                 // per launch: the CPUs' idle share just before
  };
  std::vector<Config> configs;
  for (const std::string kind : {"asymmetric", "tp"}) {
    for (int ranks : quick ? std::vector<int>{4} : std::vector<int>{4, 8}) {
      configs.emplace_back();
      configs.back().kind = kind;
      configs.back().ranks = ranks;
    }
  }
  for (int launch = 0; launch < launches; ++launch) {
    for (Config& c : configs) {
      MpirunOptions o;
      o.num_ranks = c.ranks;
      o.as_root = running_as_root();
      std::string out;
      c.idle.push_back(idle_share(0.5));
      const int code = run_capture(
          join(mpirun_argv(o, {self, "--worker-aggregation", c.kind, std::to_string(c.ranks),
                               std::to_string(reps)})),
          &out);
      if (code != 0) {
        std::fprintf(stderr, "runtime_bench: mpirun of %d ranks (%s plan) failed with exit code %d\n",
                     c.ranks, c.kind.c_str(), code);
        std::exit(1);
      }
      std::istringstream lines(out);
      double block_ms = 0;
      std::size_t m = 0;
      for (std::string line; std::getline(lines, line);) {
        if (line.empty() || line[0] != '{') continue;
        Json j = Json::parse(line);
        const double ms = j["ms"];
        if (j["mode"] == "block") block_ms = ms;
        if (launch == 0) {
          c.rows.push_back(j);
          c.ms.emplace_back();
          c.ratio.emplace_back();
          c.pred_ratio.emplace_back();
          c.pred_measured_ratio.emplace_back();
        } else {  // the extremes over every repetition of every launch
          Json& first = c.rows[m];
          first["ms_min"] = std::min(first["ms_min"].get<double>(), j["ms_min"].get<double>());
          first["ms_max"] = std::max(first["ms_max"].get<double>(), j["ms_max"].get<double>());
        }
        c.ms[m].push_back(ms);
        c.ratio[m].push_back(block_ms > 0 ? ms / block_ms : 1.0);
        c.pred_ratio[m].push_back(j["predicted_ms"].get<double>() / ms);
        c.pred_measured_ratio[m].push_back(j["predicted_measured_ms"].get<double>() / ms);
        if (m == 0) {
          c.shared_gbps.push_back(j["link_shared_gbps"]);
          c.link_gbps.push_back(j["link_gbps"]);
          c.piece_latency_ms.push_back(j["link_piece_latency_ms"]);
        }
        ++m;
      }
    }
  }
  Json rows = Json::array();
  if (!json) {
    std::printf("\n== gradient aggregation (%s, %.1f M parameters, fp32 gradients, MPI over "
                "shared memory): per launch the median of %d repetitions of the slowest rank, "
                "modes interleaved; ms = median of %d launches\n",
                aggregation_model().name.c_str(),
                static_cast<double>(total_params(aggregation_model())) / 1e6, reps, launches);
    std::printf("%-11s %-10s %5s %-7s %8s %8s %8s %7s %9s %7s %-17s %7s %7s %5s %6s %5s %8s %7s "
                "%5s %s\n", "", "plan", "ranks", "mode", "ms", "min_ms", "pred_ms", "pred/ms",
                "probe_ms", "prb/ms", "prb/ms_launches", "mb_rank", "copied", "coll", "pieces",
                "comms", "vs_block", "win_mb", "idle", "ms_launches");
  }
  for (Config& c : configs) {
    std::vector<double> all_ratios;  // every mode and launch, with the launch's own figures
    for (std::size_t m = 0; m < c.rows.size(); ++m) {
      Json j = c.rows[m];
      const double ms = median(c.ms[m]);
      j["ms"] = ms;
      j["ms_launches"] = c.ms[m];
      j["launches"] = launches;
      j["vs_block"] = median(c.ratio[m]);
      j["vs_block_launches"] = c.ratio[m];
      j["idle_before_min"] = *std::min_element(c.idle.begin(), c.idle.end());
      // Ratios are paired within a launch (its prediction over its own median), then the
      // median over launches; predicted_measured_ms is that ratio times ms.
      j["pred_over_ms"] = median(c.pred_ratio[m]);
      j["pred_measured_over_ms"] = median(c.pred_measured_ratio[m]);
      j["pred_measured_over_ms_launches"] = c.pred_measured_ratio[m];
      j["link_shared_gbps_launches"] = c.shared_gbps;
      j["link_gbps_launches"] = c.link_gbps;
      j["link_piece_latency_ms_launches"] = c.piece_latency_ms;
      all_ratios.insert(all_ratios.end(), c.pred_measured_ratio[m].begin(),
                        c.pred_measured_ratio[m].end());
      rows.push_back(j);
      if (json) continue;
      const std::string per_launch = comma_list(c.pred_measured_ratio[m], "%.2f");
      const std::string ms_launches = comma_list(c.ms[m], "%.1f");
      std::printf("aggregation %-10s %5d %-7s %8.2f %8.2f %8.2f %7.2f %9.2f %7.2f %-17s %7.2f "
                  "%7.2f %5lld %6lld %5lld %7.2fx %7.2f %4.0f%% %s\n",
                  c.kind.c_str(), c.ranks, j["mode"].get<std::string>().c_str(), ms,
                  j["ms_min"].get<double>(), j["predicted_ms"].get<double>(),
                  j["pred_over_ms"].get<double>(),
                  j["pred_measured_over_ms"].get<double>() * ms,
                  j["pred_measured_over_ms"].get<double>(), per_launch.c_str(),
                  j["bytes_per_rank_max"].get<double>() / 1e6,
                  j["copied_bytes_max"].get<double>() / 1e6,
                  static_cast<long long>(j["collectives"].get<std::int64_t>()),
                  static_cast<long long>(j["pieces"].get<std::int64_t>()),
                  static_cast<long long>(j["communicators"].get<std::int64_t>()),
                  j["vs_block"].get<double>(), j["in_flight_bytes_max"].get<double>() / 1e6,
                  100.0 * j["idle_before_min"].get<double>(), ms_launches.c_str());
    }
    if (!json) {
      std::string figs;
      for (std::size_t l = 0; l < c.shared_gbps.size(); ++l) {
        char b[128];
        std::snprintf(b, sizeof b, "%s%.1f / %.1f Gbit/s, %.1f us", l ? "; " : "",
                      c.shared_gbps[l], c.link_gbps[l], c.piece_latency_ms[l] * 1e3);
        figs += b;
      }
      std::printf("probe       %-10s %5d node shared / intra-node link, piece latency, "
                  "per launch: %s\n",
                  c.kind.c_str(), c.ranks, figs.c_str());
    }
    summary("aggregation",
                                c.kind + "-" + std::to_string(c.ranks) + " probe_pred/ms",
                                all_ratios, 0.85, 1.15, json);
  }
  if (!json) {
    std::printf("   (pred_ms: the predictor's term with the `cpu` preset's link figures; "
                "probe_ms: with the figures the launch's own link probe measured (bench/"
                "link_probe.h), pred/ms and prb/ms paired per launch, median over launches; "
                "copied: bytes a rank copies or fills outside the collectives per step; "
                "device-wise zero-fills its padding; win_mb: the most bytes of pieces one "
                "rank had in flight; idle: the CPUs' least idle share over 0.5 s before a "
                "launch; load after: %.2f)\n", load1());
  }
  return rows;
}

// What the sections share: the tool, a scratch folder, the steps per run and runs per plan.
struct Setup {
  std::string eth;
  fs::path dir;
  // 20 steps a run: with 10, one run in five of some plan left 0.90-1.10 on the quiet machine
  // (four ranks time-sharing two vCPUs); with 20 all fifteen held (docs/runtime.md).
  int steps = 20;
  int runs = 5;
  bool quick = false;
  bool json = false;  // rows into the document, no tables
  std::string emulate_from = "auto";  // eth train --emulate-from for the emulated runs
};

// Runs an eth command line (stdout captured, stderr to a file beside it); exits on failure.
std::string eth(const Setup& s, const std::string& args) {
  std::string out;
  const std::string err = (s.dir / "stderr.txt").string();
  const std::string cmd = s.eth + " " + args + " 2>" + err;
  if (run_capture(cmd, &out) != 0) {
    std::ifstream in(err);
    std::stringstream ss;
    ss << in.rdbuf();
    std::fprintf(stderr, "runtime_bench: failed: %s\n%s\n", cmd.c_str(), ss.str().c_str());
    std::exit(1);
  }
  return out;
}

struct Measured {
  double predicted_ms = 0, measured_ms = 0, load = 0;
};

// One training run through eth launch; the report's measured and predicted iteration.
Measured launch(const Setup& s, const fs::path& plan, const fs::path& profile,
                const std::string& extra) {
  Measured m;
  m.load = load1();
  const std::string out =
      eth(s, "launch --plan " + plan.string() + " -- --data " + (s.dir / "data.bin").string() +
                 " --steps " + std::to_string(s.steps) + " --profile " + profile.string() +
                 " --print-every 0 --format json --threads 1 " + extra);
  const Json j = Json::parse(out.substr(out.find('{')));
  m.measured_ms = j["measured_iteration_ms"];
  m.predicted_ms = j["predicted_iteration_ms"];
  return m;
}

// 4 blocks of hidden 256 over sequences of 128: a forward of 4 samples is ~0.4 GFLOP per block,
// long enough that compute, not message latency, dominates on 2 cores.
ModelSpec bench_model() { return ModelSpec{"bench-4x256", 4, 256, 4, 128, 512, 1024}; }

// The model file, the token file and the cpu profile of bench_model(), measured once (both
// sections use it) the way the runs use the kernels: one thread, thread CPU time, caches cold
// (eth profile --measure's defaults; docs/runtime.md "Measured vs predicted").
struct Inputs {
  fs::path model, profile;
  std::string sizes;
};

Inputs inputs(const Setup& s) {
  const ModelSpec model = bench_model();
  Inputs in{s.dir / "model.json", s.dir / "profile", s.quick ? "1,4" : "1,2,4,8"};
  if (fs::exists(in.profile)) return in;
  std::ofstream(in.model) << model_to_json(model).dump(1);
  // Medians of 7: with 3, one invocation's profile priced the layer plan 5% under the next
  // one's (the planner's input moves every prediction of the invocation together).
  eth(s, "profile --measure --model " + in.model.string() + " --micro-batch-sizes " + in.sizes +
             " --threads 1 --repeats " + (s.quick ? "1" : "7") + " --out " + in.profile.string());
  eth(s, "data --synthetic 200000 --vocab " + std::to_string(model.vocab) + " --out " +
             (s.dir / "data.bin").string());
  return in;
}

Json emulated_section(const Setup& s) {
  const ModelSpec model = bench_model();
  const std::int64_t gbs = 16;
  if (!s.json) std::printf("\n== emulated heterogeneous cluster cpu-emulated: 2 x cpu-fast + 2 x cpu-slow "
              "(EMULATED: every op stretched 4x on fast, 12x on slow ranks; --emulate-from %s), "
              "%s, gbs %lld, seq %lld, %d steps a run\n",
              s.emulate_from.c_str(), model.name.c_str(), static_cast<long long>(gbs),
              static_cast<long long>(model.seq_len), s.steps);
  const Inputs in = inputs(s);
  const std::vector<std::string> methods{"eth", "layer", "uniform"};
  for (const std::string& m : methods) {
    eth(s, "plan --cluster cpu-emulated --model " + in.model.string() + " --gbs " +
               std::to_string(gbs) + " --profile " + in.profile.string() + " --tp 1 " +
               "--micro-batch-sizes " + in.sizes + " --method " + m + " --out " +
               (s.dir / (m + ".json")).string());
  }
  if (!s.json) {
    std::printf("%-9s %3s %-8s %12s %11s %7s %5s\n", "", "run", "method", "predicted_ms",
                "measured_ms", "ratio", "load1");
  }
  Json out{{"model", model.name}, {"gbs", gbs}, {"steps", s.steps}, {"runs", Json::array()},
           {"speedups", Json::array()}, {"summary", Json::array()}};
  std::vector<std::vector<double>> ratios(methods.size());
  std::vector<double> speedup_errors;
  for (int run = 1; run <= s.runs; ++run) {
    std::vector<Measured> ms;
    for (std::size_t i = 0; i < methods.size(); ++i) {
      const Measured m = launch(s, s.dir / (methods[i] + ".json"), in.profile,
                                "--emulate-from " + s.emulate_from);
      const double ratio = m.predicted_ms / m.measured_ms;
      out["runs"].push_back(Json{{"run", run}, {"method", methods[i]},
                                 {"predicted_ms", m.predicted_ms}, {"measured_ms", m.measured_ms},
                                 {"ratio", ratio}, {"load_1m", m.load}});
      if (!s.json) {
        std::printf("emulated  %3d %-8s %12.1f %11.1f %7.3f %5.2f\n", run, methods[i].c_str(),
                    m.predicted_ms, m.measured_ms, ratio, m.load);
        std::fflush(stdout);
      }
      ratios[i].push_back(ratio);
      ms.push_back(m);
    }
    const double measured = ms[1].measured_ms / ms[0].measured_ms;
    const double predicted = ms[1].predicted_ms / ms[0].predicted_ms;
    speedup_errors.push_back((measured - predicted) / predicted);
    out["speedups"].push_back(Json{{"run", run}, {"measured", measured}, {"predicted", predicted},
                                   {"error", speedup_errors.back()}});
    if (!s.json) {
      std::printf("speedup   %3d eth_over_layer measured=%.3f predicted=%.3f error=%+.3f\n", run,
                  measured, predicted, speedup_errors.back());
    }
  }
  for (std::size_t i = 0; i < methods.size(); ++i) {
    out["summary"].push_back(
        summary("emulated", methods[i] + " ratio", ratios[i], 0.90, 1.10, s.json));
  }
  out["summary"].push_back(
      summary("emulated", "speedup error", speedup_errors, -0.10, 0.10, s.json));
  return out;
}

Json cpu2_section(const Setup& s) {
  const ModelSpec model = bench_model();
  const std::int64_t gbs = 16;
  if (!s.json) std::printf("\n== real 2-rank plan on cpu-2 (this machine, NOT emulated; one core and one "
              "thread per rank, --pin), %s, gbs %lld, seq %lld, %d steps a run\n",
              model.name.c_str(), static_cast<long long>(gbs),
              static_cast<long long>(model.seq_len), s.steps);
  const Inputs in = inputs(s);
  const fs::path plan = s.dir / "cpu2.json";
  const std::string shown = eth(s, "plan --cluster cpu-2 --model " + in.model.string() +
                                       " --gbs " + std::to_string(gbs) + " --profile " +
                                       in.profile.string() + " --tp 1 --micro-batch-sizes " +
                                       in.sizes + " --out " + plan.string());
  Json out{{"model", model.name}, {"gbs", gbs}, {"steps", s.steps}, {"plan", Json::array()},
           {"runs", Json::array()}, {"summary", Json::array()}};
  std::istringstream lines(shown);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("pipeline") != std::string::npos || line.find(" cpu ") != std::string::npos) {
      out["plan"].push_back(line);
      if (!s.json) std::printf("  %s\n", line.c_str());
    }
  }
  if (!s.json) {
    std::printf("%-9s %3s %12s %11s %7s %5s\n", "", "run", "predicted_ms", "measured_ms", "ratio",
                "load1");
  }
  std::vector<double> ratios;
  for (int run = 1; run <= s.runs; ++run) {
    const Measured m = launch(s, plan, in.profile, "--pin");
    ratios.push_back(m.predicted_ms / m.measured_ms);
    out["runs"].push_back(Json{{"run", run}, {"predicted_ms", m.predicted_ms},
                               {"measured_ms", m.measured_ms}, {"ratio", ratios.back()},
                               {"load_1m", m.load}});
    if (!s.json) {
      std::printf("cpu2      %3d %12.1f %11.1f %7.3f %5.2f\n", run, m.predicted_ms,
                  m.measured_ms, ratios.back(), m.load);
      std::fflush(stdout);
    }
  }
  out["summary"].push_back(summary("cpu2", "median ratio", ratios, 0.95, 1.05, s.json, true));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 4 && args[0] == "--worker-aggregation") {
    return aggregation_worker(args[1], std::stoi(args[2]), std::stoi(args[3]));
  }
  Setup s;
  s.eth = ETH_BINARY_PATH;
  std::string only;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--quick") {
      s.quick = true;
      s.steps = 4;
      s.runs = 2;
    } else if (args[i] == "--steps" && i + 1 < args.size()) {
      s.steps = std::stoi(args[++i]);
    } else if (args[i] == "--runs" && i + 1 < args.size()) {
      s.runs = std::stoi(args[++i]);
    } else if (args[i] == "--only" && i + 1 < args.size()) {
      only = args[++i];
    } else if (args[i] == "--emulate-from" && i + 1 < args.size()) {
      s.emulate_from = args[++i];
    } else if (args[i] == "--format" && i + 1 < args.size() && args[i + 1] == "json") {
      s.json = true;
      ++i;
    } else {
      std::cerr << "usage: runtime_bench [--quick] [--steps N] [--runs N] "
                   "[--only aggregation|emulated|cpu2] [--emulate-from auto|profile|cpu-time] "
                   "[--format json]\n";
      return 1;
    }
  }
  if (s.json && only.empty()) only = "aggregation";  // what scripts/evaluate.sh reads
  s.dir = fs::temp_directory_path() / ("eth_runtime_bench_" + std::to_string(::getpid()));
  fs::create_directories(s.dir);
  Json doc{{"bench", "runtime_bench"}, {"machine", bench::machine_info()}};
  if (!s.json) std::printf("machine   %s\n", bench::machine_line(doc["machine"]).c_str());
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  if (only.empty() || only == "aggregation") {
    doc["aggregation"] = aggregation_section(self, s.quick, s.json);
  }
  if (only.empty() || only == "emulated") doc["emulated"] = emulated_section(s);
  if (only.empty() || only == "cpu2") doc["cpu2"] = cpu2_section(s);
  if (s.json) std::cout << doc.dump(1) << std::endl;
  if (!std::getenv("ETH_BENCH_KEEP")) fs::remove_all(s.dir);
  return 0;
}
