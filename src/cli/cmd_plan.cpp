// `eth plan` and `eth compare`: run the planner (search/planner.h) on a cluster, a model and a
// profile, print the plan in the style of the paper's appendix Table 3 or as a plan file, and
// compare the eth, layer and uniform methods side by side. Parsing and printing only.
#include <chrono>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/output.h"
#include "cli/plan_inputs.h"
#include "cli/planner_args.h"
#include "cluster/cluster_spec.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/limits.h"
#include "profile/metis_format.h"
#include "profile/profile_io.h"
#include "search/planner.h"

namespace eth::cli {

namespace {

struct PlanArgs {
  std::string cluster, hostfile, clusterfile, model, out;
  std::int64_t gbs = 0, seq = 0;
  PlannerArgs planner;
  Format format = Format::Text;
};

// Everything a run of the planner needs, loaded once.
struct Inputs {
  ModelSpec model;
  ClusterSpec cluster;
  std::optional<ProfileDb> profile;
  std::int64_t seq = 0;
  std::string profile_source;
};

Inputs load_inputs(const PlanArgs& a) {
  Inputs in;
  in.model = load_model(a.model);
  const bool metis_cluster = !a.hostfile.empty() || !a.clusterfile.empty();
  if (metis_cluster == !a.cluster.empty()) {
    throw UsageError("--cluster",
                     "give either --cluster, or --hostfile with --clusterfile (Metis's files)");
  }
  if (metis_cluster) {
    if (a.hostfile.empty() || a.clusterfile.empty()) {
      throw UsageError(a.hostfile.empty() ? "--hostfile" : "--clusterfile",
                       "Metis's cluster needs both --hostfile and --clusterfile");
    }
    in.cluster = read_metis_cluster(a.hostfile, a.clusterfile);
  } else {
    in.cluster = load_cluster(a.cluster);
  }
  in.seq = a.seq == 0 ? in.model.seq_len : a.seq;
  PlannerProfile p = planner_profile(a.planner, in.model, in.cluster, in.seq);
  in.profile = std::move(p.db);
  in.profile_source = std::move(p.source);
  return in;
}

struct TimedResult {
  PlannerResult result;
  double seconds = 0;
};

TimedResult run_timed(PlanMethod m, const Inputs& in, std::int64_t gbs, const PlannerOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  TimedResult t{plan_training(m, in.model, in.cluster, *in.profile, gbs, in.seq, o), 0};
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  (*t.result.plan.search)["seconds"] = t.seconds;
  return t;
}

// "0-3,8,10-11"
std::string id_ranges(const std::vector<std::int64_t>& ids) {
  std::string s;
  for (std::size_t i = 0; i < ids.size();) {
    std::size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!s.empty()) s += ",";
    s += std::to_string(ids[i]);
    if (j > i) s += "-" + std::to_string(ids[j]);
    i = j + 1;
  }
  return s;
}

std::string recompute_text(const RecomputeSet& r) {
  if (r.empty()) return "-";
  std::string s;
  for (const auto& n : r.names()) s += (s.empty() ? "" : "+") + n;
  return s;
}

std::string cluster_text(const ClusterSpec& c) {
  std::map<std::string, std::int64_t> per;
  for (const auto& n : c.nodes) per[n.device_type] += n.devices;
  std::string s;
  for (const auto& [t, n] : per) s += (s.empty() ? "" : " + ") + std::to_string(n) + " x " + t;
  return c.name + " (" + s + ", " + std::to_string(c.nodes.size()) + " nodes)";
}

// Two pipelines print as one block when they differ only in their devices.
bool same_shape(const PipelinePlan& a, const PipelinePlan& b) {
  if (a.micro_batch_size != b.micro_batch_size || a.local_batch != b.local_batch ||
      a.stages.size() != b.stages.size()) {
    return false;
  }
  for (std::size_t s = 0; s < a.stages.size(); ++s) {
    const auto &x = a.stages[s], &y = b.stages[s];
    if (x.device_type != y.device_type || x.tp != y.tp || x.dp != y.dp ||
        x.first_unit != y.first_unit || x.last_unit != y.last_unit || x.recompute != y.recompute) {
      return false;
    }
  }
  return true;
}

std::string search_text(const SearchStats& st, double seconds) {
  std::ostringstream s;
  s << "search: " << fmt_num(seconds, 3) << " s, " << st.generated << " candidates generated, "
    << st.evaluated << " evaluated, " << st.skipped_total() << " skipped";
  if (!st.skipped.empty()) {
    s << " (";
    bool first = true;
    for (const auto& [reason, n] : st.skipped) {
      s << (first ? "" : ", ") << reason << " " << n;
      first = false;
    }
    s << ")";
  }
  s << ", " << st.unit_splits << " unit splits, " << st.cache_hits << " cache hits, "
    << st.predicted << " finalists priced by the predictor\n";
  for (const auto& [name, value] : st.limits) {
    s << "search limit reached: " << name << " " << value
      << " (the plan is the best of the partitions visited; raise --max-partitions to search "
         "further)\n";
  }
  return s.str();
}

void print_plan_text(const TimedResult& t, const Inputs& in) {
  const PlannerResult& r = t.result;
  const Plan& plan = r.plan;
  const Prediction& pr = r.prediction;
  std::cout << plan_method_name(r.method) << " plan: " << in.model.name << " on "
            << cluster_text(in.cluster) << ", gbs " << plan.gbs << ", seq " << plan.seq_len
            << ", profile " << in.profile_source << "\n"
            << plan.pipelines.size() << " pipelines (" << r.family << " family)";
  if (r.idle_devices > 0) std::cout << ", " << r.idle_devices << " devices idle";
  std::cout << "\n\n";
  Table tab({"pipeline", "m / B", "stage", "type", "devices", "TP/DP", "units", "recompute",
             "F+B ms", "memory / capacity"});
  for (std::size_t p = 0; p < plan.pipelines.size();) {
    std::size_t q = p;
    while (q + 1 < plan.pipelines.size() && same_shape(plan.pipelines[p], plan.pipelines[q + 1]))
      ++q;
    const PipelinePlan& pipe = plan.pipelines[p];
    const PipelinePrediction& pp = pr.pipelines[p];
    const std::string name = q > p ? std::to_string(p) + "-" + std::to_string(q) + " (x" +
                                         std::to_string(q - p + 1) + ")"
                                   : std::to_string(p);
    for (std::size_t s = 0; s < pipe.stages.size(); ++s) {
      const StagePlan& st = pipe.stages[s];
      const StagePrediction& sp = pp.stages[s];
      std::string devs = id_ranges(st.devices);
      if (q > p) devs += " ...";
      tab.add(
          {s == 0 ? name : "",
           s == 0 ? std::to_string(pipe.micro_batch_size) + " / " + std::to_string(pipe.local_batch)
                  : "",
           std::to_string(s), st.device_type, devs,
           std::to_string(st.tp) + "/" + std::to_string(st.dp),
           std::to_string(st.first_unit) + "-" + std::to_string(st.last_unit),
           recompute_text(st.recompute), fmt_num(sp.forward_ms + sp.backward_ms, 1),
           fmt_bytes(sp.memory.total()) + " / " + fmt_bytes(sp.capacity_bytes)});
    }
    p = q + 1;
  }
  std::cout << tab.render() << "\n";
  const double tokens = static_cast<double>(plan.gbs) * static_cast<double>(plan.seq_len);
  std::cout << "predicted iteration: " << fmt_ms(pr.iteration_ms) << " (slowest pipeline "
            << fmt_ms(pr.pipeline_ms) << " + exposed gradient sync " << fmt_ms(pr.sync.exposed_ms)
            << " + optimizer " << fmt_ms(pr.optimizer_ms) << ")\n"
            << "throughput: " << fmt_num(pr.tokens_per_s, 0) << " tokens/s, "
            << fmt_num(tokens / plan.seq_len / (pr.iteration_ms * 1e-3), 2) << " samples/s, MFU "
            << fmt_num(100.0 * pr.mfu, 1) << "%\n"
            << "ideal bound: " << fmt_ms(pr.ideal_iteration_ms) << " (this plan reaches "
            << fmt_num(pr.ideal_iteration_ms / pr.iteration_ms, 3) << " of it)\n"
            << search_text(r.stats, t.seconds);
}

void add_common_options(CLI::App* sub, PlanArgs& a, bool with_method) {
  sub->add_option("--cluster", a.cluster, "Cluster preset name or cluster JSON file");
  sub->add_option("--hostfile", a.hostfile, "Metis hostfile (with --clusterfile)");
  sub->add_option("--clusterfile", a.clusterfile, "Metis clusterfile.json (with --hostfile)");
  sub->add_option("--model", a.model, "Model preset name or model JSON file")->required();
  sub->add_option("--gbs", a.gbs,
                  "Global batch size (samples, at most " +
                      std::to_string(limits::kMaxGlobalBatch) + ")")
      ->required()
      ->check(CLI::Range(std::int64_t{1}, limits::kMaxGlobalBatch));
  sub->add_option("--seq", a.seq, "Sequence length (default: the model's)")
      ->check(CLI::Range(std::int64_t{1}, limits::kMaxSeqLen));
  add_planner_options(sub, a.planner, with_method);
  add_format_option(sub, &a.format);
}

}  // namespace

