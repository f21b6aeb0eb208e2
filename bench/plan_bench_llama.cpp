// plan_bench's "llama" section: eth on the Llama presets, with the fullest stage's predicted peak
// memory against its device's.
#include "plan_bench.h"

#include <cstdio>
#include <string>
#include <vector>

namespace eth::bench {

// The Llama presets (issue 25) on the clusters of docs/planner.md's Llama table: eth's search
// time, predicted iteration, and the fullest stage's predicted peak memory against its device.
Json run_llama(const Options& opt) {
  struct Case {
    const char *model, *cluster;
    std::int64_t gbs;
  };
  std::vector<Case> cases = {{"llama3-70b", "70b-910b2-910b4", 512},
                             {"llama3-70b", "70b-a100-rtx3090", 512},
                             {"llama2-7b", "6.7b-a100-rtx3090", 128},
                             {"llama2-7b", "350m-a100-rtx3090", 32}};
  if (opt.quick) cases.resize(1);
  Json rows = Json::array();
  for (const Case& k : cases) {
    const ModelSpec model = model_preset(k.model);
    const ClusterSpec c = load_cluster(k.cluster);
    const ProfileDb db = analytic_for(model, c, model.seq_len);
    const Timed eth = timed_plan(PlanMethod::Eth, model, c, db, k.gbs, model.seq_len, {});
    Json row{{"model", k.model}, {"cluster", k.cluster}, {"devices", c.num_devices()},
             {"gbs", k.gbs}, {"eth", method_json(eth)}, {"fullest_stage_gb", nullptr},
             {"fullest_of_capacity", nullptr}};
    if (eth.result) {
      double most = 0, ratio = 0;
      for (const auto& p : eth.result->plan.pipelines) {
        for (const auto& st : p.stages) {
          const double bytes = st.predicted_peak_memory_bytes.value_or(0.0);
          const double r = bytes / c.type(st.device_type).memory_bytes();
          if (r > ratio) {
            ratio = r;
            most = bytes;
          }
        }
      }
      row["fullest_stage_gb"] = most / 1e9;
      row["fullest_of_capacity"] = ratio;
    }
    rows.push_back(row);
  }
  return rows;
}

void print_llama(const Json& rows) {
  std::printf("== Llama presets (analytic profile, default options)\n");
  bench::print_rows(rows, {{"model", "model"},
                           {"cluster", "cluster"},
                           {"devs", "devices"},
                           {"gbs", "gbs"},
                           {"search s", "eth.search_wall_s"},
                           {"cpu s", "eth.search_cpu_s"},
                           {"eth ms", "eth.iteration_ms", "%.1f"},
                           {"pip", "eth.pipelines"},
                           {"fullest GB", "fullest_stage_gb", "%.1f"},
                           {"of cap", "fullest_of_capacity", "%.2f"}});
  std::printf("(fullest: the stage whose predicted peak is the largest share of its device's "
              "memory)\n\n");
}

}  // namespace eth::bench
