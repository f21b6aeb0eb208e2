// Sharded optimizer state on the paper's memory-bound scenarios (13B and 70B on 910B2/910B4, 13B
// on A100/RTX3090): for each planner (eth, layer, uniform) its best plan with the optimizer state
// whole, the same plan with the state sharded by free memory (cost/sharding_memory.h: shares in
// proportion to each holder's free memory, the all-gather priced after the step), and that
// sharded plan after the freed memory is spent on larger micro-batches or less recompute
// (use_freed_memory). Predicted
// figures (analytic profile), each with its worst device's peak over its memory and whether every
// device fits; "why" lists the changes the freed memory bought.
#include "plan_bench_sharding.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "cost/sharding_memory.h"
#include "plan/sharding.h"
#include "profile/analytic.h"
#include "search/planner.h"

namespace eth::bench {

namespace {

ProfileDb analytic(const ModelSpec& m, const ClusterSpec& c) {
  std::vector<std::int64_t> tps;
  for (std::int64_t t : {1, 2, 4, 8}) {
    if (m.heads % t == 0 && m.ffn % t == 0) tps.push_back(t);
  }
  return analytic_profile_db(m, c, tps, {1, 2, 4, 8, 16}, m.seq_len);
}

Json figures(const Prediction& p) {
  double worst = 0;
  for (const DevicePrediction& d : p.devices) worst = std::max(worst, d.peak_bytes / d.capacity_bytes);
  return Json{{"iteration_ms", p.iteration_ms}, {"fits", p.fits},
              {"worst_peak_over_memory", worst}, {"shard_gather_ms", p.shard_gather_ms}};
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
    const ProfileDb db = analytic(model, cluster);
    for (PlanMethod method : {PlanMethod::Eth, PlanMethod::Layer, PlanMethod::Uniform}) {
      Json row{{"model", k.model}, {"cluster", k.cluster},
               {"method", std::string(plan_method_name(method))}};
      try {
        const PlannerResult r = plan_training(method, model, cluster, db, 1024, model.seq_len, {});
        const Plan sharded =
            shard_optimizer_state(r.plan, OptimizerSharding::Memory, cluster, db);
        std::vector<std::string> why;
        const Plan retuned = use_freed_memory(sharded, cluster, db, &why);
        const Prediction whole = predict(r.plan, cluster, db);
        const Prediction shard = predict(sharded, cluster, db);
        const Prediction spent = predict(retuned, cluster, db);
        row["whole"] = figures(whole);
        row["sharded"] = figures(shard);
        row["sharded_spent"] = figures(spent);
        row["speedup"] = whole.iteration_ms / spent.iteration_ms;
        row["why"] = why;
      } catch (const InputError& e) {
        row["error"] = e.what();
      }
      rows.push_back(row);
    }
  }
  return rows;
}

void print_sharding(const Json& rows) {
  std::printf(
      "== Optimizer state sharded by free memory (issue 28; analytic profile, gbs 1024): each "
      "planner's best plan with the state whole, the same plan sharded, and sharded with the "
      "freed memory spent on larger micro-batches or less recompute (predicted iteration ms; "
      "peak/mem: worst device)\n");
  std::printf("%-10s %-17s %-8s %12s %9s %12s %9s %12s %9s %8s  %s\n", "model", "cluster",
              "method", "whole ms", "peak/mem", "sharded ms", "peak/mem", "spent ms", "peak/mem",
              "speedup", "why");
  for (const Json& r : rows) {
    if (r.contains("error")) {
      std::printf("%-10s %-17s %-8s  %s\n", r["model"].get<std::string>().c_str(),
                  r["cluster"].get<std::string>().c_str(), r["method"].get<std::string>().c_str(),
                  r["error"].get<std::string>().c_str());
      continue;
    }
    auto col = [&](const char* k, const char* f) {
      const Json& j = r[k];
      char b[64];
      std::snprintf(b, sizeof b, "%12.1f %8.2f%s", j["iteration_ms"].get<double>(),
                    j["worst_peak_over_memory"].get<double>(), j["fits"].get<bool>() ? " " : "!");
      (void)f;
      return std::string(b);
    };
    std::string why;
    for (const Json& w : r["why"]) why += (why.empty() ? "" : "; ") + w.get<std::string>();
    if (why.empty()) why = "-";
    std::printf("%-10s %-17s %-8s %s %s %s %8.3f  %s\n", r["model"].get<std::string>().c_str(),
                r["cluster"].get<std::string>().c_str(), r["method"].get<std::string>().c_str(),
                col("whole", "").c_str(), col("sharded", "").c_str(),
                col("sharded_spent", "").c_str(), r["speedup"].get<double>(), why.c_str());
  }
  std::printf("(! : some device over its memory)\n\n");
}

}  // namespace eth::bench
