// plan_bench: the planner's figures. For every paper scenario (Table 2's six models on their
// 910B2/910B4 and A100/RTX3090 cluster presets) the search time and the predicted iteration time
// of eth, layer and uniform with speedups and eth's fraction of the ideal bound; the search
// ablation (Fig. 13a), alpha sensitivity (Fig. 13b), 13B scalability in devices, global batch and
// sequence length (Fig. 11), and eth on Metis's own inputs beside Metis's recorded figures.
// Also clusters that are not Table 2's symmetric shapes (`uneven`). The scenarios table also
// prints layer with eth's operator-level recompute (layerMO), which scenarios are memory-bound
// (kMemoryBoundGap: layer with the real memory vs unlimited memory, as in the paper's Fig. 3),
// and eth's fraction of the ideal bound split into compute efficiency x pipeline utilization x
// tail.
// Usage: plan_bench [scenarios|uneven|ablation|alpha|scale|metis|all] [--shared DIR]. Asserts
// nothing.
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cluster/cluster_spec.h"
#include "core/error.h"
#include "model/model_spec.h"
#include "profile/analytic.h"
#include "profile/metis_format.h"
#include "search/planner.h"

namespace {

using namespace eth;

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

double ms(const Timed& t) { return t.result ? t.result->prediction.iteration_ms : 0.0; }

struct Scenario {
  const char* model;
  const char* cluster_tag;
  std::int64_t gbs;
};

// Table 2's models on their cluster shapes. Global batch: 512 up to 6.7B, 1024 for 13B and 70B
// (the Metis inputs use the same sizes for 6.7B, 13B and 70B).
std::vector<Scenario> paper_scenarios() {
  std::vector<Scenario> out;
  const std::pair<const char*, const char*> models[] = {
      {"gpt3-350m", "350m"}, {"gpt3-1.3b", "1.3b"}, {"gpt3-2.6b", "2.6b"},
      {"gpt3-6.7b", "6.7b"}, {"gpt3-13b", "13b"},   {"gpt3-70b", "70b"}};
  for (const char* pair : {"910b2-910b4", "a100-rtx3090"}) {
    for (const auto& [model, tag] : models) {
      const std::string t(tag);
      out.push_back({model, nullptr, t == "13b" || t == "70b" ? 1024 : 512});
      out.back().cluster_tag = pair;
    }
  }
  return out;
}

std::string cluster_name(const Scenario& s) {
  std::string m(s.model);
  return m.substr(std::string("gpt3-").size()) + "-" + s.cluster_tag;
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

struct MemoryVerdict {
  double layer_unlimited_ms = 0;
  double gap = 0;  // layer ms / layer ms with unlimited memory
  bool bound = false;
};

MemoryVerdict memory_verdict(const ModelSpec& model, const ClusterSpec& c, const ProfileDb& db,
                             std::int64_t gbs, double layer_ms) {
  MemoryVerdict v;
  const Timed free = timed_plan(PlanMethod::Layer, model, unlimited_memory(c), db, gbs,
                                model.seq_len, PlannerOptions{});
  if (!free.result || layer_ms <= 0) return v;
  v.layer_unlimited_ms = ms(free);
  v.gap = layer_ms / v.layer_unlimited_ms;
  v.bound = v.gap >= kMemoryBoundGap;
  return v;
}

// Where eth's plan loses against the ideal bound, as three factors whose product is
// ideal / iteration: compute efficiency (ideal device-time over the plan's busy device-time:
// tp, micro-batch size, recompute, tp communication), pipeline utilization (busy device-time
// over devices x pipeline time: fill and drain, stage and pipeline imbalance, idle devices),
// and the tail (pipeline time over iteration time: exposed gradient sync, optimizer step).
struct LossSplit {
  double efficiency = 0, utilization = 0, tail = 0;
};

LossSplit loss_split(const Prediction& pr, std::int64_t num_devices) {
  double busy = 0;  // device-ms of forward + backward
  for (const auto& p : pr.pipelines) {
    const auto k = static_cast<double>(p.num_microbatches);
    for (const auto& st : p.stages) {
      const double per_device = (k - 1) * (st.forward_ms + st.backward_ms) +
                                st.last_forward_ms + st.last_backward_ms;
      busy += per_device * static_cast<double>(st.tp * st.dp);
    }
  }
  LossSplit l;
  const auto n = static_cast<double>(num_devices);
  l.efficiency = pr.ideal_iteration_ms * n / busy;
  l.utilization = busy / (n * pr.pipeline_ms);
  l.tail = pr.pipeline_ms / pr.iteration_ms;
  return l;
}

void run_scenarios() {
  std::printf(
      "== Paper scenarios (analytic profile, default options: alpha 0, all optimizations)\n");
  std::printf("%-20s %4s %4s %8s %8s %7s %9s %9s %9s %9s %6s %6s %6s %6s %5s %4s\n", "cluster",
              "devs", "gbs", "search s", "cpu s", "cands", "eth ms", "layer ms", "layerMO",
              "unif ms", "x lay", "x lMO", "x unif", "ideal", "mem", "pip");
  double min_bound = 1e9, max_bound = 0, min_all = 1e9;
  std::vector<std::string> losses;
  for (const Scenario& s : paper_scenarios()) {
    const ModelSpec model = model_preset(s.model);
    const ClusterSpec c = load_cluster(cluster_name(s));
    const ProfileDb db = analytic_for(model, c, model.seq_len);
    const PlannerOptions o;
    PlannerOptions mo;
    mo.layer_operator_recompute = true;
    const Timed eth = timed_plan(PlanMethod::Eth, model, c, db, s.gbs, model.seq_len, o);
    const Timed layer = timed_plan(PlanMethod::Layer, model, c, db, s.gbs, model.seq_len, o);
    const Timed layer_mo = timed_plan(PlanMethod::Layer, model, c, db, s.gbs, model.seq_len, mo);
    const Timed uni = timed_plan(PlanMethod::Uniform, model, c, db, s.gbs, model.seq_len, o);
    if (!eth.result) {
      std::printf("%-20s eth: %s\n", cluster_name(s).c_str(), eth.error.c_str());
      continue;
    }
    const auto& pr = eth.result->prediction;
    auto ratio = [&](const Timed& t) { return t.result ? ms(t) / ms(eth) : 0.0; };
    const MemoryVerdict mv = memory_verdict(model, c, db, s.gbs, ms(layer));
    if (layer.result) {
      min_all = std::min(min_all, ratio(layer));
      if (mv.bound) {
        min_bound = std::min(min_bound, ratio(layer));
        max_bound = std::max(max_bound, ratio(layer));
      }
    }
    const LossSplit l = loss_split(pr, c.num_devices());
    char line[160];
    std::snprintf(line, sizeof line, "%-20s %6.3f = %6.3f x %6.3f x %6.3f", cluster_name(s).c_str(),
                  pr.ideal_iteration_ms / pr.iteration_ms, l.efficiency, l.utilization, l.tail);
    losses.push_back(line);
    char mem[16];
    std::snprintf(mem, sizeof mem, "%s%.2f", mv.bound ? "Y" : "n", mv.gap);
    std::printf(
        "%-20s %4lld %4lld %8.3f %8.3f %7lld %9.1f %9.1f %9.1f %9.1f %6.3f %6.3f %6.3f %6.3f %5s "
        "%4zu\n",
        cluster_name(s).c_str(), static_cast<long long>(c.num_devices()),
        static_cast<long long>(s.gbs), eth.wall_s, eth.cpu_s,
        static_cast<long long>(eth.result->stats.generated), ms(eth), ms(layer), ms(layer_mo),
        ms(uni), ratio(layer), ratio(layer_mo), ratio(uni), pr.ideal_iteration_ms / pr.iteration_ms,
        mem, eth.result->plan.pipelines.size());
  }
  std::printf(
      "(x lay / x lMO / x unif: that method's iteration time over eth's; layer = Metis/HexiScale "
      "style, no or full recompute per stage; layerMO = layer given eth's operator-level "
      "recompute; ideal: ideal bound over eth's iteration time; 0 = no plan fits)\n"
      "(mem: Y = memory-bound, the layer baseline is >= %.2fx slower with the real memory than "
      "with unlimited memory (the gap printed); paper Fig. 3's comparison)\n",
      kMemoryBoundGap);
  if (max_bound > 0) {
    std::printf("eth over layer: %.3fx..%.3fx on the memory-bound scenarios; never below %.3fx\n",
                min_bound, max_bound, min_all);
  } else {
    std::printf(
        "eth over layer: no scenario is memory-bound by this criterion; never below %.3fx\n",
        min_all);
  }
  std::printf(
      "-- eth's fraction of the ideal bound = compute efficiency (tp, micro-batch size, recompute, "
      "tp communication) x pipeline utilization (fill/drain, imbalance) x tail (exposed sync, "
      "optimizer)\n");
  for (const auto& l : losses) std::printf("%s\n", l.c_str());
  std::printf("\n");
}

// Clusters that are not Table 2's N x M + N x M: uneven type counts, odd node sizes, three
// types. One replicated pipeline shape (layer) fits these badly; HPP does not need one.
void run_uneven() {
  std::printf("== Uneven clusters (not in the paper's Table 2)\n");
  struct Case {
    const char* name;
    const char* model;
    std::int64_t gbs;
    const char* nodes;
  };
  const Case cases[] = {
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
  std::printf("%-36s %9s %9s %10s %10s %10s %7s %7s %6s\n", "cluster", "search s", "cpu s",
              "eth ms", "layer ms", "uniform ms", "x layer", "x unif", "ideal");
  for (const Case& k : cases) {
    const ModelSpec model = model_preset(k.model);
    const Json j = Json::parse(std::string("{\"nodes\": ") + k.nodes + "}");
    const ClusterSpec c = parse_cluster(JsonCursor(j, JsonOrigin{"cluster", "bench", ""}));
    const ProfileDb db = analytic_for(model, c, model.seq_len);
    const Timed eth = timed_plan(PlanMethod::Eth, model, c, db, k.gbs, model.seq_len, {});
    const Timed layer = timed_plan(PlanMethod::Layer, model, c, db, k.gbs, model.seq_len, {});
    const Timed uni = timed_plan(PlanMethod::Uniform, model, c, db, k.gbs, model.seq_len, {});
    if (!eth.result) {
      std::printf("%-36s eth: %s\n", k.name, eth.error.c_str());
      continue;
    }
    auto ratio = [&](const Timed& t) { return t.result ? ms(t) / ms(eth) : 0.0; };
    const auto& pr = eth.result->prediction;
    std::printf("%-36s %9.3f %9.3f %10.1f %10.1f %10.1f %7.3f %7.3f %6.3f\n", k.name, eth.wall_s,
                eth.cpu_s, ms(eth), ms(layer), ms(uni), ratio(layer), ratio(uni),
                pr.ideal_iteration_ms / pr.iteration_ms);
  }
  std::printf("\n");
}

struct Variant {
  const char* name;
  bool cpc, ses, oso, dpo;
};

void ablation_on(const char* model_name, const char* cluster, std::int64_t gbs,
                 const std::vector<Variant>& variants) {
  const ModelSpec model = model_preset(model_name);
  const ClusterSpec c = load_cluster(cluster);
  const ProfileDb db = analytic_for(model, c, model.seq_len);
  std::printf("-- %s on %s, gbs %lld\n", model_name, cluster, static_cast<long long>(gbs));
  std::printf("%-24s %9s %9s %9s %9s %9s %11s %12s %8s\n", "variant", "search s", "cpu s", "cands",
              "evaluated", "splits", "cache hits", "objective ms", "quality");
  double reference = 0;
  for (const Variant& v : variants) {
    PlannerOptions o;
    o.cpc = v.cpc;
    o.ses = v.ses;
    o.oso = v.oso;
    o.dpo = v.dpo;
    o.max_enumerated_splits = 1e12;  // the enumeration really enumerates here
    const Timed t = timed_plan(PlanMethod::Eth, model, c, db, gbs, model.seq_len, o);
    if (!t.result) {
      std::printf("%-24s %s\n", v.name, t.error.c_str());
      continue;
    }
    const auto& st = t.result->stats;
    if (reference == 0) reference = t.result->best_objective_ms;
    std::printf("%-24s %9.3f %9.3f %9lld %9lld %9lld %11lld %12.1f %8.4f\n", v.name, t.wall_s,
                t.cpu_s, static_cast<long long>(st.generated), static_cast<long long>(st.evaluated),
                static_cast<long long>(st.unit_splits), static_cast<long long>(st.cache_hits),
                t.result->best_objective_ms, reference / t.result->best_objective_ms);
  }
}

void run_ablation() {
  std::printf("== Search ablation (Fig. 13a): optimizations added one at a time, alpha 0\n");
  std::printf(
      "(quality: the first row's best objective over this row's; 1 = the same plan "
      "quality)\n");
  const std::vector<Variant> full = {{"none (enumerate)", false, false, false, false},
                                     {"+CPC", true, false, false, false},
                                     {"+CPC+SES", true, true, false, false},
                                     {"+CPC+SES+OSO", true, true, true, false},
                                     {"+CPC+SES+OSO+DPO (eth)", true, true, true, true}};
  ablation_on("gpt3-350m", "350m-a100-rtx3090", 512, full);
  ablation_on("gpt3-1.3b", "1.3b-910b2-910b4", 512, full);
  // Enumeration is out of reach for deep pipelines of a 42-unit model: the same steps on DPO.
  const std::vector<Variant> dp = {{"DPO", false, false, false, true},
                                   {"DPO+CPC", true, false, false, true},
                                   {"DPO+CPC+SES", true, true, false, true},
                                   {"DPO+CPC+SES+OSO (eth)", true, true, true, true}};
  ablation_on("gpt3-13b", "13b-910b2-910b4", 1024, dp);
  std::printf("\n");
}

void run_alpha() {
  std::printf("== Alpha sensitivity (Fig. 13b): SES tolerance vs search time and plan quality\n");
  for (const auto& [model_name, cluster] :
       {std::pair{"gpt3-13b", "13b-910b2-910b4"}, std::pair{"gpt3-70b", "70b-910b2-910b4"}}) {
    const ModelSpec model = model_preset(model_name);
    const ClusterSpec c = load_cluster(cluster);
    const ProfileDb db = analytic_for(model, c, model.seq_len);
    std::printf("-- %s on %s, gbs 1024\n", model_name, cluster);
    std::printf("%6s %9s %9s %9s %9s %12s %12s %8s\n", "alpha", "search s", "cpu s", "evaluated",
                "splits", "objective ms", "predicted ms", "quality");
    double reference = 0;
    for (double alpha : {0.0, 0.01, 0.02, 0.05, 0.1, 0.2}) {
      PlannerOptions o;
      o.alpha = alpha;
      const Timed t = timed_plan(PlanMethod::Eth, model, c, db, 1024, model.seq_len, o);
      if (!t.result) continue;
      if (reference == 0) reference = t.result->best_objective_ms;
      std::printf("%6.2f %9.3f %9.3f %9lld %9lld %12.1f %12.1f %8.4f\n", alpha, t.wall_s, t.cpu_s,
                  static_cast<long long>(t.result->stats.evaluated),
                  static_cast<long long>(t.result->stats.unit_splits), t.result->best_objective_ms,
                  ms(t), reference / t.result->best_objective_ms);
    }
  }
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

void run_scale() {
  std::printf("== Scalability for GPT-3 13B (Fig. 11)\n");
  const ModelSpec model = model_preset("gpt3-13b");
  auto row = [&](const std::string& what, const ClusterSpec& c, std::int64_t gbs,
                 std::int64_t seq) {
    const ProfileDb db = analytic_for(model, c, seq);
    const Timed eth = timed_plan(PlanMethod::Eth, model, c, db, gbs, seq, PlannerOptions{});
    const Timed layer = timed_plan(PlanMethod::Layer, model, c, db, gbs, seq, PlannerOptions{});
    if (!eth.result) {
      std::printf("%-26s %s\n", what.c_str(), eth.error.c_str());
      return;
    }
    const auto& pr = eth.result->prediction;
    std::printf("%-26s %9.3f %9.3f %8lld %12.1f %12.1f %7.3f %6.3f\n", what.c_str(), eth.wall_s,
                eth.cpu_s, static_cast<long long>(eth.result->stats.generated), ms(eth), ms(layer),
                layer.result ? ms(layer) / ms(eth) : 0.0, pr.ideal_iteration_ms / pr.iteration_ms);
  };
  std::printf("%-26s %9s %9s %8s %12s %12s %7s %6s\n", "setting", "search s", "cpu s", "cands",
              "eth ms", "layer ms", "x layer", "ideal");
  for (std::int64_t nodes : {1, 2, 4, 8, 16}) {
    row("devices " + std::to_string(nodes * 16) + " (gbs 1024)", scaled_13b(nodes), 1024, 2048);
  }
  for (std::int64_t gbs : {256, 512, 2048, 4096}) {
    row("gbs " + std::to_string(gbs) + " (64 devices)", scaled_13b(4), gbs, 2048);
  }
  for (std::int64_t seq : {512, 1024}) {
    row("seq " + std::to_string(seq) + " (64 devices)", scaled_13b(4), 1024, seq);
  }
  std::printf("\n");
}

struct MetisCase {
  const char* dir;
  const char* model;
  std::int64_t gbs;
  double metis_search_s;  // -1: over the 600 s limit
  double metis_best_ms;   // Metis's own estimate of its best plan
};

void run_metis(const std::filesystem::path& shared) {
  std::printf(
      "== Metis's inputs (shared/peers/metis-inputs): eth beside Metis's recorded figures\n");
  std::printf(
      "(Metis figures from shared/peers/README.md: its own cost estimate, and some of its "
      "picks do not fit one device's memory; eth's are the predictor's, every device fits)\n");
  const MetisCase cases[] = {
      {"s1_350m_2a100_2rtx3090", "gpt3-350m", 64, 0.6, 1177},
      {"s1_350m_2a100_2rtx3090", "gpt3-350m", 256, 0.5, 4422},
      {"s2_1.3b_4a100_4rtx3090", "gpt3-1.3b", 256, 0.5, 7016},
      {"s3_6.7b_16b2_16b4", "gpt3-6.7b", 512, 137, 10212},
      {"s4_13b_32b2_32b4", "gpt3-13b", 1024, -1, 20130},
      {"s5_70b_256b2_256b4", "gpt3-70b", 1024, 112, 13596},
  };
  std::printf("%-24s %5s %9s %9s %8s %11s %12s %12s %10s %6s\n", "inputs", "gbs", "search s",
              "cpu s", "cands", "metis s", "eth ms", "metis ms", "layer ms", "ideal");
  for (const MetisCase& m : cases) {
    const auto dir = shared / "peers" / "metis-inputs" / m.dir;
    try {
      const ModelSpec model = model_preset(m.model);
      const ClusterSpec c = read_metis_cluster(dir / "hostfile", dir / "clusterfile.json");
      const ProfileDb db = read_metis_profile_dir(dir / "profile", model, &c);
      const Timed eth = timed_plan(PlanMethod::Eth, model, c, db, m.gbs, model.seq_len, {});
      const Timed layer = timed_plan(PlanMethod::Layer, model, c, db, m.gbs, model.seq_len, {});
      if (!eth.result) {
        std::printf("%-24s %s\n", m.dir, eth.error.c_str());
        continue;
      }
      const auto& pr = eth.result->prediction;
      const std::string metis_s = m.metis_search_s < 0
                                      ? std::string(">600")
                                      : std::to_string(m.metis_search_s).substr(0, 5);
      std::printf("%-24s %5lld %9.3f %9.3f %8lld %11s %12.1f %12.1f %10.1f %6.3f\n", m.dir,
                  static_cast<long long>(m.gbs), eth.wall_s, eth.cpu_s,
                  static_cast<long long>(eth.result->stats.generated), metis_s.c_str(), ms(eth),
                  m.metis_best_ms, ms(layer), pr.ideal_iteration_ms / pr.iteration_ms);
    } catch (const InputError& e) {
      std::printf("%-24s cannot read the inputs: %s\n", m.dir, e.what());
    }
  }
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::string what = "all";
  // bench/plan_bench.cpp -> the repository -> its parent holds shared/.
  std::filesystem::path shared =
      std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() / "shared";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--shared" && i + 1 < argc) {
      shared = argv[++i];
    } else {
      what = a;
    }
  }
  const std::vector<std::pair<const char*, std::function<void()>>> sections = {
      {"scenarios", run_scenarios}, {"uneven", run_uneven}, {"ablation", run_ablation},
      {"alpha", run_alpha},         {"scale", run_scale},   {"metis", [&] { run_metis(shared); }}};
  bool ran = false;
  for (const auto& [name, fn] : sections) {
    if (what == "all" || what == name) {
      fn();
      ran = true;
    }
  }
  if (!ran) {
    std::fprintf(
        stderr,
        "usage: plan_bench [scenarios|uneven|ablation|alpha|scale|metis|all] [--shared DIR]\n");
    return 1;
  }
  return 0;
}
