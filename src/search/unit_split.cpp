// The threshold dynamic program for the unit split (bottleneck first, then the sum under it),
// its exhaustive twin, and the least-memory split used to explain a plan that cannot fit.
#include "search/unit_split.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace eth::search {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double in_flight(std::size_t s, std::size_t num_stages) {
  return static_cast<double>(num_stages - s);
}

// Fills the per-stage details of a split from its boundaries.
UnitSplit describe(const std::vector<StageSlot>& stages, std::vector<std::int64_t> bounds) {
  UnitSplit out;
  out.feasible = true;
  out.bounds = std::move(bounds);
  const std::size_t S = stages.size();
  for (std::size_t s = 0; s < S; ++s) {
    const RangeCost c =
        range_cost(*stages[s].table, stages[s].capacity_bytes, static_cast<std::int64_t>(S - s),
                   out.bounds[s], out.bounds[s + 1]);
    ETH_CHECK(c.fits, "a split chosen by the planner does not fit memory");
    out.recompute.push_back(c.recompute);
    out.stage_ms.push_back(c.time_ms);
    out.memory_bytes.push_back(c.memory_bytes);
    out.max_ms = std::max(out.max_ms, c.time_ms);
    out.sum_ms += c.time_ms;
  }
  return out;
}

UnitSplit run_split_dp(const std::vector<StageSlot>& stages, std::int64_t num_units,
                       SplitScratch& scratch, double* bottleneck_io, double floor, double cap);

}  // namespace

UnitSplit split_units_dp(const std::vector<StageSlot>& stages, std::int64_t num_units) {
  SplitScratch scratch;
  return split_units_dp(stages, num_units, scratch);
}

UnitSplit split_units_dp(const std::vector<StageSlot>& stages, std::int64_t num_units,
                         SplitScratch& scratch) {
  return split_units_dp(stages, num_units, scratch, split_units_bottleneck(stages, num_units,
                                                                          scratch));
}

double split_units_bottleneck(const std::vector<StageSlot>& stages, std::int64_t num_units,
                              SplitScratch& scratch, double floor, double cap) {
  double bottleneck = kInf;
  run_split_dp(stages, num_units, scratch, &bottleneck, floor, cap);
  return bottleneck;
}

UnitSplit split_units_dp(const std::vector<StageSlot>& stages, std::int64_t num_units,
                         SplitScratch& scratch, double bottleneck) {
  if (bottleneck == kInf) return {};
  return run_split_dp(stages, num_units, scratch, &bottleneck, 0.0, bottleneck);
}

