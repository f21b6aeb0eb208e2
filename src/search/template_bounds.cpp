// TemplateEvaluator's costlier lower-bound terms (search/template_evaluator.h, whose comments
// state what each bounds): the whole-unit count bound and the speed and memory bound.
#include "search/template_evaluator.h"

#include <algorithm>
#include <numeric>
#include <vector>

namespace eth::search {

bool TemplateEvaluator::exceeds(int tpl, std::size_t mi, double v) {
  const std::vector<StageSlot>& slots = slots_of(set_.at(tpl), ctx_.opt.micro_batch_sizes[mi]);
  const auto U = static_cast<std::size_t>(ctx_.num_units());
  const std::size_t S = slots.size();
  if (S == 0) return false;
  std::size_t reach = 0;
  for (std::size_t s = 0; s < S && reach < U; ++s) {
    const UnitTable& t = *slots[s].table;
    const double capacity = slots[s].capacity_bytes;
    const auto q = static_cast<double>(S - s);
    std::size_t j = reach, position = 0;
    double ws = 0;
    bool too_slow_first = false;  // the first unit fits at the cheapest set, above v
    while (j < U) {
      ws = std::max(ws, t.workspace[j]);
      const RangeCost c = range_cost_ws(t, capacity, q, reach, j + 1, ws, &position);
      if (!c.fits || c.time_ms > v) {
        too_slow_first =
            j == reach && c.fits && position == 0 && t.rc_first_fit && !t.rc_order.empty();
        break;
      }
      ++j;
    }
    reach = j;
    // The next stages of the same table and memory hold fewer micro-batches, so that set fits
    // them too (memory falls with q) and first fit picks it again at the same time: none of
    // them takes a unit either.
    if (too_slow_first) {
      while (s + 1 < S && slots[s + 1].table == &t && slots[s + 1].capacity_bytes == capacity) {
        ++s;
      }
    }
  }
  return reach < U;
}

double TemplateEvaluator::count_bound(const PipelineTemplate& t, std::int64_t mbs, double known) {
  const std::int64_t S = t.num_stages();
  const auto U = static_cast<std::size_t>(ctx_.num_units());
  std::vector<CountGroup>& groups = count_groups_;
  if (groups.size() < t.groups.size()) groups.resize(t.groups.size());
  std::size_t held = 0;
  double hi = 0, lo = known;
  std::int64_t s = 0;
  for (std::size_t gi = 0; gi < t.groups.size(); ++gi) {
    const StageGroup& g = t.groups[gi];
    const TypeInfo& type = ctx_.types[static_cast<std::size_t>(g.type)];
    const UnitTable& tab = *table(g.type, g.tp, mbs);
    CountGroup& grp = groups[gi];
    grp.sums = &cheapest_sums(tab);
    grp.most.clear();
    grp.prefix.assign(1, 0);
    for (std::int64_t k = 0; k < g.count; ++k, ++s) {
      grp.most.push_back(range_fit(tab, type.capacity_bytes, S - s).max_units);
      if (grp.most.back() == 0) return kInf;  // a stage that holds no unit at all
      held += grp.most.back();
    }
    // In-flight counts fall along the group, so N_s rarely needs sorting.
    if (!std::is_sorted(grp.most.begin(), grp.most.end())) {
      std::sort(grp.most.begin(), grp.most.end());
    }
    for (std::size_t m : grp.most) grp.prefix.push_back(grp.prefix.back() + m);
    const auto& p = *grp.sums;
    const auto n = std::min(static_cast<std::size_t>(g.count), U);
    // The group's stages hold distinct units, one at least each: its slowest stage holds a
    // unit no cheaper than the n-th cheapest.
    lo = std::max(lo, (p[n] - p[n - 1]) * (1.0 - 1e-12));
    hi = std::max(hi, p.back());
  }
  if (held < U) return kInf;
  const std::size_t n_groups = t.groups.size();
  auto units_within = [&](double tau) {
    std::size_t n = 0;
    for (std::size_t gi = 0; gi < n_groups; ++gi) {
      const CountGroup& g = groups[gi];
      const auto& p = *g.sums;
      const auto k = static_cast<std::size_t>(
          std::upper_bound(p.begin(), p.end(), tau) - p.begin() - 1);
      if (k == 0) return std::size_t{0};  // every stage holds at least one unit
      // sum_s min(k, N_s) over the group's stages.
      const auto below = static_cast<std::size_t>(
          std::upper_bound(g.most.begin(), g.most.end(), k) - g.most.begin());
      std::size_t cap = g.prefix[below] + k * (g.most.size() - below);
      // Distinct units in |g| stages of at most tau each: at most the m cheapest with
      // sum <= |g| x tau.
      const double all = tau * static_cast<double>(g.most.size());
      const auto m = static_cast<std::size_t>(
          std::upper_bound(p.begin(), p.end(), all) - p.begin() - 1);
      n += std::min(cap, m);
    }
    return n;
  };
  if (units_within(lo) >= U) return lo;  // no better than what is known
  // Gallop up from lo, then bisect a few times: any tau found short of U is a valid bound,
  // so precision only costs tightness.
  const double base = lo;
  for (double step = 0.05; base > 0 && base * (1.0 + step) < hi; step *= 2) {
    const double probe = base * (1.0 + step);
    if (units_within(probe) >= U) {
      hi = probe;
      break;
    }
    lo = probe;
  }
  for (int it = 0; it < 6; ++it) {
    const double mid = lo + (hi - lo) / 2;
    (units_within(mid) >= U ? hi : lo) = mid;
  }
  return lo;
}

TemplateEvaluator::SpeedBound TemplateEvaluator::speed_bound(const PipelineTemplate& t,
                                                             std::int64_t mbs, bool any_order) {
  const auto& w = unit_work();
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  if (total <= 0) return {};
  const std::int64_t S = t.num_stages();
  // One run of caps per group, in pipeline order. Further on fewer micro-batches are in flight
  // (with any_order all alike), so a run's stages hold non-decreasing work at one speed: sorted
  // by a and by a x m. The two orders below are then merges of runs, not sorts (templates are
  // bounded by the ten thousand); a run whose order rounding broke is sorted first.
  std::vector<StageCap>& caps = caps_;
  caps.clear();
  cap_runs_.clear();
  bool runs_sorted = true;
  std::int64_t s = 0;
  for (const StageGroup& g : t.groups) {
    const TypeInfo& type = ctx_.types[static_cast<std::size_t>(g.type)];
    const UnitTable& tab = *table(g.type, g.tp, mbs);
    const double a = time_per_work(tab);
    const std::size_t begin = caps.size();
    for (std::int64_t k = 0; k < g.count; ++k, ++s) {
      caps.push_back({a, memory_work(tab, type.capacity_bytes, any_order ? 1 : S - s)});
      runs_sorted = runs_sorted && (k == 0 || caps[caps.size() - 2].m <= caps.back().m);
    }
    cap_runs_.push_back({begin, caps.size()});
  }
  if (!runs_sorted) {
    for (const CapRun& r : cap_runs_) {
      std::sort(caps.begin() + static_cast<std::ptrdiff_t>(r.begin),
                caps.begin() + static_cast<std::ptrdiff_t>(r.end),
                [](const StageCap& x, const StageCap& y) { return x.m < y.m; });
    }
  }
  SpeedBound out;
  // (2): fastest stages first (runs by speed; equal speeds in pipeline order).
  std::stable_sort(cap_runs_.begin(), cap_runs_.end(), [&](const CapRun& x, const CapRun& y) {
    return caps[x.begin].a < caps[y.begin].a;
  });
  double left = total;
  for (const CapRun& r : cap_runs_) {
    for (std::size_t i = r.begin; i < r.end && left > 0; ++i) {
      const double take = std::min(left, caps[i].m);
      out.sum_ms += caps[i].a * take;
      left -= take;
    }
  }
  if (left > 0) return {kInf, kInf};
  // (1): f(tau) = sum_s min(tau / a_s, M_s); stage s saturates at tau_s = a_s M_s, taken in
  // increasing order by merging the runs.
  double saturated = 0, rate = 0;  // work of saturated stages; sum of 1 / a_s of the others
  for (const StageCap& c : caps) rate += c.a > 0 ? 1.0 / c.a : kInf;
  if (rate == kInf) return {0, 0};
  for (std::size_t n = 0; n < caps.size(); ++n) {
    CapRun* next = nullptr;
    for (CapRun& r : cap_runs_) {
      if (r.begin == r.end) continue;
      const StageCap& c = caps[r.begin];
      if (next == nullptr || c.a * c.m < caps[next->begin].a * caps[next->begin].m) next = &r;
    }
    const StageCap& c = caps[next->begin++];
    const double tau_s = c.a * c.m;
    // Below tau_s, f(tau) = saturated + tau * rate.
    if (rate > 0 && saturated + tau_s * rate >= total) {
      out.max_ms = (total - saturated) / rate;
      return out;
    }
    saturated += c.m;
    rate -= 1.0 / c.a;
    if (rate < 0) rate = 0;
    out.max_ms = tau_s;  // the last stage's, should every stage saturate first
  }
  return out;
}

}  // namespace eth::search
