// plan_bench's "ablation" section: the search's optimizations (CPC, SES, OSO, DPO) added one at a
// time, search time and plan quality (Fig. 13a).
#include "plan_bench.h"

#include <cstdio>
#include <string>
#include <vector>

namespace eth::bench {

namespace {

struct Variant {
  const char* name;
  bool cpc, ses, oso, dpo;
};

void ablation_on(const char* model_name, const char* cluster, std::int64_t gbs,
                 const std::vector<Variant>& variants, Json& rows) {
  const ModelSpec model = model_preset(model_name);
  const ClusterSpec c = load_cluster(cluster);
  const ProfileDb db = analytic_for(model, c, model.seq_len);
  double reference = 0;
  for (const Variant& v : variants) {
    PlannerOptions o;
    o.cpc = v.cpc;
    o.ses = v.ses;
    o.oso = v.oso;
    o.dpo = v.dpo;
    o.max_enumerated_splits = 1e12;  // the enumeration really enumerates here
    const Timed t = timed_plan(PlanMethod::Eth, model, c, db, gbs, model.seq_len, o);
    if (!t.result) continue;
    const auto& st = t.result->stats;
    if (reference == 0) reference = t.result->best_objective_ms;
    rows.push_back(Json{{"model", model_name},
                        {"cluster", cluster},
                        {"gbs", gbs},
                        {"variant", v.name},
                        {"cpc", v.cpc},
                        {"ses", v.ses},
                        {"oso", v.oso},
                        {"dpo", v.dpo},
                        {"search_wall_s", t.wall_s},
                        {"search_cpu_s", t.cpu_s},
                        {"candidates", st.generated},
                        {"evaluated", st.evaluated},
                        {"unit_splits", st.unit_splits},
                        {"cache_hits", st.cache_hits},
                        {"objective_ms", t.result->best_objective_ms},
                        {"quality", reference / t.result->best_objective_ms}});
  }
}

}  // namespace

Json run_ablation(const Options& opt) {
  Json rows = Json::array();
  const std::vector<Variant> full = {{"none (enumerate)", false, false, false, false},
                                     {"+CPC", true, false, false, false},
                                     {"+CPC+SES", true, true, false, false},
                                     {"+CPC+SES+OSO", true, true, true, false},
                                     {"+CPC+SES+OSO+DPO (eth)", true, true, true, true}};
  ablation_on("gpt3-350m", "350m-a100-rtx3090", 512, full, rows);
  if (opt.quick) return rows;
  ablation_on("gpt3-1.3b", "1.3b-910b2-910b4", 512, full, rows);
  // Enumeration is out of reach for deep pipelines of a 42-unit model: the same steps on DPO.
  const std::vector<Variant> dp = {{"DPO", false, false, false, true},
                                   {"DPO+CPC", true, false, false, true},
                                   {"DPO+CPC+SES", true, true, false, true},
                                   {"DPO+CPC+SES+OSO (eth)", true, true, true, true}};
  ablation_on("gpt3-13b", "13b-910b2-910b4", 1024, dp, rows);
  return rows;
}

void print_ablation(const Json& rows) {
  std::printf("== Search ablation (Fig. 13a): optimizations added one at a time, alpha 0\n");
  std::printf("(quality: the first row's best objective over this row's; 1 = the same plan)\n");
  bench::print_rows(rows, {{"model", "model"},
                           {"variant", "variant"},
                           {"search s", "search_wall_s"},
                           {"cpu s", "search_cpu_s"},
                           {"cands", "candidates"},
                           {"evaluated", "evaluated"},
                           {"splits", "unit_splits"},
                           {"cache hits", "cache_hits"},
                           {"objective ms", "objective_ms", "%.1f"},
                           {"quality", "quality", "%.4f"}});
  std::printf("\n");
}

}  // namespace eth::bench
