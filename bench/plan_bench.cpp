// plan_bench: the planner's figures. For every paper scenario (Table 2's six models on their
// 910B2/910B4 and A100/RTX3090 cluster presets) the search time and the predicted iteration time
// of eth, layer and uniform with speedups, eth's fraction of the ideal bound, and the max/min
// device latency of layer (real and unlimited memory) and eth (Fig. 3, 9, 10 breakdown); the
// search ablation (Fig. 13a), alpha sensitivity (Fig. 13b), 13B scalability in devices, global
// batch and sequence length (Fig. 11a-c), eth against its pure family (TypeSplit-HPP, Fig. 11d),
// memory with and without operator-level recompute (Fig. 12a), the 13B plans in Table 3's
// layout, and eth on Metis's own inputs beside Metis's recorded figures (bench/data/). Also
// clusters that are not Table 2's symmetric shapes (`uneven`), and the Llama presets
// (`llama`). Everything is predicted (analytic
// or Metis profiles) except the search times, which are measured on this machine.
// Usage: plan_bench [SECTION ...|all] [--quick] [--format text|json] [--data DIR]
// (sections: scenarios uneven ablation alpha scale metis pure memory table3 llama sharding).
// --quick: a few small cases per section (the evaluation's field test). Asserts nothing.
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_json.h"
#include "cluster/cluster_spec.h"
#include "core/error.h"
#include "model/model_spec.h"
#include "profile/analytic.h"
#include "profile/metis_format.h"
#include "search/planner.h"
#include "plan_bench_sharding.h"

