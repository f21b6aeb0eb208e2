// plan_bench's "scale" section: GPT-3 13B on 910B2/910B4 scaled in devices, global batch and
// sequence length (Fig. 11a-c).
#include "plan_bench.h"

#include <cstdio>
#include <string>
#include <vector>

namespace eth::bench {

namespace {

// The 13B cluster shape (nodes of 8 910B2 and nodes of 8 910B4) with `nodes` nodes per type.
ClusterSpec scaled_13b(std::int64_t nodes) {
  ClusterSpec c = load_cluster("13b-910b2-910b4");
  c.name = "13b-" + std::to_string(nodes * 16) + "dev";
  c.nodes.clear();
  for (const char* type : {"910B2", "910B4"}) {
    for (std::int64_t n = 0; n < nodes; ++n) c.nodes.push_back(NodeSpec{type, 8});
  }
  return c;
}

}  // namespace

Json run_scale(const Options& opt) {
  const ModelSpec model = model_preset("gpt3-13b");
  Json rows = Json::array();
  auto row = [&](const char* axis, std::int64_t value, const ClusterSpec& c, std::int64_t gbs,
                 std::int64_t seq) {
    const ProfileDb db = analytic_for(model, c, seq);
    Json methods;
    for (PlanMethod m : {PlanMethod::Eth, PlanMethod::Layer, PlanMethod::Uniform}) {
      methods[std::string(plan_method_name(m))] =
          method_json(timed_plan(m, model, c, db, gbs, seq, {}));
    }
    rows.push_back(Json{{"axis", axis},
                        {"value", value},
                        {"model", "gpt3-13b"},
                        {"devices", c.num_devices()},
                        {"gbs", gbs},
                        {"seq", seq},
                        {"methods", methods}});
  };
  const std::int64_t base_nodes = opt.quick ? 1 : 4;
  for (std::int64_t nodes : opt.quick ? std::vector<std::int64_t>{1, 2}
                                      : std::vector<std::int64_t>{1, 2, 4, 8, 16}) {
    row("devices", nodes * 16, scaled_13b(nodes), 1024, 2048);
  }
  for (std::int64_t gbs : opt.quick ? std::vector<std::int64_t>{256, 1024}
                                    : std::vector<std::int64_t>{256, 512, 1024, 2048, 4096}) {
    row("gbs", gbs, scaled_13b(base_nodes), gbs, 2048);
  }
  for (std::int64_t seq : opt.quick ? std::vector<std::int64_t>{512, 2048}
                                    : std::vector<std::int64_t>{512, 1024, 2048}) {
    row("seq", seq, scaled_13b(base_nodes), 1024, seq);
  }
  return rows;
}

void print_scale(const Json& rows) {
  std::printf("== Scalability for GPT-3 13B on 910B2/910B4 (Fig. 11a-c; base: 64 devices, gbs "
              "1024, seq 2048)\n");
  bench::print_rows(rows, {{"axis", "axis"},
                           {"value", "value"},
                           {"devices", "devices"},
                           {"search s", "methods.eth.search_wall_s"},
                           {"cpu s", "methods.eth.search_cpu_s"},
                           {"cands", "methods.eth.candidates"},
                           {"eth ms", "methods.eth.iteration_ms", "%.1f"},
                           {"layer ms", "methods.layer.iteration_ms", "%.1f"},
                           {"uniform ms", "methods.uniform.iteration_ms", "%.1f"},
                           {"ideal ms", "methods.eth.ideal_ms", "%.1f"}});
  std::printf("\n");
}

}  // namespace eth::bench
