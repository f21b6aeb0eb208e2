// Reading a measured trace and comparing it with the simulation. See measured.h.
#include "sim/measured.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace eth {

namespace {

struct RankWhere {
  std::int64_t device = 0, pipeline = 0, stage = 0;
};

TimeNs us_to_ns(double us) { return static_cast<TimeNs>(std::llround(us * 1e3)); }

// The timeline kind of a measured category, or nothing for those with no simulated twin.
std::optional<ActionKind> timeline_kind(const std::string& cat) {
  if (cat == "forward") return ActionKind::Forward;
  if (cat == "backward") return ActionKind::Backward;
  if (cat == "optimizer") return ActionKind::OptimizerStep;
  if (cat == "send_activation") return ActionKind::SendActivation;
  if (cat == "send_gradient") return ActionKind::SendGradient;
  if (cat == "recv_activation") return ActionKind::RecvActivation;
  if (cat == "recv_gradient") return ActionKind::RecvGradient;
  if (cat == "collective") return ActionKind::ReduceGradients;
  return std::nullopt;
}

void check_same_plan(const JsonCursor& traced, const Plan& plan, const std::string& source) {
  const Json want = plan_to_json(plan);
  for (const char* key : {"model", "gbs", "seq_len", "pipelines"}) {
    const auto got = traced.find(key);
    if (!got || got->value() != want.at(key)) {
      throw InputError("simulate", source, "otherData.plan." + std::string(key),
                       "the trace is of another plan than --plan (its " + std::string(key) +
                           " differs); trace the run of this plan");
    }
  }
}

}  // namespace

