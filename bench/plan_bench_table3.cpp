// plan_bench's "table3" section: the eth, layer and uniform plans in the layout of the appendix's
// Table 3.
#include "plan_bench.h"

#include <cstdio>
#include <string>
#include <vector>

namespace eth::bench {

// The appendix's Table 3: the eth, layer and uniform plans for 13B on 910B2/910B4.
Json run_table3(const Options& opt) {
  const char* model_name = opt.quick ? "gpt3-1.3b" : "gpt3-13b";
  const char* cluster = opt.quick ? "1.3b-910b2-910b4" : "13b-910b2-910b4";
  const std::int64_t gbs = opt.quick ? 512 : 1024;
  const ModelSpec model = model_preset(model_name);
  const ClusterSpec c = load_cluster(cluster);
  const ProfileDb db = analytic_for(model, c, model.seq_len);
  Json rows = Json::array();
  for (PlanMethod m : {PlanMethod::Eth, PlanMethod::Layer, PlanMethod::Uniform}) {
    const Timed t = timed_plan(m, model, c, db, gbs, model.seq_len, {});
    if (!t.result) continue;
    Json pipes = Json::array();
    for (const auto& p : t.result->plan.pipelines) {
      Json stages = Json::array();
      for (const auto& st : p.stages) {
        stages.push_back(Json{{"device_type", st.device_type},
                              {"devices", st.devices.size()},
                              {"tp", st.tp},
                              {"dp", st.dp},
                              {"first_unit", st.first_unit},
                              {"last_unit", st.last_unit},
                              {"recompute", st.recompute.names()}});
      }
      pipes.push_back(Json{{"micro_batch_size", p.micro_batch_size},
                           {"local_batch", p.local_batch},
                           {"stages", stages}});
    }
    rows.push_back(Json{{"method", std::string(plan_method_name(m))},
                        {"model", model_name},
                        {"cluster", cluster},
                        {"gbs", gbs},
                        {"layers", model.layers},
                        {"iteration_ms", ms(t)},
                        {"pipelines", pipes}});
  }
  return rows;
}

void print_table3(const Json& rows) {
  std::printf("== Table 3: plans in the appendix's layout (units: 0 = embedding, last = head)\n");
  for (const Json& r : rows) {
    std::printf("-- %s: %s on %s, gbs %lld, predicted %.1f ms\n",
                r["method"].get<std::string>().c_str(), r["model"].get<std::string>().c_str(),
                r["cluster"].get<std::string>().c_str(),
                static_cast<long long>(r["gbs"].get<std::int64_t>()),
                r["iteration_ms"].get<double>());
    Json flat = Json::array();
    std::int64_t index = 0;
    for (const Json& p : r["pipelines"]) {
      for (std::size_t s = 0; s < p["stages"].size(); ++s) {
        Json st = p["stages"][s];
        st["pipeline"] = s == 0 ? Json(index) : Json(nullptr);
        st["mbs/B"] = s == 0 ? Json(std::to_string(p["micro_batch_size"].get<std::int64_t>()) +
                                    "/" + std::to_string(p["local_batch"].get<std::int64_t>()))
                             : Json(nullptr);
        st["stage"] = s;
        st["units"] = std::to_string(st["first_unit"].get<std::int64_t>()) + "-" +
                      std::to_string(st["last_unit"].get<std::int64_t>());
        std::string rc;
        for (const auto& n : st["recompute"]) rc += (rc.empty() ? "" : "+") + n.get<std::string>();
        st["recompute_text"] = rc.empty() ? "None" : rc;
        flat.push_back(st);
      }
      ++index;
    }
    bench::print_rows(flat, {{"pipeline", "pipeline"},
                             {"mbs/B", "mbs/B"},
                             {"stage", "stage"},
                             {"dev", "device_type"},
                             {"x", "devices"},
                             {"tp", "tp"},
                             {"dp", "dp"},
                             {"units", "units"},
                             {"recompute", "recompute_text"}});
  }
  std::printf("\n");
}

}  // namespace eth::bench
