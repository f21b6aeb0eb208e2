// runtime_bench's MPI worker (section 1, started by runtime_bench_aggregation.cpp under mpirun):
// every rank lays out its gradients as the trainer does for each aggregation mode and times that
// mode's start() + finish(), the modes and a link probe taking turns; rank 0 prints one JSON line
// per mode with the figures beside the predictor's term.
#include <malloc.h>
#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_util.h"
#include "link_probe.h"
#include "runtime_bench.h"
#include "cluster/cluster_spec.h"
#include "comm/mpi/mpi_comm.h"
#include "core/error.h"
#include "cost/blocks.h"
#include "cost/predictor.h"
#include "runtime/grad_layout.h"
#include "runtime/grad_sync.h"
#include "runtime/placement.h"

namespace eth::bench {

namespace {

using Clock = std::chrono::steady_clock;

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

struct ModeRun {
  AggregationMode mode;
  std::vector<float> grads;
  std::unique_ptr<GradSync> sync;
  std::vector<double> times;  // rank 0: the slowest rank's time of each timed repetition
  long faults = 0;            // minor page faults inside the timed start() + finish()
};

// Each mode's gradients, laid out as the trainer lays them out (plan_layout), and its GradSync,
// in the order ETH_BENCH_MODES lists them (default block, tensor, device).
// ETH_BENCH_MODES=tensor,block: only those modes, in that order within each repetition
// (experiments; the table wants all three).
std::vector<ModeRun> mode_runs(const Plan& plan, const RankPlace& place,
                               const Communicator& world, const Communicator& tp_comm) {
  const char* only_modes = std::getenv("ETH_BENCH_MODES");
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
  return runs;
}

long minor_faults() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

// Two warm-ups, then `reps` timed repetitions of every mode; the link probe's samples of the
// timed ones.
LinkSamples time_modes(const Communicator& world, std::vector<ModeRun>& runs, int reps) {
  // The modes take turns within each repetition, so a burst of load from another job on this
  // shared machine lands on all of them rather than on whichever ran its repetitions then; the
  // link probe takes its turn after them, so its figures are this launch's.
  LinkProbe probe(world);
  LinkSamples link;
  const int warmup = 2;
  for (int rep = 0; rep < warmup + reps; ++rep) {
    if (rep >= warmup) probe.sample(link);
    for (ModeRun& r : runs) {
      std::fill(r.grads.begin(), r.grads.end(), 1.0f);
      world.barrier();
      const long f0 = minor_faults();
      const auto t0 = Clock::now();
      r.sync->start(r.grads.data());
      r.sync->finish(r.grads.data());
      std::vector<double> mine{seconds_since(t0)};
      if (rep >= warmup) r.faults += minor_faults() - f0;
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
  return link;
}

// Rank 0's line per mode (ms: the median over the timed repetitions of the slowest rank) with
// the bytes a rank copies outside the collectives, faults and has in flight (the most any rank
// does), and the predictor's aggregation term with the `cpu` preset's figures and with the
// figures this launch's probe measured (the same formula, other inputs).
void report_modes(const std::string& kind, int ranks, const Plan& plan,
                  const Communicator& world, const std::vector<ModeRun>& runs,
                  const LinkSamples& link, const PredictOptions& po, int reps) {
  const ClusterSpec cluster = aggregation_cluster(ranks);
  const ClusterIndex index(cluster);
  PredictOptions po_measured = po;
  ClusterSpec measured = cluster;
  LinkFigures lf;
  if (world.rank() == 0) {
    lf = LinkProbe::figures(link, ranks);
    DeviceType& cpu = measured.device_types.at("cpu");
    cpu.intra_node_bandwidth_gbps = lf.link_gbps;
    cpu.node_shared_bandwidth_gbps = lf.shared_gbps;
    // The launch's pieces priced at the tiny probe's latency; a collective adds nothing beyond
    // its pieces (the runtime posts pieces, not collectives).
    po_measured.collective_latency_ms = 0;
    po_measured.collective_piece_latency_ms = lf.piece_latency_ms;
  }
  for (const ModeRun& r : runs) {
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
}

}  // namespace

// Every rank of the launch runs this: it times each mode (mode_runs, time_modes) and rank 0
// prints the lines (report_modes).
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
  PredictOptions po;
  po.precision = Precision::Fp32;  // the gradients are fp32 in both runtime precisions
  po.collective_chunk_bytes = static_cast<double>(co.chunk_bytes);  // ETH_BENCH_CHUNK's pieces
  std::vector<ModeRun> runs = mode_runs(plan, place, world, tp_comm);
  const LinkSamples link = time_modes(world, runs, reps);
  report_modes(kind, ranks, plan, world, runs, link, po, reps);
  return 0;
}

}  // namespace eth::bench