MeasuredRun measured_from_json(const Json& doc, const Plan& plan, const std::string& source) {
  const JsonCursor root(doc, {"simulate", source, ""});
  root.require_object();
  const JsonCursor other = root.at("otherData");
  other.require_object();
  const auto format = other.find("format");
  if (!format || !format->is_string() || format->as_string() != "eth-measured-trace") {
    other.fail_detail("expected \"format\": \"eth-measured-trace\" (a trace written by "
                      "eth train --trace)");
  }
  if (other.at("version").as_int() != 1) other.at("version").fail("version 1");
  check_same_plan(other.at("plan"), plan, source);
  MeasuredRun run;
  run.aggregation = other.at("aggregation").as_string();
  if (const auto p = other.find("precision")) {
    const auto parsed = parse_precision(p->as_string());
    if (!parsed || !runtime_precision(*parsed)) p->fail("fp32 or bf16");
    run.precision = *parsed;
  }
  const JsonCursor slow = other.at("emulated_slowdown");
  slow.require_object();
  for (const std::string& k : slow.keys()) run.slowdown[k] = slow.at(k).as_number(1.0);
  const JsonCursor ranks = other.at("ranks");
  std::vector<RankWhere> where(ranks.size());
  if (static_cast<std::int64_t>(where.size()) != plan.num_devices()) {
    ranks.fail(std::to_string(plan.num_devices()) + " ranks (one per device of the plan)");
  }
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const JsonCursor r = ranks[i];
    const auto rank = static_cast<std::size_t>(
        r.at("rank").as_int(0, static_cast<std::int64_t>(where.size()) - 1));
    where[rank] = {r.at("device").as_int(0), r.at("pipeline").as_int(0), r.at("stage").as_int(0)};
  }

  // Per step: every event, then the origin (the earliest step start).
  std::map<std::int64_t, MeasuredStep> steps;
  std::map<std::int64_t, TimeNs> origin;
  struct Raw {
    std::int64_t step;
    std::string cat;
    RankWhere at;
    std::int64_t microbatch, index;
    TimeNs start, end;
  };
  std::vector<Raw> raw;
  const JsonCursor events = root.at("traceEvents");
  for (std::size_t i = 0; i < events.size(); ++i) {
    const JsonCursor e = events[i];
    if (e.at("ph").as_string() != "X") continue;
    const JsonCursor args = e.at("args");
    Raw r;
    r.step = args.at("step").as_int(0);
    r.cat = e.at("cat").as_string();
    r.at = where[static_cast<std::size_t>(
        e.at("pid").as_int(0, static_cast<std::int64_t>(where.size()) - 1))];
    const auto mb = args.find("microbatch");
    r.microbatch = mb ? mb->as_int(0) : -1;
    const auto coll = args.find("collective");
    r.index = coll ? coll->as_int(0) : -1;
    r.start = us_to_ns(e.at("ts").as_number());
    r.end = r.start + us_to_ns(e.at("dur").as_number(0));
    if (r.cat == "step") {
      auto [it, fresh] = origin.emplace(r.step, r.start);
      if (!fresh) it->second = std::min(it->second, r.start);
    }
    raw.push_back(std::move(r));
  }
  for (const Raw& r : raw) {
    const auto o = origin.find(r.step);
    if (o == origin.end()) {
      throw InputError("simulate", source, "traceEvents",
                       "events of step " + std::to_string(r.step) + " but no \"step\" event");
    }
    MeasuredStep& st = steps[r.step];
    st.step = r.step;
    const TimeNs start = r.start - o->second, end = r.end - o->second;
    if (const auto kind = timeline_kind(r.cat)) {
      st.timeline.entries.push_back(TimelineEntry{r.at.device, r.at.pipeline, r.at.stage, *kind,
                                                  r.microbatch, r.index, start, end});
    } else if (r.cat == "sync") {
      st.sync.push_back({r.at.device, start, end});
    } else if (r.cat == "send_wait") {
      st.send_wait.push_back({r.at.device, start, end});
    } else if (r.cat == "stretch") {
      st.stretch.push_back({r.at.device, start, end});
    } else if (r.cat == "step") {
      st.device_end[r.at.device] = end;
      st.iteration = std::max(st.iteration, end);
    }
  }
  // The latest step end on rank 0's clock, per step, for the periods of consecutive steps.
  std::map<std::int64_t, TimeNs> done;
  for (const Raw& r : raw) {
    if (r.cat != "step") continue;
    auto [it, fresh] = done.emplace(r.step, r.end);
    if (!fresh) it->second = std::max(it->second, r.end);
  }
  for (auto& [s, st] : steps) {
    const auto before = done.find(s - 1), now = done.find(s);
    if (before != done.end() && now != done.end()) st.period = now->second - before->second;
  }
  for (auto& [s, st] : steps) {
    std::stable_sort(st.timeline.entries.begin(), st.timeline.entries.end(),
                     [](const TimelineEntry& a, const TimelineEntry& b) { return a.start < b.start; });
    run.steps.push_back(std::move(st));
  }
  if (run.steps.empty()) {
    throw InputError("simulate", source, "traceEvents", "the trace holds no recorded step");
  }
  return run;
}

namespace {

// Adds the device's compute entries (and, `waits`, its receive waits) of `timeline` to `t`:
// where the simulated and measured sides count alike.
void add_compute(PhaseTimes& t, const Timeline& timeline, std::int64_t device, bool waits) {
  for (const TimelineEntry& e : timeline.entries) {
    if (e.device != device) continue;
    const double ms = ns_to_ms(e.end - e.start);
    if (e.kind == ActionKind::Forward) t.forward_ms += ms;
    if (e.kind == ActionKind::Backward) t.backward_ms += ms;
    if (e.kind == ActionKind::OptimizerStep) t.optimizer_ms += ms;
    const bool recv = e.kind == ActionKind::RecvActivation || e.kind == ActionKind::RecvGradient;
    if (waits && recv) t.wait_ms += ms;
  }
}

}  // namespace

