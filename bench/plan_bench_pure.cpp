// plan_bench's "pure" section: eth against its own pure family, TypeSplit-HPP (Fig. 11d).
#include "plan_bench.h"

#include <cstdio>
#include <string>
#include <vector>

namespace eth::bench {

// eth against its own pure family (every pipeline on one device type: the paper's
// TypeSplit-HPP, Fig. 11d) on the A100/RTX3090 clusters.
Json run_pure(const Options& opt) {
  Json rows = Json::array();
  for (const Scenario& s : paper_scenarios(opt, {"a100-rtx3090"})) {
    const ModelSpec model = model_preset(s.model);
    const ClusterSpec c = load_cluster(s.cluster);
    const ProfileDb db = analytic_for(model, c, model.seq_len);
    PlannerOptions pure;
    pure.pure_only = true;
    const std::int64_t seq = model.seq_len;
    rows.push_back(Json{
        {"model", s.model},
        {"cluster", s.cluster},
        {"devices", c.num_devices()},
        {"gbs", s.gbs},
        {"methods",
         Json{{"eth", method_json(timed_plan(PlanMethod::Eth, model, c, db, s.gbs, seq, {}))},
              {"pure", method_json(timed_plan(PlanMethod::Eth, model, c, db, s.gbs, seq, pure))},
              {"layer", method_json(timed_plan(PlanMethod::Layer, model, c, db, s.gbs, seq, {}))},
              {"uniform",
               method_json(timed_plan(PlanMethod::Uniform, model, c, db, s.gbs, seq, {}))}}}});
  }
  return rows;
}

void print_pure(const Json& rows) {
  std::printf(
      "== eth vs TypeSplit-HPP (its pure family: pipelines of one device type), Fig. 11d\n");
  bench::print_rows(rows, {{"cluster", "cluster"},
                           {"eth ms", "methods.eth.iteration_ms", "%.1f"},
                           {"eth family", "methods.eth.family"},
                           {"type-split ms", "methods.pure.iteration_ms", "%.1f"},
                           {"pipelines", "methods.pure.pipelines"},
                           {"layer ms", "methods.layer.iteration_ms", "%.1f"},
                           {"uniform ms", "methods.uniform.iteration_ms", "%.1f"}});
  std::printf("\n");
}

}  // namespace eth::bench
