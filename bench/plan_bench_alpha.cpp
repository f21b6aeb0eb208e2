// plan_bench's "alpha" section: SES's tolerance alpha against search time and plan quality
// (Fig. 13b).
#include "plan_bench.h"

#include <cstdio>
#include <string>
#include <vector>

namespace eth::bench {

Json run_alpha(const Options& opt) {
  Json rows = Json::array();
  std::vector<std::pair<const char*, const char*>> cases = {{"gpt3-13b", "13b-910b2-910b4"},
                                                            {"gpt3-70b", "70b-910b2-910b4"}};
  if (opt.quick) cases = {{"gpt3-1.3b", "1.3b-910b2-910b4"}};
  for (const auto& [model_name, cluster] : cases) {
    const ModelSpec model = model_preset(model_name);
    const ClusterSpec c = load_cluster(cluster);
    const ProfileDb db = analytic_for(model, c, model.seq_len);
    double reference = 0;
    for (double alpha : {0.0, 0.01, 0.02, 0.05, 0.1, 0.2}) {
      PlannerOptions o;
      o.alpha = alpha;
      const Timed t = timed_plan(PlanMethod::Eth, model, c, db, 1024, model.seq_len, o);
      if (!t.result) continue;
      if (reference == 0) reference = t.result->best_objective_ms;
      rows.push_back(Json{{"model", model_name},
                          {"cluster", cluster},
                          {"gbs", 1024},
                          {"alpha", alpha},
                          {"search_wall_s", t.wall_s},
                          {"search_cpu_s", t.cpu_s},
                          {"evaluated", t.result->stats.evaluated},
                          {"unit_splits", t.result->stats.unit_splits},
                          {"objective_ms", t.result->best_objective_ms},
                          {"predicted_ms", ms(t)},
                          {"quality", reference / t.result->best_objective_ms}});
    }
  }
  return rows;
}

void print_alpha(const Json& rows) {
  std::printf("== Alpha sensitivity (Fig. 13b): SES tolerance vs search time and plan quality\n");
  bench::print_rows(rows, {{"model", "model"},
                           {"alpha", "alpha", "%.2f"},
                           {"search s", "search_wall_s"},
                           {"cpu s", "search_cpu_s"},
                           {"evaluated", "evaluated"},
                           {"splits", "unit_splits"},
                           {"objective ms", "objective_ms", "%.1f"},
                           {"predicted ms", "predicted_ms", "%.1f"},
                           {"quality", "quality", "%.4f"}});
  std::printf("\n");
}

}  // namespace eth::bench