PhaseTimes simulated_phase_times(const SimResult& sim, std::int64_t device) {
  PhaseTimes t;
  add_compute(t, sim.timeline, device, false);
  TimeNs last_backward_end = 0, opt_start = 0, opt_end = 0;
  for (const TimelineEntry& e : sim.timeline.entries) {
    if (e.device != device) continue;
    if (e.kind == ActionKind::Backward) last_backward_end = std::max(last_backward_end, e.end);
    if (e.kind == ActionKind::OptimizerStep) {
      opt_start = e.start;
      opt_end = e.end;
    }
  }
  // Idle time before the last backward; the max drops the rounding of summing ms.
  t.wait_ms = std::max(0.0, ns_to_ms(last_backward_end) - t.forward_ms - t.backward_ms);
  t.sync_ms = ns_to_ms(opt_start - last_backward_end);
  t.iteration_ms = ns_to_ms(opt_end);
  return t;
}

PhaseTimes measured_phase_times(const MeasuredStep& step, std::int64_t device) {
  PhaseTimes t;
  add_compute(t, step.timeline, device, true);
  for (const MeasuredSpan& s : step.send_wait) {
    if (s.device == device) t.wait_ms += ns_to_ms(s.end - s.start);
  }
  for (const MeasuredSpan& s : step.sync) {
    if (s.device == device) t.sync_ms += ns_to_ms(s.end - s.start);
  }
  const auto end = step.device_end.find(device);
  t.iteration_ms = end == step.device_end.end() ? 0 : ns_to_ms(end->second);
  return t;
}

namespace {

void add_scaled(PhaseTimes& to, const PhaseTimes& t, double w) {
  to.forward_ms += w * t.forward_ms;
  to.backward_ms += w * t.backward_ms;
  to.wait_ms += w * t.wait_ms;
  to.sync_ms += w * t.sync_ms;
  to.optimizer_ms += w * t.optimizer_ms;
  to.iteration_ms += w * t.iteration_ms;
}

}  // namespace

MeasuredComparison compare_measured(const Plan& plan, const SimResult& sim,
                                    const MeasuredRun& run) {
  ETH_CHECK(!run.steps.empty(), "compare_measured: no measured step");
  MeasuredComparison out;
  out.simulated_iteration_ms = sim.iteration_ms;
  const double per_step = 1.0 / static_cast<double>(run.steps.size());
  for (const MeasuredStep& st : run.steps) {
    out.steps.push_back(st.step);
    out.measured_iteration_ms += per_step * ns_to_ms(st.iteration_or_period());
  }
  for (std::size_t p = 0; p < plan.pipelines.size(); ++p) {
    const auto& stages = plan.pipelines[p].stages;
    for (std::size_t s = 0; s < stages.size(); ++s) {
      StagePhases sp;
      sp.pipeline = static_cast<std::int64_t>(p);
      sp.stage = static_cast<std::int64_t>(s);
      sp.device_type = stages[s].device_type;
      sp.devices = stages[s].devices;
      const double per_device = 1.0 / static_cast<double>(sp.devices.size());
      for (std::int64_t d : sp.devices) {
        add_scaled(sp.simulated, simulated_phase_times(sim, d), per_device);
        for (const MeasuredStep& st : run.steps) {
          add_scaled(sp.measured, measured_phase_times(st, d), per_device * per_step);
        }
      }
      out.stages.push_back(std::move(sp));
    }
  }
  return out;
}

double relative_error(double simulated, double measured) {
  if (measured == 0) {
    return simulated == 0 ? 0.0 : std::copysign(std::numeric_limits<double>::infinity(), simulated);
  }
  return (simulated - measured) / measured;
}

const MeasuredStep& median_step(const MeasuredRun& run) {
  ETH_CHECK(!run.steps.empty(), "median_step: no measured step");
  std::vector<std::size_t> order(run.steps.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return run.steps[a].iteration < run.steps[b].iteration;
  });
  return run.steps[order[(order.size() - 1) / 2]];
}

}  // namespace eth