namespace {

// The earliest unit each stage can start at in any split whose stages all fit and take at
// most `cap` (start[S] = U): stage after stage from the back, each takes the longest range
// ending at the next one's earliest start (possibly none). A range that fits and keeps within
// cap leaves every sub-range so, so by induction from the back no such split starts a stage
// earlier. False when stage 0 cannot start at unit 0: no such split exists.
bool earliest_starts(const std::vector<StageSlot>& stages, std::size_t U, double cap,
                     std::vector<std::size_t>& start) {
  const std::size_t S = stages.size();
  start.assign(S + 1, U);
  for (std::size_t s = S; s-- > 0;) {
    const UnitTable& t = *stages[s].table;
    const double q = in_flight(s, S);
    const std::size_t end = start[s + 1];
    std::size_t i = end, position = 0;
    double ws = 0;
    while (i > 0) {
      ws = std::max(ws, t.workspace[i - 1]);
      const RangeCost c = range_cost_ws(t, stages[s].capacity_bytes, q, i - 1, end, ws, &position);
      if (!c.fits || c.time_ms > cap) break;
      --i;
    }
    start[s] = i;
  }
  return start[0] == 0;
}

// Phase 1 when *bottleneck is +infinity (writes the smallest bottleneck there, +infinity when
// nothing fits or it is above `cap`, and returns nothing; `floor` is at most the bottleneck,
// so values below it need no further improving); otherwise phase 2 under *bottleneck (cap is
// then the bottleneck), returning the split.
UnitSplit run_split_dp(const std::vector<StageSlot>& stages, std::int64_t num_units,
                       SplitScratch& scratch, double* bottleneck_io, double floor, double cap) {
  const std::size_t S = stages.size();
  const auto U = static_cast<std::size_t>(num_units);
  if (S == 0 || S > U) return {};
  const std::size_t W = U + 1;
  std::vector<std::size_t>& start = scratch.start;
  if (!earliest_starts(stages, U, cap, start)) return {};
  // best[s * W + j]: the value with stages 0..s covering units [0, j); from[...]: where stage s
  // starts in that optimum.
  std::vector<double>& best = scratch.best;
  std::vector<std::size_t>& from = scratch.from;
  best.assign(S * W, kInf);
  from.assign(S * W, 0);

  // Both phases fill best[s][j] from best[s - 1][i] over the range [i, j) of stage s, i only
  // where stage s - 1's value is finite ([lo, hi]) and from stage s's earliest start, j from
  // stage s + 1's, extending the range towards the front while it fits memory and can still
  // improve (a longer range never costs less). `combine(before, time)` is max (phase 1) or +
  // (phase 2); `origin` is the value before stage 0; `limit` caps a stage's time. Phase 1
  // starts at `floor` (the answer max(floor, bottleneck) is the bottleneck), so a value at it
  // is final.
  auto fill = [&](auto combine, double origin, double limit, bool strict_improve) {
    std::size_t lo = 0, hi = 0;  // before stage 0: only "no units" is reachable, at 0
    for (std::size_t s = 0; s < S; ++s) {
      const UnitTable& t = *stages[s].table;
      const double cap_bytes = stages[s].capacity_bytes, q = in_flight(s, S);
      std::size_t next_lo = W, next_hi = 0;
      const std::size_t first_j = std::max(std::max(s, lo) + 1, start[s + 1]);
      for (std::size_t j = first_j; j + (S - 1 - s) <= U; ++j) {
        const std::size_t top = std::min(hi, j - 1), bottom = std::max({lo, s, start[s]});
        double ws = 0;
        for (std::size_t u = top; u < j; ++u) ws = std::max(ws, t.workspace[u]);
        double b = kInf;
        std::size_t arg = 0;
        bool top_fits = true;
        std::size_t position = 0;  // the range only grows in this loop
        for (std::size_t i = top + 1; i-- > bottom;) {
          if (i < top) ws = std::max(ws, t.workspace[i]);
          const double before = s == 0 ? origin : best[(s - 1) * W + i];
          if (before == kInf || (strict_improve && before >= b)) continue;
          const RangeCost c = range_cost_ws(t, cap_bytes, q, i, j, ws, &position);
          if ((!c.fits || c.time_ms > limit) && i == top) top_fits = false;
          if (!c.fits || c.time_ms > limit || (strict_improve && c.time_ms >= b)) break;
          const double v = combine(before, c.time_ms);
          if (v < b) {
            b = v;
            arg = i;
          }
          if (strict_improve && b <= origin) break;  // nothing is below the floor
        }
        best[s * W + j] = b;
        from[s * W + j] = arg;
        if (b < kInf) {
          next_lo = std::min(next_lo, j);
          next_hi = std::max(next_hi, j);
        }
        // Past the reachable window every range only grows: none can fit (or keep within
        // the limit) any more.
        if (!top_fits && top < j - 1) break;
      }
      if (next_lo == W) return;  // stage s cannot end anywhere
      lo = next_lo;
      hi = next_hi;
    }
  };

  if (*bottleneck_io == kInf) {
    // Phase 1: the smallest bottleneck.
    fill([](double before, double time) { return std::max(before, time); }, floor, cap, true);
    *bottleneck_io = best[(S - 1) * W + U];
    return {};
  }
  const double bottleneck = *bottleneck_io;

  // Phase 2: the smallest sum with every stage at most the bottleneck.
  fill([](double before, double time) { return before + time; }, 0.0, bottleneck, false);
  ETH_CHECK(best[(S - 1) * W + U] < kInf, "unit split: no split meets the bottleneck it found");
  std::vector<std::int64_t> bounds(S + 1);
  bounds[S] = num_units;
  std::size_t j = U;
  for (std::size_t s = S; s-- > 0;) {
    j = from[s * W + j];
    bounds[s] = static_cast<std::int64_t>(j);
  }
  UnitSplit out = describe(stages, std::move(bounds));
  out.max_ms = bottleneck;
  out.sum_ms = best[(S - 1) * W + U];
  return out;
}

}  // namespace

double num_unit_splits(std::int64_t num_units, std::int64_t num_stages) {
  if (num_stages < 1 || num_stages > num_units) return 0;
  double c = 1;
  const std::int64_t n = num_units - 1, k = num_stages - 1;
  for (std::int64_t i = 1; i <= k; ++i) {
    c = c * static_cast<double>(n - k + i) / static_cast<double>(i);
  }
  return std::round(c);
}

