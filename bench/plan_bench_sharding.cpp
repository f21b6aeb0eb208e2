// Sharded optimizer state on the paper's memory-bound scenarios (13B and 70B on 910B2/910B4, 13B
// on A100/RTX3090): for each planner (eth, layer, uniform) its best plan with the optimizer state
// whole and its best plan when the search itself charges each holder its share of the state
// (PlannerOptions::optimizer_sharding = memory: shares in proportion to each holder's free
// memory, the reduce-scatter's buffer in memory, the all-gather priced after the step).
// Predicted figures (analytic profile), each with its worst device's peak over its memory;
// "only sharded" says whether the sharded plan overflows some device with its state whole (a
// plan the unsharded search could not choose), and "why" sets the two plans' shapes side by
// side: pipelines, stages, micro-batch sizes, stages that recompute.
#include "plan_bench_sharding.h"

#include "plan_bench.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "cost/sharding_memory.h"
#include "plan/sharding.h"
#include "search/planner.h"

namespace eth::bench {

namespace {

Json figures(const Prediction& p) {
  double worst = 0;
  for (const DevicePrediction& d : p.devices) worst = std::max(worst, d.peak_bytes / d.capacity_bytes);
  return Json{{"iteration_ms", p.iteration_ms}, {"fits", p.fits},
              {"worst_peak_over_memory", worst}, {"shard_gather_ms", p.shard_gather_ms}};
}

// "16 pipes x 4 stages, mbs 2/4, recompute 8/64 stages, tp 1-2"
std::string shape(const Plan& plan) {
  std::set<std::int64_t> mbs, stages, tps;
  std::int64_t rc = 0, total = 0;
  for (const PipelinePlan& p : plan.pipelines) {
    mbs.insert(p.micro_batch_size);
    stages.insert(static_cast<std::int64_t>(p.stages.size()));
    for (const StagePlan& s : p.stages) {
      ++total;
      rc += s.recompute.empty() ? 0 : 1;
      tps.insert(s.tp);
    }
  }
  auto list = [](const std::set<std::int64_t>& v, const char* sep) {
    std::string out;
    for (std::int64_t x : v) out += (out.empty() ? "" : sep) + std::to_string(x);
    return out;
  };
  return std::to_string(plan.pipelines.size()) + " pipes x " + list(stages, "/") +
         " stages, mbs " + list(mbs, "/") + ", tp " + list(tps, "/") + ", recompute " +
         std::to_string(rc) + "/" + std::to_string(total) + " stages";
}

}  // namespace

Json run_sharding(bool quick) {
  struct Case {
    const char* model;
    const char* cluster;
  };
  std::vector<Case> cases = {{"gpt3-13b", "13b-910b2-910b4"},
                             {"gpt3-70b", "70b-910b2-910b4"},
                             {"gpt3-13b", "13b-a100-rtx3090"}};
  if (quick) cases.resize(1);
  Json rows = Json::array();
  for (const Case& k : cases) {
    const ModelSpec model = model_preset(k.model);
    const ClusterSpec cluster = load_cluster(k.cluster);
    const ProfileDb db = analytic_for(model, cluster, model.seq_len);
    for (PlanMethod method : {PlanMethod::Eth, PlanMethod::Layer, PlanMethod::Uniform}) {
      Json row{{"model", k.model}, {"cluster", k.cluster},
               {"method", std::string(plan_method_name(method))}};
      PlannerOptions o;
      o.optimizer_sharding = OptimizerSharding::Memory;
      const Timed tw = timed_plan(method, model, cluster, db, 1024, model.seq_len, {});
      const Timed ts = timed_plan(method, model, cluster, db, 1024, model.seq_len, o);
      if (!tw.result || !ts.result) {
        row["error"] = tw.result ? ts.error : tw.error;
        rows.push_back(row);
        continue;
      }
      const PlannerResult& whole = *tw.result;
      const PlannerResult& sharded = *ts.result;
      const Prediction unshard =
          predict(with_optimizer_sharding(sharded.plan, OptimizerSharding::None), cluster, db);
      row["whole"] = figures(whole.prediction);
      row["sharded"] = figures(sharded.prediction);
      row["speedup"] = whole.prediction.iteration_ms / sharded.prediction.iteration_ms;
      row["only_sharded"] = !unshard.fits;
      row["whole_shape"] = shape(whole.plan);
      row["sharded_shape"] = shape(sharded.plan);
      row["sharding_used"] = std::string(optimizer_sharding_name(sharded.plan.optimizer_sharding));
      row["spent"] = sharded.plan.predicted->value("freed_memory_spent_on", Json::array());
      row["search_cpu_s"] = Json{{"whole", tw.cpu_s}, {"sharded", ts.cpu_s}};
      rows.push_back(row);
    }
  }
  return rows;
}

void print_sharding(const Json& rows) {
  std::printf(
      "== Optimizer state sharded by free memory (issue 28; analytic profile, gbs 1024): each "
      "planner's best plan with the state whole and its best plan when the search charges each "
      "holder its share (predicted iteration ms; peak/mem: worst device; only sharded: the "
      "sharded plan overflows with its state whole)\n");
  std::printf("%-10s %-17s %-8s %12s %8s %12s %8s %8s %6s\n", "model", "cluster", "method",
              "whole ms", "peak/mem", "sharded ms", "peak/mem", "speedup", "only");
  for (const Json& r : rows) {
    if (r.contains("error")) {
      std::printf("%-10s %-17s %-8s  %s\n", r["model"].get<std::string>().c_str(),
                  r["cluster"].get<std::string>().c_str(), r["method"].get<std::string>().c_str(),
                  r["error"].get<std::string>().c_str());
      continue;
    }
    auto col = [&](const char* k) {
      const Json& j = r[k];
      char b[64];
      std::snprintf(b, sizeof b, "%12.1f %7.2f%s", j["iteration_ms"].get<double>(),
                    j["worst_peak_over_memory"].get<double>(), j["fits"].get<bool>() ? " " : "!");
      return std::string(b);
    };
    std::printf("%-10s %-17s %-8s %s %s %8.3f %6s\n", r["model"].get<std::string>().c_str(),
                r["cluster"].get<std::string>().c_str(), r["method"].get<std::string>().c_str(),
                col("whole").c_str(), col("sharded").c_str(), r["speedup"].get<double>(),
                r["only_sharded"].get<bool>() ? "yes" : "no");
    std::printf("    whole:   %s\n    sharded: %s (%s shares); search CPU s %.2f / %.2f\n",
                r["whole_shape"].get<std::string>().c_str(),
                r["sharded_shape"].get<std::string>().c_str(),
                r["sharding_used"].get<std::string>().c_str(),
                r["search_cpu_s"]["whole"].get<double>(), r["search_cpu_s"]["sharded"].get<double>());
    std::string spent;
    for (const Json& w : r["spent"]) spent += (spent.empty() ? "" : "; ") + w.get<std::string>();
    if (!spent.empty()) std::printf("    then spent on: %s\n", spent.c_str());
  }
  std::printf("(! : some device over its memory)\n\n");
}

}  // namespace eth::bench
