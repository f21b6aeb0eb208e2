// `eth simulate --plan P`: prices a plan with the closed-form predictor and the discrete-event
// simulator side by side (per pipeline: batch, micro-batch, stages with units, time, memory vs
// capacity), and writes the simulated timeline as a Chrome trace and an SVG on request. With
// `--measured TRACE` (eth train --trace of the same plan) it simulates the run as it was made
// (its aggregation, emulated slowdowns and fp32 messages), prints simulated vs measured time per
// stage with the error of each, and draws both timelines in one SVG and one Chrome trace.
// The models themselves live in cost/ and sim/; this file chooses inputs and renders results.
#include <algorithm>
#include <cmath>
#include <optional>
#include <iostream>
#include <memory>
#include <set>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/output.h"
#include "cli/plan_inputs.h"
#include "cluster/cluster_spec.h"
#include "core/error.h"
#include "core/json_file.h"
#include "cost/predictor.h"
#include "plan/plan.h"
#include "plan/validate.h"
#include "profile/analytic.h"
#include "profile/metis_format.h"
#include "profile/profile_io.h"
#include "sim/measured.h"
#include "sim/simulator.h"
#include "sim/trace.h"

namespace eth::cli {

namespace {

struct SimulateOptions {
  std::string plan, cluster, profile, trace, svg, measured;
  bool allreduce_given = false;
  bool analytic = false;
  std::string allreduce = "block";
  std::string schedule;  // empty: the plan's
  bool no_overlap = false;
  Format format = Format::Text;
};

// The analytic profile at exactly the (tp, per-replica micro-batch) shapes the plan prices.
ProfileDb analytic_for(const Plan& plan, const ClusterSpec& cluster) {
  std::set<std::int64_t> tps, mbss;
  for (const auto& pipe : plan.pipelines) {
    for (const auto& st : pipe.stages) {
      tps.insert(st.tp);
      mbss.insert((pipe.micro_batch_size + st.dp - 1) / st.dp);
      mbss.insert((pipe.last_microbatch_size() + st.dp - 1) / st.dp);
    }
  }
  return analytic_profile_db(plan.model, cluster, {tps.begin(), tps.end()},
                             {mbss.begin(), mbss.end()}, plan.seq_len);
}

std::string units_of(const StagePlan& st) {
  return std::to_string(st.first_unit) + "-" + std::to_string(st.last_unit);
}

std::string devices_of(const StagePlan& st) {
  const auto& d = st.devices;
  bool contiguous = true;
  for (std::size_t i = 1; i < d.size(); ++i) contiguous = contiguous && d[i] == d[i - 1] + 1;
  if (d.size() == 1) return std::to_string(d[0]);
  if (contiguous) return std::to_string(d.front()) + "-" + std::to_string(d.back());
  std::string s;
  for (auto x : d) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

std::string pct(double f) { return fmt_num(100.0 * f, 1) + "%"; }

Json simulated_json(const SimResult& r) {
  Json j;
  j["iteration_ms"] = r.iteration_ms;
  j["pipeline_ms"] = r.pipeline_ms;
  j["events"] = r.events;
  j["stages"] = Json::array();
  for (const auto& st : r.stages) {
    j["stages"].push_back(Json{{"pipeline", st.pipeline},
                               {"stage", st.stage},
                               {"devices", st.devices},
                               {"device_type", st.device_type},
                               {"peak_memory_bytes", st.peak_memory_bytes},
                               {"peak_in_flight", st.peak_in_flight},
                               {"backward_end_ms", ns_to_ms(st.backward_end)}});
  }
  j["devices"] = Json::array();
  for (const auto& d : r.devices) {
    j["devices"].push_back(Json{{"device", d.device},
                                {"pipeline", d.pipeline},
                                {"stage", d.stage},
                                {"compute_ms", d.compute_ms},
                                {"reduce_ms", d.reduce_ms},
                                {"busy_fraction", d.busy_fraction},
                                {"idle_fraction", d.idle_fraction},
                                {"bubble_fraction", d.bubble_fraction},
                                {"peak_memory_bytes", d.peak_memory_bytes}});
  }
  return j;
}

void print_report(const Plan& plan, const ClusterSpec& cluster, const std::string& profile_name,
                  const SimulateOptions& o, const Prediction& pred, const SimResult& r) {
  std::cout << "plan " << o.plan << ": model " << plan.model.name << ", gbs " << plan.gbs
            << ", seq_len " << plan.seq_len << ", cluster " << cluster.name << " ("
            << plan.num_devices() << " of " << cluster.num_devices() << " devices)\n"
            << "profile " << profile_name << ", schedule " << plan.schedule << ", all-reduce "
            << o.allreduce << (o.no_overlap ? " after backward" : " overlapped with backward")
            << "\n";
  for (std::size_t p = 0; p < plan.pipelines.size(); ++p) {
    const PipelinePlan& pipe = plan.pipelines[p];
    const PipelinePrediction& pp = pred.pipelines[p];
    std::cout << "\npipeline " << p << ": local batch " << pipe.local_batch << ", micro-batch "
              << pipe.micro_batch_size << " x " << pipe.num_microbatches() << " (last "
              << pipe.last_microbatch_size() << "), " << pipe.stages.size()
              << " stages; time predicted " << fmt_ms(pp.time_ms) << ", simulated "
              << fmt_ms(r.pipeline_ms[p]) << "\n";
    Table t({"stage", "type", "tp x dp", "units", "devices", "F ms", "B ms", "busy", "bubble",
             "memory (sim)", "memory (pred)", "capacity", "fits"});
    for (std::size_t s = 0; s < pipe.stages.size(); ++s) {
      const StagePlan& st = pipe.stages[s];
      const StagePrediction& sp = pp.stages[s];
      const auto it =
          std::find_if(r.devices.begin(), r.devices.end(),
                       [&](const DeviceSimResult& d) { return d.device == st.devices.front(); });
      const double peak = it->peak_memory_bytes;
      t.add({std::to_string(s), st.device_type, std::to_string(st.tp) + "x" + std::to_string(st.dp),
             units_of(st), devices_of(st), fmt_num(sp.forward_ms, 2), fmt_num(sp.backward_ms, 2),
             pct(it->busy_fraction), pct(it->bubble_fraction), fmt_bytes(peak),
             fmt_bytes(sp.memory.total()), fmt_bytes(sp.capacity_bytes),
             peak <= sp.capacity_bytes ? "yes" : "NO"});
    }
    std::cout << t.render();
  }
  const double diff = (r.iteration_ms - pred.iteration_ms) / pred.iteration_ms;
  std::cout << "\n";
  Table t({"iteration", "predicted", "simulated"});
  double sim_pipes = 0;
  for (double v : r.pipeline_ms) sim_pipes = std::max(sim_pipes, v);
  t.add({"pipelines (slowest)", fmt_ms(pred.pipeline_ms), fmt_ms(sim_pipes)});
  t.add({"after the pipelines (sync + optimizer)", fmt_ms(pred.sync.exposed_ms + pred.optimizer_ms),
         fmt_ms(r.iteration_ms - sim_pipes)});
  t.add({"iteration time", fmt_ms(pred.iteration_ms), fmt_ms(r.iteration_ms)});
  const double tokens = static_cast<double>(plan.gbs) * static_cast<double>(plan.seq_len);
  t.add({"tokens/s", fmt_num(pred.tokens_per_s, 0), fmt_num(tokens / (r.iteration_ms * 1e-3), 0)});
  std::cout << t.render() << "simulated - predicted: " << (diff >= 0 ? "+" : "")
            << fmt_num(100.0 * diff, 2) << "% (" << r.events << " events; "
            << pred.sync.stats.collectives << " gradient collectives)\n";
  if (!o.trace.empty()) std::cout << "trace: " << o.trace << " (open in https://ui.perfetto.dev)\n";
  if (!o.svg.empty()) std::cout << "timeline picture: " << o.svg << "\n";
}

std::string err_text(double e) {
  if (!std::isfinite(e)) return "n/a";
  return (e >= 0 ? "+" : "") + fmt_num(100.0 * e, 1) + "%";
}

Json error_json(double e) { return std::isfinite(e) ? Json(e) : Json(nullptr); }

struct Phase {
  const char* name;
  double PhaseTimes::*field;
};
constexpr Phase kPhases[] = {{"forward", &PhaseTimes::forward_ms},
                             {"backward", &PhaseTimes::backward_ms},
                             {"wait", &PhaseTimes::wait_ms},
                             {"sync", &PhaseTimes::sync_ms},
                             {"optimizer", &PhaseTimes::optimizer_ms},
                             {"iteration", &PhaseTimes::iteration_ms}};

Json phases_json(const PhaseTimes& t) {
  Json j;
  for (const Phase& p : kPhases) j[std::string(p.name) + "_ms"] = t.*p.field;
  return j;
}

Json comparison_json(const MeasuredComparison& c, const std::string& trace) {
  Json stages = Json::array();
  for (const StagePhases& sp : c.stages) {
    Json err;
    for (const Phase& p : kPhases) {
      err[p.name] = error_json(relative_error(sp.simulated.*p.field, sp.measured.*p.field));
    }
    stages.push_back(Json{{"pipeline", sp.pipeline},
                          {"stage", sp.stage},
                          {"device_type", sp.device_type},
                          {"devices", sp.devices},
                          {"simulated", phases_json(sp.simulated)},
                          {"measured", phases_json(sp.measured)},
                          {"error", err}});
  }
  return Json{{"trace", trace},
              {"steps", c.steps},
              {"simulated_iteration_ms", c.simulated_iteration_ms},
              {"measured_iteration_ms", c.measured_iteration_ms},
              {"iteration_error",
               error_json(relative_error(c.simulated_iteration_ms, c.measured_iteration_ms))},
              {"stages", stages}};
}

void print_comparison(const MeasuredComparison& c, const std::string& trace) {
  std::cout << "\nsimulated vs measured (" << trace << ", steps";
  for (std::int64_t s : c.steps) std::cout << " " << s;
  std::cout << "; per stage, means over its devices and the steps; error = (simulated - "
               "measured) / measured):\n";
  Table t({"pipeline", "stage", "type", "phase", "simulated ms", "measured ms", "error"});
  for (const StagePhases& sp : c.stages) {
    bool first = true;
    for (const Phase& p : kPhases) {
      const double sim = sp.simulated.*p.field, meas = sp.measured.*p.field;
      // Both below what the table shows (a send drained in microseconds): no error to speak of.
      const bool nil = std::abs(sim) < 0.005 && std::abs(meas) < 0.005;
      t.add({first ? std::to_string(sp.pipeline) : "", first ? std::to_string(sp.stage) : "",
             first ? sp.device_type : "", p.name, fmt_num(sim, 2), fmt_num(meas, 2),
             nil ? "-" : err_text(relative_error(sim, meas))});
      first = false;
    }
  }
  std::cout << t.render() << "iteration: simulated " << fmt_ms(c.simulated_iteration_ms)
            << ", measured " << fmt_ms(c.measured_iteration_ms) << " (error "
            << err_text(relative_error(c.simulated_iteration_ms, c.measured_iteration_ms))
            << ")\n";
}

int run_simulate(const SimulateOptions& o) {
  Plan plan = load_plan(o.plan);
  ClusterSpec cluster = cluster_for_plan(plan, o.cluster);
  std::optional<MeasuredRun> measured;
  if (!o.measured.empty()) {
    if (o.profile.empty()) {
      throw InputError("cli", "--measured", "",
                       "give the --profile the run was measured against (eth profile --measure)");
    }
    measured = measured_from_json(read_json_file(o.measured, "simulate"), plan, o.measured);
    if (o.allreduce_given && o.allreduce != measured->aggregation) {
      throw InputError("cli", "--allreduce", "",
                       "the traced run aggregated " + measured->aggregation + ", not " +
                           o.allreduce + " (leave --allreduce out with --measured)");
    }
    // Simulate the cluster as the run emulated it (--emulate may have overridden the file).
    for (auto& [name, type] : cluster.device_types) {
      const auto f = measured->slowdown.find(name);
      type.emulated_slowdown = f == measured->slowdown.end() ? 1.0 : f->second;
    }
  }
  if (!o.schedule.empty()) plan.schedule = o.schedule;
  check_plan(plan, cluster, o.plan);
  const auto kind = parse_schedule_kind(plan.schedule);
  if (!kind) {
    throw InputError("plan", o.plan, "schedule",
                     "unknown schedule \"" + plan.schedule + "\"; expected one of: 1f1b, gpipe");
  }
  const AggregationMode mode =
      *parse_aggregation_mode(measured ? measured->aggregation : o.allreduce);
  // The simulator keeps every event: its time and memory grow with stages x micro-batches
  // (2^24 of them: about half a minute and 2 GB). The predictor prices any plan.
  constexpr std::int64_t kMaxStageMicrobatches = std::int64_t{1} << 24;
  std::int64_t work = 0;
  for (const PipelinePlan& pipe : plan.pipelines) {
    work += static_cast<std::int64_t>(pipe.stages.size()) * pipe.num_microbatches();
  }
  if (work > kMaxStageMicrobatches) {
    throw InputError("simulate", o.plan, "",
                     "has " + std::to_string(work) + " (stage, micro-batch) pairs, more than the " +
                         std::to_string(kMaxStageMicrobatches) +
                         " the simulator handles (docs/input-limits.md); simulate a plan with "
                         "larger micro-batches or a smaller gbs, or use `eth plan`'s prediction");
  }

  std::string profile_name = "analytic";
  ProfileDb db(plan.model);
  if (!o.profile.empty()) {
    if (is_metis_profile_dir(o.profile)) {
      db = read_metis_profile_dir(o.profile, plan.model, &cluster);
    } else {
      db = read_profile_for_cluster(o.profile, plan.model, cluster);
    }
    profile_name = o.profile;
  } else {
    db = analytic_for(plan, cluster);
  }

  PredictOptions po;
  po.aggregation = mode;
  po.overlap = !o.no_overlap;
  // A measured run is priced in its precision where the profile is one of ETH's runtime
  // (refused when measured in another); analytic and Metis profiles keep their 16-bit pricing.
  if (measured && runtime_precision(plan_precision(plan, db))) po.precision = measured->precision;
  const Prediction pred = predict(plan, cluster, db, po);
  const auto costs = compute_stage_costs(plan, cluster, db, po.p2p_latency_ms, pred.precision,
                                         po.aggregation, po.collective_window_bytes);
  const auto colls = make_collectives(plan, cluster, mode, po.collective_latency_ms,
                                      pred.gradient_element_bytes);
  SimOptions so;
  so.schedule = *kind;
  so.overlap = !o.no_overlap;
  // A sharded plan gathers its updated weights after the step (the predictor's shard_gather_ms).
  so.weight_gathers = make_weight_gathers(plan, cluster, pred.precision, po.collective_latency_ms);
  // Outputs are checked before the simulation runs, not after.
  if (!o.trace.empty()) check_output_file(o.trace, "trace");
  if (!o.svg.empty()) check_output_file(o.svg, "svg");
  so.record_timeline = !o.trace.empty() || !o.svg.empty() || measured;
  const SimResult r = simulate(plan, costs, colls, so);
  std::optional<MeasuredComparison> cmp;
  if (measured) cmp = compare_measured(plan, r, *measured);

  if (!o.trace.empty()) {
    write_file_atomic(o.trace,
                      measured ? comparison_trace_json(plan, r, median_step(*measured))
                               : chrome_trace_json(plan, r),
                      "trace");
  }
  if (!o.svg.empty()) {
    write_file_atomic(o.svg,
                      measured ? comparison_svg(plan, r, median_step(*measured))
                               : timeline_svg(plan, r),
                      "svg");
  }

  if (o.format == Format::Json) {
    print_json(Json{{"plan", o.plan},
                    {"cluster", cluster.name},
                    {"profile", profile_name},
                    {"schedule", plan.schedule},
                    {"allreduce", o.allreduce},
                    {"overlap", !o.no_overlap},
                    {"predicted", prediction_to_json(pred)},
                    {"simulated", simulated_json(r)},
                    {"measured", cmp ? comparison_json(*cmp, o.measured) : Json()},
                    {"trace", o.trace.empty() ? Json() : Json(o.trace)},
                    {"svg", o.svg.empty() ? Json() : Json(o.svg)}});
    return kExitOk;
  }
  print_report(plan, cluster, profile_name, o, pred, r);
  if (cmp) print_comparison(*cmp, o.measured);
  return kExitOk;
}

}  // namespace

void add_simulate_command(CLI::App& app, Registry& r) {
  auto* sub = app.add_subcommand(
      "simulate",
      "Price a plan with the predictor and the discrete-event simulator side by side; optionally "
      "write the simulated timeline (Chrome trace for Perfetto, SVG picture)");
  auto o = std::make_shared<SimulateOptions>();
  sub->add_option("--plan", o->plan, "Plan file (eth-plan JSON)")->required();
  sub->add_option("--cluster", o->cluster,
                  "Cluster preset or file (default: the plan's \"cluster\" field)");
  auto* prof = sub->add_option("--profile", o->profile, "Profile directory (ETH or Metis format)");
  auto* ana = sub->add_flag("--analytic", o->analytic,
                            "Use the analytic profile for the plan's shapes (the default)");
  prof->excludes(ana);
  sub->add_option("--allreduce", o->allreduce, "Gradient aggregation: block, tensor or device")
      ->check(CLI::IsMember({"block", "tensor", "device"}))
      ->capture_default_str()
      ->each([o](const std::string&) { o->allreduce_given = true; });
  sub->add_option("--schedule", o->schedule, "Pipeline schedule (default: the plan's)")
      ->check(CLI::IsMember({"1f1b", "gpipe"}));
  sub->add_flag("--no-overlap", o->no_overlap,
                "Start gradient collectives only after every pipeline's backward");
  sub->add_option("--trace", o->trace, "Write a Chrome trace (JSON) of the timeline");
  sub->add_option("--svg", o->svg, "Write an SVG picture of the timeline");
  sub->add_option("--measured", o->measured,
                  "A trace of a real run of this plan (eth train --trace): simulate the run as it "
                  "was made, print simulated vs measured time per stage, and draw both timelines "
                  "(--svg: two rows per device; --trace: both in one Chrome trace)");
  add_format_option(sub, &o->format);
  r.on(sub, [o] { return run_simulate(*o); });
}

}  // namespace eth::cli
