// plan_bench's "memory" section: per device type, the peak memory of eth's plan with and without
// its operator-level recompute (Fig. 12a).
#include "plan_bench.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace eth::bench {

// Per device type, the largest predicted peak of eth's plan, and of the same plan with its
// operator-level recompute sets removed (stages on full-unit recompute keep it: that is the
// baselines' fallback too): what operator-level recompute (the paper's MO) saves (Fig. 12a).
Json run_memory(const Options& opt) {
  Json rows = Json::array();
  for (const Scenario& s : paper_scenarios(opt, {"a100-rtx3090"})) {
    const ModelSpec model = model_preset(s.model);
    const ClusterSpec c = load_cluster(s.cluster);
    const ProfileDb db = analytic_for(model, c, model.seq_len);
    const Timed eth = timed_plan(PlanMethod::Eth, model, c, db, s.gbs, model.seq_len, {});
    if (!eth.result) continue;
    Plan bare = eth.result->plan;
    std::int64_t mo_stages = 0;
    for (auto& p : bare.pipelines) {
      for (auto& st : p.stages) {
        if (st.recompute.empty() || st.recompute.full_unit()) continue;
        st.recompute = RecomputeSet{};
        ++mo_stages;
      }
    }
    const Prediction with = predict(eth.result->plan, c, db);
    const Prediction without = predict(bare, c, db);
    for (const auto& [type_name, type] : c.device_types) {
      double peak_with = 0, peak_without = 0;
      bool used = false;
      for (std::size_t d = 0; d < with.devices.size(); ++d) {
        if (c.device(with.devices[d].device).device_type != type_name) continue;
        used = true;
        peak_with = std::max(peak_with, with.devices[d].peak_bytes);
        peak_without = std::max(peak_without, without.devices[d].peak_bytes);
      }
      if (!used) continue;
      rows.push_back(Json{{"model", s.model},
                          {"cluster", s.cluster},
                          {"device_type", type_name},
                          {"capacity_gb", type.memory_gb},
                          {"with_mo_gb", peak_with / 1e9},
                          {"without_mo_gb", peak_without / 1e9},
                          {"fits_without_mo", peak_without <= type.memory_gb * 1e9},
                          {"operator_recompute_stages", mo_stages},
                          {"iteration_ms", with.iteration_ms}});
    }
  }
  return rows;
}

void print_memory(const Json& rows) {
  std::printf("== Peak memory per device type, eth's plan with and without its operator-level "
              "recompute (MO), Fig. 12a\n");
  bench::print_rows(rows, {{"cluster", "cluster"},
                           {"type", "device_type"},
                           {"capacity GB", "capacity_gb", "%.0f"},
                           {"with MO GB", "with_mo_gb", "%.2f"},
                           {"w/o MO GB", "without_mo_gb", "%.2f"},
                           {"fits w/o MO", "fits_without_mo"},
                           {"MO stages", "operator_recompute_stages"}});
  std::printf("\n");
}

}  // namespace eth::bench
