// plan_bench's "uneven" section: eth, layer and uniform on clusters that are not Table 2's
// symmetric shapes.
#include "plan_bench.h"

#include <cstdio>
#include <string>
#include <vector>

namespace eth::bench {

// Clusters that are not Table 2's N x M + N x M: uneven type counts, odd node sizes, three
// types. One replicated pipeline shape (layer) fits these badly; HPP does not need one.
Json run_uneven(const Options& opt) {
  struct Case {
    const char* name;
    const char* model;
    std::int64_t gbs;
    const char* nodes;
  };
  std::vector<Case> cases = {
      {"1.3b: 6 A100 + 8 910B4 + 7 RTX3090", "gpt3-1.3b", 333,
       R"([{"device_type": "A100", "devices": 4}, {"device_type": "A100", "devices": 2},
           {"device_type": "910B4", "devices": 8}, {"device_type": "RTX3090", "devices": 4},
           {"device_type": "RTX3090", "devices": 3}])"},
      {"13b: 24 A100 + 40 RTX3090", "gpt3-13b", 1024,
       R"([{"device_type": "A100", "devices": 8}, {"device_type": "A100", "devices": 8},
           {"device_type": "A100", "devices": 8}, {"device_type": "RTX3090", "devices": 8},
           {"device_type": "RTX3090", "devices": 8}, {"device_type": "RTX3090", "devices": 8},
           {"device_type": "RTX3090", "devices": 8}, {"device_type": "RTX3090", "devices": 8}])"},
      {"6.7b: 20 910B2 + 12 910B4", "gpt3-6.7b", 500,
       R"([{"device_type": "910B2", "devices": 8}, {"device_type": "910B2", "devices": 8},
           {"device_type": "910B2", "devices": 4}, {"device_type": "910B4", "devices": 8},
           {"device_type": "910B4", "devices": 4}])"},
  };
  if (opt.quick) cases.resize(1);
  Json rows = Json::array();
  for (const Case& k : cases) {
    const ModelSpec model = model_preset(k.model);
    const Json j = Json::parse(std::string("{\"nodes\": ") + k.nodes + "}");
    const ClusterSpec c = parse_cluster(JsonCursor(j, JsonOrigin{"cluster", "bench", ""}));
    const ProfileDb db = analytic_for(model, c, model.seq_len);
    const std::int64_t seq = model.seq_len;
    rows.push_back(
        Json{{"cluster", k.name},
             {"model", k.model},
             {"devices", c.num_devices()},
             {"gbs", k.gbs},
             {"methods",
              Json{{"eth", method_json(timed_plan(PlanMethod::Eth, model, c, db, k.gbs, seq, {}))},
                   {"layer",
                    method_json(timed_plan(PlanMethod::Layer, model, c, db, k.gbs, seq, {}))},
                   {"uniform", method_json(timed_plan(PlanMethod::Uniform, model, c, db, k.gbs,
                                                      seq, {}))}}}});
  }
  return rows;
}

void print_uneven(const Json& rows) {
  std::printf("== Uneven clusters (not in the paper's Table 2)\n");
  bench::print_rows(rows, {{"cluster", "cluster"},
                           {"search s", "methods.eth.search_wall_s"},
                           {"cpu s", "methods.eth.search_cpu_s"},
                           {"eth ms", "methods.eth.iteration_ms", "%.1f"},
                           {"layer ms", "methods.layer.iteration_ms", "%.1f"},
                           {"uniform ms", "methods.uniform.iteration_ms", "%.1f"},
                           {"ideal ms", "methods.eth.ideal_ms", "%.1f"}});
  std::printf("\n");
}

}  // namespace eth::bench