namespace {

struct Enumeration {
  const std::vector<StageSlot>* stages;
  std::size_t units;
  std::vector<std::int64_t> bounds;
  std::vector<std::int64_t> best_bounds;
  double best_max = kInf, best_sum = kInf;

  // Stage s starts at bounds[s]; tries every end, carrying the running max and sum.
  void visit(std::size_t s, double run_max, double run_sum) {
    const std::size_t S = stages->size();
    const std::size_t i = static_cast<std::size_t>(bounds[s]);
    const StageSlot& slot = (*stages)[s];
    const std::size_t last_end = s + 1 == S ? units : units - (S - 1 - s);
    const std::size_t first_end = s + 1 == S ? units : i + 1;
    for (std::size_t j = first_end; j <= last_end; ++j) {
      const RangeCost c =
          range_cost(*slot.table, slot.capacity_bytes, static_cast<std::int64_t>(S - s),
                     static_cast<std::int64_t>(i), static_cast<std::int64_t>(j));
      if (!c.fits) continue;  // this split (and every one sharing this stage) is out
      const double m = std::max(run_max, c.time_ms), sum = run_sum + c.time_ms;
      bounds[s + 1] = static_cast<std::int64_t>(j);
      if (s + 1 == S) {
        if (m < best_max || (m == best_max && sum < best_sum)) {
          best_max = m;
          best_sum = sum;
          best_bounds = bounds;
        }
      } else {
        visit(s + 1, m, sum);
      }
    }
  }
};

}  // namespace

UnitSplit split_units_enumerate(const std::vector<StageSlot>& stages, std::int64_t num_units) {
  const std::size_t S = stages.size();
  if (S == 0 || S > static_cast<std::size_t>(num_units)) return {};
  Enumeration e{
      &stages, static_cast<std::size_t>(num_units), std::vector<std::int64_t>(S + 1, 0), {}, kInf,
      kInf};
  e.visit(0, 0.0, 0.0);
  if (e.best_max == kInf) return {};
  UnitSplit out = describe(stages, e.best_bounds);
  out.max_ms = e.best_max;
  out.sum_ms = e.best_sum;
  return out;
}

MemoryFloor least_memory_split(const std::vector<StageSlot>& stages, std::int64_t num_units) {
  const std::size_t S = stages.size();
  const auto U = static_cast<std::size_t>(num_units);
  MemoryFloor out;
  out.worst_ratio = kInf;
  if (S == 0 || S > U) return out;
  const std::size_t W = U + 1;
  // Least bytes of units [i, j) on stage s, given the range's workspace.
  auto least = [&](std::size_t s, std::size_t i, std::size_t j, double ws) {
    const UnitTable& t = *stages[s].table;
    double m = kInf;
    for (std::size_t r = 0; r < kNumRecomputeCandidates; ++r) {
      m = std::min(m, t.static_prefix[j] - t.static_prefix[i] + ws +
                          in_flight(s, S) * (t.held_prefix[r][j] - t.held_prefix[r][i]));
    }
    return m;
  };
  std::vector<double> best(S * W, kInf);
  std::vector<std::size_t> from(S * W, 0);
  for (std::size_t s = 0; s < S; ++s) {
    const UnitTable& t = *stages[s].table;
    for (std::size_t j = s + 1; j + (S - 1 - s) <= U; ++j) {
      double ws = 0;
      for (std::size_t i = j; i-- > s;) {
        ws = std::max(ws, t.workspace[i]);
        if (s == 0 && i != 0) continue;
        const double before = s == 0 ? 0.0 : best[(s - 1) * W + i];
        const double v = std::max(before, least(s, i, j, ws) / stages[s].capacity_bytes);
        if (v < best[s * W + j]) {
          best[s * W + j] = v;
          from[s * W + j] = i;
        }
      }
    }
  }
  out.worst_ratio = best[(S - 1) * W + U];
  out.bounds.assign(S + 1, 0);
  out.bounds[S] = num_units;
  std::size_t j = U;
  for (std::size_t s = S; s-- > 0;) {
    j = from[s * W + j];
    out.bounds[s] = static_cast<std::int64_t>(j);
  }
  for (std::size_t s = 0; s < S; ++s) {
    const auto i = static_cast<std::size_t>(out.bounds[s]);
    const auto e = static_cast<std::size_t>(out.bounds[s + 1]);
    const auto& w = stages[s].table->workspace;
    const double ws = *std::max_element(w.begin() + static_cast<std::ptrdiff_t>(i),
                                        w.begin() + static_cast<std::ptrdiff_t>(e));
    out.memory_bytes.push_back(least(s, i, e, ws));
  }
  return out;
}

}  // namespace eth::search