void add_plan_command(CLI::App& app, Registry& r) {
  auto a = std::make_shared<PlanArgs>();
  auto* sub = app.add_subcommand(
      "plan",
      "Find a heterogeneous pipeline-parallel plan (docs/planner.md); --method layer or "
      "uniform for the baselines");
  add_common_options(sub, *a, true);
  sub->add_option("--out", a->out, "Write the plan file here");
  r.on(sub, [a] {
    const PlanMethod method = planner_method(a->planner);
    if (!a->out.empty()) check_output_file(a->out, "plan");  // before the search, not after
    const Inputs in = load_inputs(*a);
    TimedResult t = run_timed(method, in, a->gbs, planner_options(a->planner));
    if (!a->out.empty()) save_plan(t.result.plan, a->out);
    if (a->format == Format::Json) {
      print_json(plan_to_json(t.result.plan));
    } else {
      print_plan_text(t, in);
      if (!a->out.empty()) std::cout << "wrote " << a->out << "\n";
    }
    return kExitOk;
  });
}

void add_compare_command(CLI::App& app, Registry& r) {
  auto a = std::make_shared<PlanArgs>();
  auto* sub = app.add_subcommand(
      "compare", "Plan with eth, layer and uniform and print them side by side with speedups");
  add_common_options(sub, *a, false);
  r.on(sub, [a] {
    const Inputs in = load_inputs(*a);
    const PlannerOptions o = planner_options(a->planner);
    struct Row {
      PlanMethod method;
      std::optional<TimedResult> t;
      std::string error;
    };
    std::vector<Row> rows;
    for (auto m : {PlanMethod::Eth, PlanMethod::Layer, PlanMethod::Uniform}) {
      Row row{m, std::nullopt, ""};
      try {
        row.t = run_timed(m, in, a->gbs, o);
      } catch (const InputError& e) {
        row.error = e.what();  // one method not fitting is a result, not a failure
      }
      rows.push_back(std::move(row));
    }
    const double eth_ms = rows[0].t ? rows[0].t->result.prediction.iteration_ms : 0;
    double ideal = 0;
    for (const auto& row : rows) {
      if (row.t) ideal = row.t->result.prediction.ideal_iteration_ms;
    }
    if (a->format == Format::Json) {
      Json j{{"model", in.model.name},
             {"cluster", in.cluster.name},
             {"gbs", a->gbs},
             {"seq_len", in.seq},
             {"ideal_iteration_ms", ideal}};
      j["methods"] = Json::array();
      for (const auto& row : rows) {
        Json m{{"method", std::string(plan_method_name(row.method))}};
        if (!row.t) {
          m["error"] = row.error;
        } else {
          const auto& p = row.t->result.prediction;
          m["iteration_ms"] = p.iteration_ms;
          m["tokens_per_s"] = p.tokens_per_s;
          m["fraction_of_ideal"] = p.ideal_iteration_ms / p.iteration_ms;
          if (eth_ms > 0) m["eth_speedup"] = p.iteration_ms / eth_ms;
          m["plan"] = plan_to_json(row.t->result.plan);
        }
        j["methods"].push_back(m);
      }
      print_json(j);
      return kExitOk;
    }
    std::cout << in.model.name << " on " << cluster_text(in.cluster) << ", gbs " << a->gbs
              << ", seq " << in.seq << ", profile " << in.profile_source << "\n\n";
    Table t({"method", "iteration", "tokens/s", "eth speedup", "of ideal", "pipelines", "family",
             "search s", "candidates"});
    for (const auto& row : rows) {
      if (!row.t) {
        t.add({std::string(plan_method_name(row.method)), "no plan fits", "-", "-", "-", "-", "-",
               "-", "-"});
        continue;
      }
      const auto& res = row.t->result;
      const auto& p = res.prediction;
      t.add({std::string(plan_method_name(row.method)), fmt_ms(p.iteration_ms),
             fmt_num(p.tokens_per_s, 0),
             eth_ms > 0 ? fmt_num(p.iteration_ms / eth_ms, 2) + "x" : "-",
             fmt_num(p.ideal_iteration_ms / p.iteration_ms, 3),
             std::to_string(res.plan.pipelines.size()), res.family, fmt_num(row.t->seconds, 3),
             std::to_string(res.stats.generated)});
    }
    std::cout << t.render() << "ideal bound: " << fmt_ms(ideal)
              << " (total model FLOPs over the devices' best measured FLOPS, no bubbles, no "
                 "memory limit)\n";
    for (const auto& row : rows) {
      if (!row.t) std::cout << plan_method_name(row.method) << ": " << row.error << "\n";
    }
    return kExitOk;
  });
}

}  // namespace eth::cli
