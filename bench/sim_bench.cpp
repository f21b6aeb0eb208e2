// sim_bench: how fast the simulator is on a big plan (GPT-3 70B over 512 devices: wall time and
// events per second), how far the closed-form predictor is from the simulator on a sensible plan
// for every paper cluster preset (Table 2), and the three gradient aggregation modes (block,
// tensor, device) on eth's plan for each 910B2/910B4 model, predicted and simulated (the paper's
// Fig. 10 at paper scale). `--svg PATH` also writes the timeline picture of a small
// heterogeneous plan (docs/timeline-example.svg); `--format json` prints every figure as one
// JSON document (scripts/evaluate.sh), `--quick` a few small cases. Not a test: it asserts
// nothing; tests/sim/ does.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "cluster/cluster_spec.h"
#include "core/json_file.h"
#include "cost/predictor.h"
#include "model/model_spec.h"
#include "plan/plan.h"
#include "bench_json.h"
#include "bench_util.h"
#include "profile/analytic.h"
#include "search/planner.h"
#include "sim/simulator.h"
#include "sim/trace.h"

namespace {

using namespace eth;
using Clock = std::chrono::steady_clock;
using bench::seconds_since;

// Stage unit ranges: `units` split into `stages` contiguous ranges, sizes differing by at most
// one, the larger ones first.
std::vector<std::pair<std::int64_t, std::int64_t>> split_units(std::int64_t units,
                                                               std::int64_t stages) {
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  std::int64_t first = 0;
  for (std::int64_t s = 0; s < stages; ++s) {
    const std::int64_t n = units / stages + (s < units % stages ? 1 : 0);
    out.emplace_back(first, first + n - 1);
    first += n;
  }
  return out;
}

struct PipelineShape {
  std::vector<std::int64_t> devices;  // tp * stages consecutive ids
  std::string type;
  std::int64_t tp = 1;
  std::int64_t stages = 1;
};

// Data balance: local batches proportional to each pipeline's aggregate peak TFLOPS, exact to
// the global batch (largest remainders first).
std::vector<std::int64_t> balance_batches(const std::vector<double>& weight, std::int64_t gbs) {
  double total = 0;
  for (double w : weight) total += w;
  std::vector<std::int64_t> out;
  std::vector<std::pair<double, std::size_t>> rest;
  std::int64_t given = 0;
  for (std::size_t i = 0; i < weight.size(); ++i) {
    const double exact = static_cast<double>(gbs) * weight[i] / total;
    out.push_back(static_cast<std::int64_t>(exact));
    given += out.back();
    rest.emplace_back(exact - static_cast<double>(out.back()), i);
  }
  std::sort(rest.begin(), rest.end(), [](auto a, auto b) { return a.first > b.first; });
  for (std::size_t i = 0; given < gbs; ++i, ++given) ++out[rest[i % rest.size()].second];
  return out;
}

Plan build_plan(const ModelSpec& m, const ClusterSpec& cluster,
                const std::vector<PipelineShape>& shapes, std::int64_t gbs, std::int64_t mbs,
                bool full_recompute) {
  Plan plan;
  plan.model = m;
  plan.gbs = gbs;
  plan.seq_len = m.seq_len;
  std::vector<double> weight;
  for (const auto& sh : shapes) {
    weight.push_back(cluster.type(sh.type).tflops * static_cast<double>(sh.devices.size()));
  }
  const auto batches = balance_batches(weight, gbs);
  for (std::size_t p = 0; p < shapes.size(); ++p) {
    const auto& sh = shapes[p];
    PipelinePlan pipe;
    pipe.micro_batch_size = mbs;
    pipe.local_batch = batches[p];
    const auto ranges = split_units(m.num_units(), sh.stages);
    for (std::int64_t s = 0; s < sh.stages; ++s) {
      StagePlan st;
      st.device_type = sh.type;
      st.tp = sh.tp;
      st.first_unit = ranges[static_cast<std::size_t>(s)].first;
      st.last_unit = ranges[static_cast<std::size_t>(s)].second;
      for (std::int64_t t = 0; t < sh.tp; ++t)
        st.devices.push_back(sh.devices[static_cast<std::size_t>(s * sh.tp + t)]);
      if (full_recompute) st.recompute.add(RecomputeOp::Unit);
      pipe.stages.push_back(st);
    }
    plan.pipelines.push_back(pipe);
  }
  return plan;
}

// Pipelines of `per_pipeline` consecutive nodes each, stages of `tp` devices inside a node.
std::vector<PipelineShape> shapes_for(const ClusterSpec& c, std::int64_t nodes_per_pipeline,
                                      std::int64_t tp) {
  std::vector<PipelineShape> out;
  const auto first = c.node_first_device();
  for (std::size_t n = 0; n + static_cast<std::size_t>(nodes_per_pipeline) <= c.nodes.size();
       n += static_cast<std::size_t>(nodes_per_pipeline)) {
    PipelineShape sh;
    sh.type = c.nodes[n].device_type;
    sh.tp = tp;
    for (std::int64_t k = 0; k < nodes_per_pipeline; ++k) {
      const auto& node = c.nodes[n + static_cast<std::size_t>(k)];
      for (std::int64_t d = 0; d < node.devices; ++d)
        sh.devices.push_back(first[n + static_cast<std::size_t>(k)] + d);
    }
    sh.stages = static_cast<std::int64_t>(sh.devices.size()) / tp;
    out.push_back(sh);
  }
  return out;
}

ProfileDb profile_for(const Plan& plan, const ClusterSpec& cluster) {
  std::set<std::int64_t> tps, mbss;
  for (const auto& pipe : plan.pipelines) {
    for (const auto& st : pipe.stages) {
      tps.insert(st.tp);
      mbss.insert(pipe.micro_batch_size);
      mbss.insert(pipe.last_microbatch_size());
    }
  }
  return analytic_profile_db(plan.model, cluster, {tps.begin(), tps.end()},
                             {mbss.begin(), mbss.end()}, plan.seq_len);
}

// The 70B plan: 8 pipelines of 16 stages, tp 4 (two stages per 8-device node), 4 pipelines
// on 910B2 nodes and 4 on 910B4, batches by aggregate TFLOPS, micro-batch 1, full recompute.
Plan plan_70b(const ClusterSpec& cluster) {
  return build_plan(model_preset("gpt3-70b"), cluster, shapes_for(cluster, 8, 4), 1024, 1, true);
}

Json bench_70b(bool quick) {
  const ClusterSpec cluster = load_cluster("70b-910b2-910b4");
  const Plan plan = plan_70b(cluster);
  auto t0 = Clock::now();
  const ProfileDb db = profile_for(plan, cluster);
  const auto costs = compute_stage_costs(plan, cluster, db);
  const auto colls = make_collectives(plan, cluster, AggregationMode::Block);
  const double setup_s = seconds_since(t0);
  Json out{{"model", "gpt3-70b"},
           {"cluster", "70b-910b2-910b4"},
           {"devices", plan.num_devices()},
           {"pipelines", plan.pipelines.size()},
           {"stages_per_pipeline", 16},
           {"tp", 4},
           {"gbs", plan.gbs},
           {"collectives", colls.size()},
           {"setup_s", setup_s}};
  for (bool record : {false, true}) {
    SimOptions o;
    o.record_timeline = record;
    const int reps = quick ? 1 : 5;
    double best = 1e9;
    SimResult r;
    for (int i = 0; i < reps; ++i) {
      t0 = Clock::now();
      r = simulate(plan, costs, colls, o);
      best = std::min(best, seconds_since(t0));
    }
    out[record ? "with_timeline" : "without_timeline"] =
        Json{{"runs", reps},
             {"best_wall_s", best},
             {"events", r.events},
             {"events_per_s", static_cast<double>(r.events) / best},
             {"timeline_entries", r.timeline.entries.size()},
             {"iteration_ms", r.iteration_ms}};
  }
  const Prediction pred = predict(plan, cluster, db, {});
  out["predicted_ms"] = pred.iteration_ms;
  out["fits"] = pred.fits;
  return out;
}

void print_70b(const Json& j) {
  std::printf(
      "GPT-3 70B, cluster 70b-910b2-910b4: %lld devices, %lld pipelines x 16 stages (tp 4), "
      "global batch %lld, %lld gradient collectives\n",
      static_cast<long long>(j["devices"].get<std::int64_t>()),
      static_cast<long long>(j["pipelines"].get<std::int64_t>()),
      static_cast<long long>(j["gbs"].get<std::int64_t>()),
      static_cast<long long>(j["collectives"].get<std::int64_t>()));
  std::printf("  setup (analytic profile, stage costs, collectives): %.3f s\n",
              j["setup_s"].get<double>());
  for (const char* k : {"without_timeline", "with_timeline"}) {
    const Json& r = j[k];
    std::printf(
        "  simulate (%s): best of %d %.4f s wall, %llu events, %.2f M events/s, %zu timeline "
        "entries; iteration %.1f ms\n",
        k, r["runs"].get<int>(), r["best_wall_s"].get<double>(),
        static_cast<unsigned long long>(r["events"].get<std::uint64_t>()),
        r["events_per_s"].get<double>() / 1e6, r["timeline_entries"].get<std::size_t>(),
        r["iteration_ms"].get<double>());
  }
  std::printf("  predictor: %.1f ms, memory %s\n\n", j["predicted_ms"].get<double>(),
              j["fits"].get<bool>() ? "fits" : "DOES NOT FIT");
}

struct PresetPlan {
  std::string preset;
  std::string model;
  std::int64_t nodes_per_pipeline, tp, gbs, mbs;
};

Json bench_presets(bool quick) {
  // One sensible plan per paper preset: one pipeline per node (per 8 nodes for 70B), stages of
  // tp devices, units split evenly, data balanced by aggregate TFLOPS. Full recompute only
  // where the plan would not fit otherwise.
  std::vector<PresetPlan> table = {
      {"350m", "gpt3-350m", 1, 1, 128, 2}, {"1.3b", "gpt3-1.3b", 1, 1, 128, 2},
      {"2.6b", "gpt3-2.6b", 1, 1, 256, 2}, {"6.7b", "gpt3-6.7b", 1, 2, 256, 1},
      {"13b", "gpt3-13b", 1, 2, 512, 1},   {"70b", "gpt3-70b", 8, 4, 1024, 1}};
  if (quick) table.resize(1);
  Json rows = Json::array();
  for (const char* pair : {"910b2-910b4", "a100-rtx3090"}) {
    for (const auto& row : table) {
      const std::string name = row.preset + "-" + pair;
      const ClusterSpec cluster = load_cluster(name);
      const ModelSpec m = model_preset(row.model);
      // First fit: as given, then with full recompute, then pipelines twice as long.
      Plan plan;
      Prediction pred;
      ProfileDb db(m);
      bool recompute = false;
      for (std::int64_t npp = row.nodes_per_pipeline;; npp *= 2) {
        const auto shapes = shapes_for(cluster, npp, row.tp);
        for (bool rc : {false, true}) {
          plan = build_plan(m, cluster, shapes, row.gbs, row.mbs, rc);
          db = profile_for(plan, cluster);
          pred = predict(plan, cluster, db, {});
          recompute = rc;
          if (pred.fits) break;
        }
        if (pred.fits || 2 * npp > static_cast<std::int64_t>(cluster.nodes.size()) / 2) break;
      }
      const auto costs = compute_stage_costs(plan, cluster, db);
      const auto colls = make_collectives(plan, cluster, AggregationMode::Block);
      SimOptions o;
      o.record_timeline = false;
      const SimResult r = simulate(plan, costs, colls, o);
      // Attribute the gap: pipeline part versus what follows the pipelines.
      double sim_pipes = 0;
      for (double v : r.pipeline_ms) sim_pipes = std::max(sim_pipes, v);
      // Where the slowest predicted pipeline's bottleneck stage sits.
      std::size_t slowest = 0;
      for (std::size_t p = 0; p < pred.pipelines.size(); ++p) {
        if (pred.pipelines[p].time_ms > pred.pipelines[slowest].time_ms) slowest = p;
      }
      const auto& sp = pred.pipelines[slowest];
      rows.push_back(Json{
          {"cluster", name},
          {"model", row.model},
          {"pipelines", plan.pipelines.size()},
          {"devices", plan.num_devices()},
          {"predicted_ms", pred.iteration_ms},
          {"simulated_ms", r.iteration_ms},
          {"diff_pct", 100.0 * (r.iteration_ms - pred.iteration_ms) / pred.iteration_ms},
          {"pipeline_gap_ms", sim_pipes - pred.pipeline_ms},
          {"tail_gap_ms",
           (r.iteration_ms - sim_pipes) - (pred.sync.exposed_ms + pred.optimizer_ms)},
          {"bottleneck_stage", sp.bottleneck_stage},
          {"stages", sp.stages.size()},
          {"full_recompute", recompute},
          {"fits", pred.fits}});
    }
  }
  return rows;
}

void print_presets(const Json& rows) {
  bench::print_rows(rows, {{"preset", "cluster"},
                           {"pipelines", "pipelines"},
                           {"devices", "devices"},
                           {"predicted ms", "predicted_ms", "%.1f"},
                           {"simulated ms", "simulated_ms", "%.1f"},
                           {"diff %", "diff_pct", "%+.2f"},
                           {"pipelines gap ms", "pipeline_gap_ms", "%+.1f"},
                           {"bottleneck stage", "bottleneck_stage"},
                           {"of", "stages"},
                           {"sync+opt gap ms", "tail_gap_ms", "%+.1f"},
                           {"full recompute", "full_recompute"},
                           {"fits", "fits"}});
  std::printf(
      "\nWhy they differ (docs/simulator.md). The predictor's 1F1B closed form,\n"
      "  sum_s (F_s + B_s + 2 send_s) + (k - 2) max_s (F_s + B_s) + max_s (F'_s + B'_s),\n"
      "(or, over slow links, the chain of round trips 1F1B's in-flight limit forces, when longer)\n"
      "counts every stage's F + B in full in the fill. When the bottleneck sits before the last\n"
      "stage (stage 1 here: even unit splits give the front stages the remainder), the stages\n"
      "after it work inside its steady-state rhythm and the simulation is shorter by a constant.\n"
      "With the bottleneck last (the two-stage rows) the formula is exact unless the last\n"
      "micro-batch is partial: the simulated drain then runs at its smaller size. Transfers\n"
      "longer than a stage's slack would push the other way; at these bandwidths they do not.\n"
      "After the pipelines, the predictor adds the slowest optimizer step to the exposed\n"
      "gradient sync; the simulator starts each device's step when its own collectives end.\n\n");
}

// The paper's Fig. 10 at paper scale: eth's plan for each 910B2/910B4 model under each gradient
// aggregation mode, priced by the predictor and played out by the simulator (analytic profile).
Json bench_aggregation(bool quick) {
  std::vector<std::pair<std::string, std::int64_t>> models = {
      {"350m", 512}, {"1.3b", 512}, {"2.6b", 512}, {"6.7b", 512}, {"13b", 1024}, {"70b", 1024}};
  if (quick) models.resize(1);
  Json rows = Json::array();
  for (const auto& [tag, gbs] : models) {
    const ModelSpec m = model_preset("gpt3-" + tag);
    const ClusterSpec cluster = load_cluster(tag + "-910b2-910b4");
    std::vector<std::int64_t> tps;
    for (std::int64_t t : {1, 2, 4, 8}) {
      if (m.heads % t == 0 && m.ffn % t == 0) tps.push_back(t);
    }
    const ProfileDb db = analytic_profile_db(m, cluster, tps, {1, 2, 4, 8, 16}, m.seq_len);
    const Plan plan = plan_training(PlanMethod::Eth, m, cluster, db, gbs, m.seq_len, {}).plan;
    const auto costs = compute_stage_costs(plan, cluster, db);
    for (AggregationMode mode :
         {AggregationMode::Block, AggregationMode::Tensor, AggregationMode::Device}) {
      PredictOptions po;
      po.aggregation = mode;
      const Prediction pred = predict(plan, cluster, db, po);
      SimOptions so;
      so.record_timeline = false;
      const SimResult r = simulate(plan, costs, make_collectives(plan, cluster, mode), so);
      double reduce_max = 0;
      for (const auto& d : r.devices) reduce_max = std::max(reduce_max, d.reduce_ms);
      rows.push_back(Json{{"model", "gpt3-" + tag},
                          {"cluster", cluster.name},
                          {"gbs", gbs},
                          {"pipelines", plan.pipelines.size()},
                          {"mode", aggregation_mode_name(mode)},
                          {"predicted_ms", pred.iteration_ms},
                          {"simulated_ms", r.iteration_ms},
                          {"sync_busy_ms", pred.sync.busy_ms},
                          {"sync_exposed_ms", pred.sync.exposed_ms},
                          {"simulated_reduce_ms_max", reduce_max},
                          {"collectives", pred.sync.stats.collectives},
                          {"communicators", pred.sync.stats.communicators},
                          {"gb_per_device_max", pred.sync.stats.bytes_per_device_max / 1e9}});
    }
  }
  return rows;
}

void print_aggregation(const Json& rows) {
  std::printf("== Gradient aggregation modes on eth's plan, 910B2/910B4 (Fig. 10, predicted and "
              "simulated, analytic profile)\n");
  bench::print_rows(rows, {{"model", "model"},
                           {"mode", "mode"},
                           {"predicted ms", "predicted_ms", "%.1f"},
                           {"simulated ms", "simulated_ms", "%.1f"},
                           {"sync busy ms", "sync_busy_ms", "%.1f"},
                           {"sync exposed ms", "sync_exposed_ms", "%.1f"},
                           {"collectives", "collectives"},
                           {"communicators", "communicators"},
                           {"GB/device", "gb_per_device_max", "%.2f"}});
  std::printf("\n");
}

void write_example_svg(const std::string& path, bool report) {
  // GPT-3 350M on 2 x A100 + 2 x RTX3090: one 2-stage pipeline per node, batch 16 split by
  // TFLOPS (A100 312, RTX3090 80 -> 13 and 3), micro-batch 2 and 1.
  const ClusterSpec cluster = load_cluster("350m-a100-rtx3090");
  const ModelSpec m = model_preset("gpt3-350m");
  auto shapes = shapes_for(cluster, 1, 1);
  Plan plan = build_plan(m, cluster, shapes, 16, 2, false);
  plan.pipelines[1].micro_batch_size = 1;
  const ProfileDb db = profile_for(plan, cluster);
  const auto costs = compute_stage_costs(plan, cluster, db);
  const auto colls = make_collectives(plan, cluster, AggregationMode::Block);
  const SimResult r = simulate(plan, costs, colls, SimOptions{});
  SvgOptions so;
  char title[200];
  std::snprintf(
      title, sizeof title,
      "GPT-3 350M, 2 x A100 (batch %lld, mbs 2) + 2 x RTX3090 (batch %lld, mbs 1): %.1f ms",
      static_cast<long long>(plan.pipelines[0].local_batch),
      static_cast<long long>(plan.pipelines[1].local_batch), r.iteration_ms);
  so.title = title;
  write_file_atomic(path, timeline_svg(plan, r, so));
  if (report) {
    std::printf("wrote %s (%zu timeline entries)\n", path.c_str(), r.timeline.entries.size());
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string svg;
  bool json = false, quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--svg") == 0 && i + 1 < argc) {
      svg = argv[++i];
    } else if (std::strcmp(argv[i], "--format") == 0 && i + 1 < argc &&
               (std::strcmp(argv[i + 1], "json") == 0 || std::strcmp(argv[i + 1], "text") == 0)) {
      json = std::strcmp(argv[++i], "json") == 0;
    } else if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else {
      std::fprintf(stderr, "usage: sim_bench [--svg PATH] [--format text|json] [--quick]\n");
      return 1;
    }
  }
  try {
    Json doc{{"bench", "sim_bench"}, {"quick", quick}, {"machine", bench::machine_info()}};
    if (!json) std::printf("%s\n\n", bench::machine_line(doc["machine"]).c_str());
    doc["speed"] = bench_70b(quick);
    if (!json) print_70b(doc["speed"]);
    doc["presets"] = bench_presets(quick);
    if (!json) print_presets(doc["presets"]);
    doc["aggregation"] = bench_aggregation(quick);
    if (!json) print_aggregation(doc["aggregation"]);
    if (!svg.empty()) write_example_svg(svg, !json);
    doc["machine_after"] = bench::machine_info();
    if (json) std::printf("%s\n", doc.dump(1).c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sim_bench: %s\n", e.what());
    return 2;
  }
  return 0;
}
