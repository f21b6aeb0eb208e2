// check_timeline: the rules of timeline_check.h, each a short loop over per-device indexes.
#include "sim/timeline_check.h"

#include <algorithm>
#include <map>

namespace eth {

namespace {

using Ns = TimeNs;

struct Span {
  Ns start = -1, end = -1;
  bool present() const { return start >= 0; }
};

struct DeviceView {
  std::int64_t pipeline = -1, stage = -1;
  // Per micro-batch intervals (start = -1 when missing), duplicates counted.
  std::vector<Span> f, b, sa, ra, sg, rg;
  std::vector<int> count_f, count_b;
  std::vector<Span> compute, sends, recvs, reduces;
  std::map<std::int64_t, Span> reduce_of;  // collective -> interval
  std::map<std::int64_t, Span> gather_of;  // weight gather (SimOptions) -> interval
  Span opt;
  int count_opt = 0;
};

std::string dev(std::int64_t d) { return "device " + std::to_string(d); }
std::string fmt(Ns t) { return std::to_string(t) + " ns"; }

void check_no_overlap(std::vector<Span> v, const std::string& what, std::vector<std::string>& out) {
  std::sort(v.begin(), v.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
  for (std::size_t i = 1; i < v.size(); ++i) {
    if (v[i].start < v[i - 1].end) {
      out.push_back(what + ": [" + fmt(v[i - 1].start) + ", " + fmt(v[i - 1].end) + ") overlaps [" +
                    fmt(v[i].start) + ", " + fmt(v[i].end) + ")");
    }
  }
}

using Views = std::map<std::int64_t, DeviceView>;

// One device's compute, transfers and step against its costs and neighbours.
void check_device(const Plan& plan, const std::vector<PipelineCosts>& costs, Views& views,
                  std::int64_t d, const DeviceView& v, std::vector<std::string>& out) {
  const auto& pipe = plan.pipelines[static_cast<std::size_t>(v.pipeline)];
  const auto& pc = costs[static_cast<std::size_t>(v.pipeline)];
  const auto s = static_cast<std::size_t>(v.stage);
  const std::size_t S = pipe.stages.size();
  const std::size_t k = v.f.size();
  const std::string who = dev(d) + " (pipeline " + std::to_string(v.pipeline) + " stage " +
                          std::to_string(v.stage) + ")";
  check_no_overlap(v.compute, who + " compute", out);
  check_no_overlap(v.sends, who + " outgoing link", out);
  check_no_overlap(v.recvs, who + " incoming link", out);
  check_no_overlap(v.reduces, who + " collectives", out);
  // Devices of the neighbouring stages (any one: they run in lockstep).
  const std::int64_t next = s + 1 < S ? pipe.stages[s + 1].devices.front() : -1;
  for (std::size_t mb = 0; mb < k; ++mb) {
    const std::string m = " micro-batch " + std::to_string(mb);
    if (v.count_f[mb] != 1 || v.count_b[mb] != 1) {
      out.push_back(who + m + ": " + std::to_string(v.count_f[mb]) + " forwards and " +
                    std::to_string(v.count_b[mb]) + " backwards");
      continue;
    }
    const StageCost& c = mb + 1 == k ? pc.last[s] : pc.full[s];
    if (v.f[mb].end - v.f[mb].start != ms_to_ns(c.forward_ms))
      out.push_back(who + m + ": forward length");
    if (v.b[mb].end - v.b[mb].start != ms_to_ns(c.backward_ms))
      out.push_back(who + m + ": backward length");
    if (v.b[mb].start < v.f[mb].end)
      out.push_back(who + m + ": backward before its forward ended");
    if (s > 0) {
      if (!v.ra[mb].present())
        out.push_back(who + m + ": no activation received");
      else if (v.f[mb].start < v.ra[mb].end)
        out.push_back(who + m + ": forward before its activation arrived");
      if (!v.sg[mb].present())
        out.push_back(who + m + ": no gradient sent");
      else if (v.sg[mb].start < v.b[mb].end)
        out.push_back(who + m + ": gradient sent before backward ended");
    }
    if (s + 1 < S) {
      if (!v.sa[mb].present()) {
        out.push_back(who + m + ": no activation sent");
      } else {
        if (v.sa[mb].start < v.f[mb].end)
          out.push_back(who + m + ": activation sent before forward ended");
        if (v.sa[mb].end - v.sa[mb].start != ms_to_ns(c.send_ms))
          out.push_back(who + m + ": activation send length");
        const DeviceView& n = views[next];
        if (n.ra[mb].start != v.sa[mb].start || n.ra[mb].end != v.sa[mb].end) {
          out.push_back(who + m + ": the next stage's receive differs from the send");
        }
        if (!n.sg[mb].present() || v.rg[mb].start != n.sg[mb].start ||
            v.rg[mb].end != n.sg[mb].end) {
          out.push_back(who + m + ": the gradient receive differs from the next stage's send");
        }
        if (v.rg[mb].end - v.rg[mb].start != ms_to_ns(c.send_ms))
          out.push_back(who + m + ": gradient transfer length");
      }
      if (!v.rg[mb].present())
        out.push_back(who + m + ": no gradient received");
      else if (v.b[mb].start < v.rg[mb].end)
        out.push_back(who + m + ": backward before its gradient arrived");
    }
  }
  Ns my_reduce_end = 0;
  for (const auto& [c, sp] : v.reduce_of) my_reduce_end = std::max(my_reduce_end, sp.end);
  Ns my_backward_end = 0;
  for (const Span& b : v.b) my_backward_end = std::max(my_backward_end, b.end);
  if (v.count_opt > 1) out.push_back(who + ": more than one optimizer step");
  if (v.count_opt == 1) {
    if (v.opt.start < my_reduce_end)
      out.push_back(who + ": optimizer step before its collectives ended");
    if (v.opt.start < my_backward_end)
      out.push_back(who + ": optimizer step before backward ended");
    const double opt_ms = s < pc.optimizer_ms.size() ? pc.optimizer_ms[s] : 0.0;
    if (v.opt.end - v.opt.start != ms_to_ns(opt_ms)) out.push_back(who + ": optimizer length");
  }
}

void check_collectives(const Plan& plan, const std::vector<PipelineCosts>& costs,
                       const std::vector<SimCollective>& collectives, const SimOptions& options,
                       const Views& views, Ns all_backward_end, std::vector<std::string>& out) {
  // Collectives: one entry per holder, a common interval of the priced length, after readiness.
  for (std::size_t c = 0; c < collectives.size(); ++c) {
    const SimCollective& col = collectives[c];
    Span common;
    for (std::int64_t h : col.holders) {
      const std::string who = "collective " + std::to_string(c) + " on " + dev(h);
      auto vit = views.find(h);
      if (vit == views.end() || !vit->second.reduce_of.count(static_cast<std::int64_t>(c))) {
        out.push_back(who + ": missing");
        continue;
      }
      const DeviceView& v = vit->second;
      const Span sp = v.reduce_of.at(static_cast<std::int64_t>(c));
      if (!common.present()) common = sp;
      if (sp.start != common.start || sp.end != common.end)
        out.push_back(who + ": holders disagree on its interval");
      if (sp.end - sp.start != ms_to_ns(col.duration_ms)) out.push_back(who + ": length");
      Ns ready = all_backward_end;
      if (options.overlap) {
        // The holder's last backward (largest micro-batch: both schedules end with it) has
        // passed unit max(ready_unit, first): units run last to first.
        const auto& st = plan.pipelines[static_cast<std::size_t>(v.pipeline)]
                             .stages[static_cast<std::size_t>(v.stage)];
        const auto& cost =
            costs[static_cast<std::size_t>(v.pipeline)].last[static_cast<std::size_t>(v.stage)];
        const Span lb = v.b.back();
        const std::int64_t u = std::max(col.ready_unit, st.first_unit);
        double ms = 0;
        for (std::int64_t x = u; x <= st.last_unit; ++x)
          ms += cost.unit_backward_ms[static_cast<std::size_t>(x - st.first_unit)];
        ready = u > st.last_unit ? lb.end : std::min(lb.start + ms_to_ns(ms), lb.end);
      }
      if (sp.start < ready) {
        out.push_back(who + ": starts at " + fmt(sp.start) +
                      " before the holder's gradients are final at " + fmt(ready));
      }
    }
  }
}

void check_weight_gathers(const SimOptions& options, const Views& views,
                          std::vector<std::string>& out) {
  // Weight gathers: one entry per holder, a common interval of the priced length, after the
  // holder's optimizer step (collectives and gathers of a device never overlap: above).
  for (std::size_t g = 0; g < options.weight_gathers.size(); ++g) {
    const SimCollective& w = options.weight_gathers[g];
    Span common;
    for (std::int64_t h : w.holders) {
      const std::string who = "weight gather " + std::to_string(g) + " on " + dev(h);
      auto vit = views.find(h);
      if (vit == views.end() || !vit->second.gather_of.count(static_cast<std::int64_t>(g))) {
        out.push_back(who + ": missing");
        continue;
      }
      const Span sp = vit->second.gather_of.at(static_cast<std::int64_t>(g));
      if (!common.present()) common = sp;
      if (sp.start != common.start || sp.end != common.end)
        out.push_back(who + ": holders disagree on its interval");
      if (sp.end - sp.start != ms_to_ns(w.duration_ms)) out.push_back(who + ": length");
      if (vit->second.count_opt == 1 && sp.start < vit->second.opt.end)
        out.push_back(who + ": starts before the holder's optimizer step ended");
    }
  }
}

}  // namespace

std::vector<std::string> check_timeline(const Plan& plan, const std::vector<PipelineCosts>& costs,
                                        const std::vector<SimCollective>& collectives,
                                        const SimResult& result, const SimOptions& options) {
  std::vector<std::string> out;
  std::map<std::int64_t, DeviceView> views;
  for (std::size_t p = 0; p < plan.pipelines.size(); ++p) {
    const auto& pipe = plan.pipelines[p];
    const auto k = static_cast<std::size_t>(pipe.num_microbatches());
    for (std::size_t s = 0; s < pipe.stages.size(); ++s) {
      for (std::int64_t d : pipe.stages[s].devices) {
        DeviceView& v = views[d];
        v.pipeline = static_cast<std::int64_t>(p);
        v.stage = static_cast<std::int64_t>(s);
        for (auto* vec : {&v.f, &v.b, &v.sa, &v.ra, &v.sg, &v.rg}) vec->assign(k, Span{});
        v.count_f.assign(k, 0);
        v.count_b.assign(k, 0);
      }
    }
  }
  Ns last_end = 0;
  for (const auto& e : result.timeline.entries) {
    last_end = std::max(last_end, e.end);
    auto it = views.find(e.device);
    if (it == views.end()) {
      out.push_back(dev(e.device) + ": not a device of the plan");
      continue;
    }
    DeviceView& v = it->second;
    const Span sp{e.start, e.end};
    if (e.end < e.start) out.push_back(dev(e.device) + ": an interval ends before it starts");
    const bool mb_ok = e.microbatch >= 0 && static_cast<std::size_t>(e.microbatch) < v.f.size();
    const auto mb = static_cast<std::size_t>(std::max<std::int64_t>(e.microbatch, 0));
    if (e.kind != ActionKind::ReduceGradients && e.kind != ActionKind::OptimizerStep && !mb_ok) {
      out.push_back(dev(e.device) + ": micro-batch " + std::to_string(e.microbatch) +
                    " out of range");
      continue;
    }
    switch (e.kind) {
      case ActionKind::Forward:
        v.f[mb] = sp;
        ++v.count_f[mb];
        v.compute.push_back(sp);
        break;
      case ActionKind::Backward:
        v.b[mb] = sp;
        ++v.count_b[mb];
        v.compute.push_back(sp);
        break;
      case ActionKind::OptimizerStep:
        v.opt = sp;
        ++v.count_opt;
        v.compute.push_back(sp);
        break;
      case ActionKind::SendActivation:
        v.sa[mb] = sp;
        v.sends.push_back(sp);
        break;
      case ActionKind::SendGradient:
        v.sg[mb] = sp;
        v.sends.push_back(sp);
        break;
      case ActionKind::RecvActivation:
        v.ra[mb] = sp;
        v.recvs.push_back(sp);
        break;
      case ActionKind::RecvGradient:
        v.rg[mb] = sp;
        v.recvs.push_back(sp);
        break;
      case ActionKind::ReduceGradients:
        if (e.block >= static_cast<std::int64_t>(collectives.size())) {
          const std::int64_t g = e.block - static_cast<std::int64_t>(collectives.size());
          if (v.gather_of.count(g))
            out.push_back(dev(e.device) + ": weight gather " + std::to_string(g) + " twice");
          v.gather_of[g] = sp;
          v.reduces.push_back(sp);
          break;
        }
        if (v.reduce_of.count(e.block))
          out.push_back(dev(e.device) + ": collective " + std::to_string(e.block) + " twice");
        v.reduce_of[e.block] = sp;
        v.reduces.push_back(sp);
        break;
    }
  }
  if (last_end != ms_to_ns(result.iteration_ms) &&
      std::llabs(last_end - ms_to_ns(result.iteration_ms)) > 1) {
    out.push_back("iteration time " + fmt(ms_to_ns(result.iteration_ms)) + " is not the last end " +
                  fmt(last_end));
  }

  // The last backward of every device and, for no-overlap, of the whole plan.
  Ns all_backward_end = 0;
  for (auto& [d, v] : views) {
    for (const Span& s : v.b) all_backward_end = std::max(all_backward_end, s.end);
  }

  for (auto& [d, v] : views) check_device(plan, costs, views, d, v, out);
  check_collectives(plan, costs, collectives, options, views, all_backward_end, out);
  check_weight_gathers(options, views, out);
  return out;
}

}  // namespace eth
