// Exact min-max data split over pipelines whose times are step functions of their batch.
#include "search/data_balance.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace eth::search {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

// sum + j * max: the time of a pipeline running j + 1 micro-batches (every caller builds it the
// same way, so equal values compare equal bit for bit).
double step_time(const MicroBatchOption& o, std::int64_t j) {
  return o.sum_ms + static_cast<double>(j) * o.max_ms;
}

// option_max_batch, inlined: data balance's bisection calls it millions of times per search.
[[gnu::always_inline]] inline std::int64_t max_batch(const MicroBatchOption& o, double target_ms,
                                                     std::int64_t cap) {
  if (target_ms < o.sum_ms || cap < 1) return 0;
  if (o.max_ms <= 0) return cap;
  const double steps = std::floor((target_ms - o.sum_ms) / o.max_ms);
  // j extra micro-batches fit; cap first so huge targets cannot overflow.
  const auto cap_steps = (cap + o.mbs - 1) / o.mbs;
  auto j = static_cast<std::int64_t>(std::min(steps, static_cast<double>(cap_steps)));
  while (j > 0 && step_time(o, j) > target_ms) --j;
  while (j < cap_steps && step_time(o, j + 1) <= target_ms) ++j;
  return std::min(cap, (j + 1) * o.mbs);
}

std::int64_t kind_max_batch(const PipelineKind& k, double target, std::int64_t cap) {
  std::int64_t b = 0;
  for (const auto& o : k.options) b = std::max(b, max_batch(o, target, cap));
  return b;
}

bool feasible(const std::vector<PipelineKind>& kinds, double target, std::int64_t gbs) {
  std::int64_t total = 0;
  for (const auto& k : kinds) {
    const std::int64_t b = kind_max_batch(k, target, gbs);
    if (b < 1) return false;
    total += k.count * b;
    if (total >= gbs) total = gbs;  // no overflow; keep checking every kind gets >= 1
  }
  return total >= gbs;
}

double kind_time(const PipelineKind& k, std::int64_t batch, int* which) {
  double best = kInf;
  for (std::size_t i = 0; i < k.options.size(); ++i) {
    const double t = option_time_ms(k.options[i], batch);
    if (t < best) {
      best = t;
      if (which) *which = static_cast<int>(i);
    }
  }
  return best;
}

// The smallest step value of any option strictly above `lo`.
double next_breakpoint(const std::vector<PipelineKind>& kinds, double lo) {
  double next = kInf;
  for (const auto& k : kinds) {
    for (const auto& o : k.options) {
      if (lo < o.sum_ms) {
        next = std::min(next, o.sum_ms);
        continue;
      }
      if (o.max_ms <= 0) continue;  // a flat step function never steps again
      auto j = static_cast<std::int64_t>(std::floor((lo - o.sum_ms) / o.max_ms)) + 1;
      while (j > 0 && step_time(o, j - 1) > lo) --j;
      while (step_time(o, j) <= lo) ++j;
      next = std::min(next, step_time(o, j));
    }
  }
  return next;
}

}  // namespace

double option_time_ms(const MicroBatchOption& o, std::int64_t batch) {
  const std::int64_t k = (batch + o.mbs - 1) / o.mbs;
  return step_time(o, k - 1);
}

std::int64_t option_max_batch(const MicroBatchOption& o, double target_ms, std::int64_t cap) {
  return max_batch(o, target_ms, cap);
}