namespace {

using namespace eth;
namespace fs = std::filesystem;
using bench::Column;

struct Options {
  bool quick = false;
  fs::path data;  // bench/data: Metis's inputs and recorded figures
};

// Wall and process CPU seconds of one call (the machine is shared: CPU time is the stable one).
struct Timed {
  std::optional<PlannerResult> result;
  std::string error;
  double wall_s = 0, cpu_s = 0;
};

Timed timed_plan(PlanMethod m, const ModelSpec& model, const ClusterSpec& c, const ProfileDb& db,
                 std::int64_t gbs, std::int64_t seq, const PlannerOptions& o) {
  Timed t;
  const auto w0 = std::chrono::steady_clock::now();
  const std::clock_t c0 = std::clock();
  try {
    t.result = plan_training(m, model, c, db, gbs, seq, o);
  } catch (const InputError& e) {
    t.error = e.what();
  }
  t.cpu_s = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
  t.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  return t;
}

ProfileDb analytic_for(const ModelSpec& m, const ClusterSpec& c, std::int64_t seq) {
  std::vector<std::int64_t> tps;
  for (std::int64_t t : {1, 2, 4, 8}) {
    if (m.heads % t == 0 && m.ffn % t == 0) tps.push_back(t);
  }
  return analytic_profile_db(m, c, tps, {1, 2, 4, 8, 16}, seq);
}

// A device's busy time in the iteration: forward + backward of all its micro-batches.
double stage_busy_ms(const PipelinePrediction& p, const StagePrediction& st) {
  const auto k = static_cast<double>(p.num_microbatches);
  return (k - 1) * (st.forward_ms + st.backward_ms) + st.last_forward_ms + st.last_backward_ms;
}

// One method's plan as the figures read it. Numbers are null when no plan fits (`error` says
// why). busy_ms: mean device busy time (the rest of pipeline_ms is bubble and imbalance);
// latency_ratio: the slowest device's busy time over the fastest's (the paper's Fig. 3).
Json method_json(const Timed& t) {
  Json j{{"fits", t.result.has_value()}, {"error", t.error},
         {"iteration_ms", nullptr},      {"pipeline_ms", nullptr},
         {"busy_ms", nullptr},           {"sync_exposed_ms", nullptr},
         {"optimizer_ms", nullptr},      {"ideal_ms", nullptr},
         {"latency_ratio", nullptr},     {"pipelines", nullptr},
         {"family", nullptr},            {"idle_devices", nullptr},
         {"search_wall_s", t.wall_s},    {"search_cpu_s", t.cpu_s},
         {"candidates", nullptr},        {"evaluated", nullptr}};
  if (!t.result) return j;
  const PlannerResult& r = *t.result;
  const Prediction& pr = r.prediction;
  double busy = 0, lo = 1e300, hi = 0, devices = 0;
  for (const auto& p : pr.pipelines) {
    for (const auto& st : p.stages) {
      const double b = stage_busy_ms(p, st);
      const auto n = static_cast<double>(st.tp * st.dp);
      busy += b * n;
      devices += n;
      lo = std::min(lo, b);
      hi = std::max(hi, b);
    }
  }
  j["iteration_ms"] = pr.iteration_ms;
  j["pipeline_ms"] = pr.pipeline_ms;
  j["busy_ms"] = busy / devices;
  j["sync_exposed_ms"] = pr.sync.exposed_ms;
  j["optimizer_ms"] = pr.optimizer_ms;
  j["ideal_ms"] = pr.ideal_iteration_ms;
  j["latency_ratio"] = hi / lo;
  j["pipelines"] = r.plan.pipelines.size();
  j["family"] = r.family;
  j["idle_devices"] = r.idle_devices;
  j["candidates"] = r.stats.generated;
  j["evaluated"] = r.stats.evaluated;
  return j;
}

double ms(const Timed& t) { return t.result ? t.result->prediction.iteration_ms : 0.0; }

struct Scenario {
  std::string model, cluster, family;
  std::int64_t gbs;
};

// Table 2's models on their cluster shapes. Global batch: 512 up to 6.7B, 1024 for 13B and 70B
// (the Metis inputs use the same sizes for 6.7B, 13B and 70B).
std::vector<Scenario> paper_scenarios(const Options& o, const std::vector<std::string>& families) {
  std::vector<Scenario> out;
  std::vector<std::string> tags = {"350m", "1.3b", "2.6b", "6.7b", "13b", "70b"};
  if (o.quick) tags = {"350m"};
  for (const auto& family : families) {
    for (const auto& t : tags) {
      out.push_back({"gpt3-" + t, t + "-" + family, family, t == "13b" || t == "70b" ? 1024 : 512});
    }
  }
  return out;
}

// The same cluster with every device type's memory made unlimited (the paper's Fig. 3
// "Unlimited Memory" setting).
ClusterSpec unlimited_memory(ClusterSpec c) {
  for (auto& [name, type] : c.device_types) type.memory_gb = 1e9;
  return c;
}

// Memory-bound, as this bench decides it (after the paper's Fig. 3, which compares layer
// balancing with and without the memory limit): the layer baseline's best plan is at least
// kMemoryBoundGap slower with the real memory than with unlimited memory, i.e. memory, not the
// compute balance, is what limits one replicated layer-balanced shape.
constexpr double kMemoryBoundGap = 1.10;

Json run_scenarios(const Options& opt) {
  Json rows = Json::array();
  for (const Scenario& s : paper_scenarios(opt, {"910b2-910b4", "a100-rtx3090"})) {
    const ModelSpec model = model_preset(s.model);
    const ClusterSpec c = load_cluster(s.cluster);
    const ProfileDb db = analytic_for(model, c, model.seq_len);
    PlannerOptions mo;
    mo.layer_operator_recompute = true;
    const std::int64_t seq = model.seq_len;
    const Timed eth = timed_plan(PlanMethod::Eth, model, c, db, s.gbs, seq, {});
    const Timed layer = timed_plan(PlanMethod::Layer, model, c, db, s.gbs, seq, {});
    const Timed layer_mo = timed_plan(PlanMethod::Layer, model, c, db, s.gbs, seq, mo);
    const Timed uni = timed_plan(PlanMethod::Uniform, model, c, db, s.gbs, seq, {});
    const Timed free =
        timed_plan(PlanMethod::Layer, model, unlimited_memory(c), db, s.gbs, seq, {});
    Json row{{"model", s.model}, {"cluster", s.cluster},   {"cluster_family", s.family},
             {"devices", c.num_devices()}, {"gbs", s.gbs}};
    row["methods"] = Json{{"eth", method_json(eth)},
                          {"layer", method_json(layer)},
                          {"layer_mo", method_json(layer_mo)},
                          {"uniform", method_json(uni)},
                          {"layer_unlimited", method_json(free)}};
    const bool gap_known = layer.result && free.result;
    row["memory_gap"] = gap_known ? Json(ms(layer) / ms(free)) : Json(nullptr);
    row["memory_bound"] = gap_known && ms(layer) / ms(free) >= kMemoryBoundGap;
    const std::pair<const char*, const Timed*> others[] = {
        {"x_layer", &layer}, {"x_layer_mo", &layer_mo}, {"x_uniform", &uni}};
    for (const auto& [key, t] : others) {
      row[key] = eth.result && t->result ? Json(ms(*t) / ms(eth)) : Json(nullptr);
    }
    // eth's fraction of the ideal = compute efficiency x pipeline utilization x tail.
    if (eth.result) {
      const Json& e = row["methods"]["eth"];
      const double n = static_cast<double>(c.num_devices());
      const double busy_total = e["busy_ms"].get<double>() *
                                static_cast<double>(c.num_devices() - eth.result->idle_devices);
      row["efficiency"] = e["ideal_ms"].get<double>() * n / busy_total;
      row["utilization"] = busy_total / (n * e["pipeline_ms"].get<double>());
      row["tail"] = e["pipeline_ms"].get<double>() / e["iteration_ms"].get<double>();
      row["of_ideal"] = e["ideal_ms"].get<double>() / e["iteration_ms"].get<double>();
    }
    rows.push_back(row);
  }
  return rows;
}

void print_scenarios(const Json& rows) {
  std::printf(
      "== Paper scenarios (analytic profile, default options: alpha 0, all optimizations)\n");
  bench::print_rows(rows, {{"cluster", "cluster"},
                           {"devs", "devices"},
                           {"gbs", "gbs"},
                           {"search s", "methods.eth.search_wall_s"},
                           {"cpu s", "methods.eth.search_cpu_s"},
                           {"cands", "methods.eth.candidates"},
                           {"eth ms", "methods.eth.iteration_ms", "%.1f"},
                           {"layer ms", "methods.layer.iteration_ms", "%.1f"},
                           {"layerMO", "methods.layer_mo.iteration_ms", "%.1f"},
                           {"unif ms", "methods.uniform.iteration_ms", "%.1f"},
                           {"x lay", "x_layer"},
                           {"x lMO", "x_layer_mo"},
                           {"x unif", "x_uniform"},
                           {"ideal", "of_ideal"},
                           {"mem-bound", "memory_bound"},
                           {"gap", "memory_gap", "%.2f"},
                           {"pip", "methods.eth.pipelines"},
                           {"max/min lat eth", "methods.eth.latency_ratio", "%.2f"},
                           {"layer", "methods.layer.latency_ratio", "%.2f"},
                           {"layer unl. mem", "methods.layer_unlimited.latency_ratio", "%.2f"}});
  std::printf(
      "(x lay / x lMO / x unif: that method's iteration time over eth's; layer = Metis/HexiScale "
      "style, no or full recompute per stage; layerMO = layer given eth's operator-level "
      "recompute; ideal: ideal bound over eth's iteration time)\n"
      "(mem-bound: the layer baseline is >= %.2fx slower with the real memory than with "
      "unlimited memory (gap); max/min lat: slowest over fastest device busy time, paper Fig. 3)\n"
      "-- eth's fraction of the ideal bound = compute efficiency (tp, micro-batch size, recompute, "
      "tp communication) x pipeline utilization (fill/drain, imbalance) x tail (exposed sync, "
      "optimizer)\n",
      kMemoryBoundGap);
  bench::print_rows(rows, {{"cluster", "cluster"},
                           {"of ideal", "of_ideal"},
                           {"efficiency", "efficiency"},
                           {"utilization", "utilization"},
                           {"tail", "tail"}});
  std::printf("\n");
}

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

Json run_metis(const Options& opt) {
  Json recorded;
  {
    const fs::path f = opt.data / "metis-recorded.json";
    std::ifstream in(f);
    if (!in) throw InputError("plan_bench", f.string(), "", "cannot open (see --data)");
    recorded = Json::parse(in);
  }
  Json rows = Json::array();
  for (const Json& m : recorded["runs"]) {
    if (opt.quick && !rows.empty()) break;
    const fs::path dir = opt.data / "metis-inputs" / m["inputs"].get<std::string>();
    const ModelSpec model = model_preset(m["model"].get<std::string>());
    const ClusterSpec c = read_metis_cluster(dir / "hostfile", dir / "clusterfile.json");
    const ProfileDb db = read_metis_profile_dir(dir / "profile", model, &c);
    const std::int64_t gbs = m["gbs"];
    rows.push_back(Json{
        {"inputs", m["inputs"]},
        {"model", m["model"]},
        {"cluster", m["cluster"]},
        {"devices", c.num_devices()},
        {"gbs", gbs},
        {"methods",
         Json{{"eth", method_json(timed_plan(PlanMethod::Eth, model, c, db, gbs, model.seq_len,
                                             {}))},
              {"layer", method_json(timed_plan(PlanMethod::Layer, model, c, db, gbs,
                                               model.seq_len, {}))}}},
        {"metis_search_s", m["search_s"]},
        {"metis_search_over_s", m["search_over_s"]},
        {"metis_candidates", m["candidates"]},
        {"metis_best_ms", m["best_ms"]},
        {"metis_source", recorded["source"]}});
  }
  return rows;
}

void print_metis(const Json& rows) {
  std::printf("== Metis's inputs (bench/data/metis-inputs): eth beside Metis's recorded figures\n");
  std::printf(
      "(Metis figures from bench/data/metis-recorded.json: its own cost estimate, and some of its "
      "picks do not fit one device's memory; eth's are the predictor's, every device fits; "
      "Metis search '-': stopped at its limit)\n");
  bench::print_rows(rows, {{"inputs", "inputs"},
                           {"gbs", "gbs"},
                           {"search s", "methods.eth.search_wall_s"},
                           {"cpu s", "methods.eth.search_cpu_s"},
                           {"cands", "methods.eth.candidates"},
                           {"metis s", "metis_search_s", "%.1f"},
                           {"eth ms", "methods.eth.iteration_ms", "%.1f"},
                           {"metis ms", "metis_best_ms", "%.1f"},
                           {"layer ms", "methods.layer.iteration_ms", "%.1f"},
                           {"ideal ms", "methods.eth.ideal_ms", "%.1f"}});
  std::printf("\n");
}

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

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  opt.data = ETH_BENCH_DATA_DIR;
  bool json = false;
  std::vector<std::string> wanted;
  const std::string usage =
      "usage: plan_bench [scenarios|uneven|ablation|alpha|scale|metis|pure|memory|table3|llama|"
      "sharding|all ...]"
      " [--quick] [--format text|json] [--data DIR]\n";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--data" && i + 1 < argc) {
      opt.data = argv[++i];
    } else if (a == "--format" && i + 1 < argc) {
      const std::string f = argv[++i];
      if (f != "json" && f != "text") {
        std::fprintf(stderr, "%s", usage.c_str());
        return 1;
      }
      json = f == "json";
    } else if (a == "--quick") {
      opt.quick = true;
    } else {
      wanted.push_back(a);
    }
  }
  if (wanted.empty()) wanted.push_back("all");
  struct Section {
    const char* name;
    std::function<Json(const Options&)> run;
    std::function<void(const Json&)> print;
  };
  const std::vector<Section> sections = {
      {"scenarios", run_scenarios, print_scenarios}, {"uneven", run_uneven, print_uneven},
      {"ablation", run_ablation, print_ablation},    {"alpha", run_alpha, print_alpha},
      {"scale", run_scale, print_scale},             {"metis", run_metis, print_metis},
      {"pure", run_pure, print_pure},                {"memory", run_memory, print_memory},
      {"table3", run_table3, print_table3},          {"llama", run_llama, print_llama},
      {"sharding", [](const Options& o) { return bench::run_sharding(o.quick); },
       bench::print_sharding}};
  for (const auto& w : wanted) {
    bool known = w == "all";
    for (const auto& s : sections) known = known || w == s.name;
    if (!known) {
      std::fprintf(stderr, "%s", usage.c_str());
      return 1;
    }
  }
  Json doc{{"bench", "plan_bench"}, {"quick", opt.quick}, {"machine", bench::machine_info()}};
  if (!json) std::printf("%s\n\n", bench::machine_line(doc["machine"]).c_str());
  try {
    for (const auto& s : sections) {
      bool run = false;
      for (const auto& w : wanted) run = run || w == "all" || w == s.name;
      if (!run) continue;
      doc[s.name] = s.run(opt);
      if (!json) {
        s.print(doc[s.name]);
        std::fflush(stdout);
      }
    }
  } catch (const InputError& e) {
    std::fprintf(stderr, "plan_bench: %s\n", e.what());
    return 2;
  }
  doc["machine_after"] = bench::machine_info();
  if (json) std::printf("%s\n", doc.dump(1).c_str());
  return 0;
}