double balanced_time_ms(const std::vector<PipelineKind>& kinds, std::int64_t gbs) {
  std::int64_t pipelines = 0;
  for (const auto& k : kinds) {
    ETH_CHECK(!k.options.empty() && k.count >= 1, "data balance: a kind without options");
    pipelines += k.count;
  }
  if (pipelines == 0 || pipelines > gbs) return kInf;
  // Every pipeline takes at least one sample: the target is at least the slowest first sample.
  double lo = 0, hi = 0;
  for (const auto& k : kinds) {
    lo = std::max(lo, kind_time(k, 1, nullptr));
    hi = std::max(hi, kind_time(k, gbs, nullptr));
  }
  if (feasible(kinds, lo, gbs)) return lo;
  // Invariant: lo infeasible, hi feasible.
  // Coarse on purpose: the walk below finishes exactly, one breakpoint at a time.
  for (int it = 0; it < 200 && hi - lo > 1e-6 * hi; ++it) {
    const double mid = lo + (hi - lo) / 2;
    if (mid <= lo || mid >= hi) break;
    (feasible(kinds, mid, gbs) ? hi : lo) = mid;
  }
  // Feasibility changes only at step values: walk the few left between lo and hi.
  for (;;) {
    const double c = next_breakpoint(kinds, lo);
    if (c >= hi) return hi;
    if (feasible(kinds, c, gbs)) return c;
    lo = c;
  }
}

double balanced_lower_ms(const std::vector<PipelineKind>& kinds, std::int64_t gbs, double cap,
                         double rel) {
  std::int64_t pipelines = 0;
  for (const auto& k : kinds) pipelines += k.count;
  if (pipelines == 0 || pipelines > gbs) return kInf;
  double lo = 0;
  for (const auto& k : kinds) lo = std::max(lo, kind_time(k, 1, nullptr));
  if (feasible(kinds, lo, gbs)) return lo;  // exact: every pipeline at one sample is the bound
  if (!(cap < kInf)) return balanced_time_ms(kinds, gbs);
  // The bound is a step value strictly above `cap` when cap is infeasible.
  if (cap <= lo || !feasible(kinds, cap, gbs)) return std::max(lo, std::nextafter(cap, kInf));
  // Invariant: lo infeasible (the bound is above it), cap feasible.
  double hi = cap;
  for (int it = 0; it < 64 && hi - lo > rel * hi; ++it) {
    const double mid = lo + (hi - lo) / 2;
    if (mid <= lo || mid >= hi) break;
    (feasible(kinds, mid, gbs) ? hi : lo) = mid;
  }
  return lo;
}

DataSplit balance_data(const std::vector<PipelineKind>& kinds, std::int64_t gbs) {
  DataSplit out;
  const double target = balanced_time_ms(kinds, gbs);
  if (target == kInf) return out;
  std::vector<const PipelineKind*> kind_of;
  for (const auto& k : kinds) {
    for (std::int64_t i = 0; i < k.count; ++i) {
      kind_of.push_back(&k);
      out.batch.push_back(kind_max_batch(k, target, gbs));
    }
  }
  const std::size_t P = kind_of.size();
  std::vector<double> t(P);
  for (std::size_t p = 0; p < P; ++p) t[p] = kind_time(*kind_of[p], out.batch[p], nullptr);
  std::int64_t total = 0;
  for (auto b : out.batch) total += b;
  for (; total > gbs; --total) {
    std::size_t pick = P;
    for (std::size_t p = 0; p < P; ++p) {
      if (out.batch[p] <= 1) continue;
      if (pick == P || t[p] > t[pick] || (t[p] == t[pick] && out.batch[p] > out.batch[pick])) {
        pick = p;
      }
    }
    ETH_CHECK(pick < P, "data balance: surplus left with every pipeline at one sample");
    --out.batch[pick];
    t[pick] = kind_time(*kind_of[pick], out.batch[pick], nullptr);
  }
  out.option.assign(P, 0);
  out.pipeline_ms.assign(P, 0);
  for (std::size_t p = 0; p < P; ++p) {
    out.pipeline_ms[p] = kind_time(*kind_of[p], out.batch[p], &out.option[p]);
    out.time_ms = std::max(out.time_ms, out.pipeline_ms[p]);
  }
  ETH_CHECK(out.time_ms <= target, "data balance: the split is slower than its target");
  out.feasible = true;
  return out;
}

}  // namespace eth::search
