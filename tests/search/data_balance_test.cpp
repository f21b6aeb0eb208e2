// Inter-pipeline data balance against brute force: every split of small global batches over a
// few pipelines, every micro-batch size per pipeline.
#include "search/data_balance.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <random>

namespace eth::search {
namespace {

// min over splits (B_p >= 1, sum = gbs) of max_p min_m T_p,m(B_p), T = sum + (ceil(B/m)-1)*max.
double brute_force(const std::vector<std::vector<MicroBatchOption>>& pipes, std::int64_t gbs) {
  const std::size_t P = pipes.size();
  double best = std::numeric_limits<double>::infinity();
  std::vector<std::int64_t> b(P, 0);
  std::function<void(std::size_t, std::int64_t)> rec = [&](std::size_t p, std::int64_t left) {
    if (p + 1 == P) {
      if (left < 1) return;
      b[p] = left;
      double worst = 0;
      for (std::size_t q = 0; q < P; ++q) {
        double t = std::numeric_limits<double>::infinity();
        for (const auto& o : pipes[q]) {
          const auto k = (b[q] + o.mbs - 1) / o.mbs;
          t = std::min(t, o.sum_ms + static_cast<double>(k - 1) * o.max_ms);
        }
        worst = std::max(worst, t);
      }
      best = std::min(best, worst);
      return;
    }
    for (std::int64_t x = 1; x <= left - static_cast<std::int64_t>(P - 1 - p); ++x) {
      b[p] = x;
      rec(p + 1, left - x);
    }
  };
  rec(0, gbs);
  return best;
}

TEST(DataBalance, OptionTimeIsTheOneF1BClosedForm) {
  const MicroBatchOption o{4, 10.0, 3.0};
  EXPECT_DOUBLE_EQ(option_time_ms(o, 1), 10.0);        // one (partial) micro-batch
  EXPECT_DOUBLE_EQ(option_time_ms(o, 4), 10.0);        // one full micro-batch
  EXPECT_DOUBLE_EQ(option_time_ms(o, 5), 10.0 + 3.0);  // two micro-batches
  EXPECT_DOUBLE_EQ(option_time_ms(o, 12), 10.0 + 2 * 3.0);
  EXPECT_EQ(option_max_batch(o, 9.99, 100), 0);
  EXPECT_EQ(option_max_batch(o, 10.0, 100), 4);
  EXPECT_EQ(option_max_batch(o, 15.9, 100), 8);  // 10 + 1 * 3 <= 15.9 < 10 + 2 * 3
  EXPECT_EQ(option_max_batch(o, 1e9, 7), 7);     // capped
}

TEST(DataBalance, MatchesBruteForceOnSmallCases) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> sum_d(5.0, 40.0), max_d(0.5, 6.0);
  const std::int64_t sizes[] = {1, 2, 4};
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<PipelineKind> kinds;
    std::vector<std::vector<MicroBatchOption>> pipes;
    const int nk = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < nk; ++k) {
      PipelineKind kind;
      kind.count = 1 + static_cast<std::int64_t>(rng() % 2);
      for (auto m : sizes) {
        if (rng() % 3 == 0 && !kind.options.empty()) continue;
        // Larger micro-batches: fewer steps, each step longer.
        const double mx = max_d(rng) * static_cast<double>(m) * 0.8;
        kind.options.push_back(MicroBatchOption{m, sum_d(rng) + mx, mx});
      }
      for (std::int64_t i = 0; i < kind.count; ++i) pipes.push_back(kind.options);
      kinds.push_back(kind);
    }
    const auto P = static_cast<std::int64_t>(pipes.size());
    const std::int64_t gbs = P + static_cast<std::int64_t>(rng() % 11);
    const double want = brute_force(pipes, gbs);
    EXPECT_DOUBLE_EQ(balanced_time_ms(kinds, gbs), want) << "trial " << trial;
    const DataSplit split = balance_data(kinds, gbs);
    ASSERT_TRUE(split.feasible);
    EXPECT_DOUBLE_EQ(split.time_ms, want) << "trial " << trial;
    std::int64_t total = 0;
    for (std::size_t p = 0; p < split.batch.size(); ++p) {
      EXPECT_GE(split.batch[p], 1);
      total += split.batch[p];
      // The reported time of each pipeline is its best option at its batch.
      double t = std::numeric_limits<double>::infinity();
      for (const auto& o : pipes[p]) t = std::min(t, option_time_ms(o, split.batch[p]));
      EXPECT_DOUBLE_EQ(split.pipeline_ms[p], t);
    }
    EXPECT_EQ(total, gbs);
  }
}

TEST(DataBalance, IdenticalPipelinesGetEqualSharesWithinOne) {
  PipelineKind fast{{{2, 10.0, 2.0}, {4, 12.0, 3.5}}, 5};
  PipelineKind slow{{{2, 20.0, 4.0}}, 3};
  for (std::int64_t gbs : {8, 37, 101, 512}) {
    const DataSplit s = balance_data({fast, slow}, gbs);
    ASSERT_TRUE(s.feasible);
    const auto [fmin, fmax] = std::minmax_element(s.batch.begin(), s.batch.begin() + 5);
    const auto [smin, smax] = std::minmax_element(s.batch.begin() + 5, s.batch.end());
    EXPECT_LE(*fmax - *fmin, 1) << gbs;
    EXPECT_LE(*smax - *smin, 1) << gbs;
  }
}

TEST(DataBalance, MorePipelinesThanSamplesIsInfeasible) {
  PipelineKind k{{{1, 1.0, 1.0}}, 4};
  EXPECT_EQ(balanced_time_ms({k}, 3), std::numeric_limits<double>::infinity());
  EXPECT_FALSE(balance_data({k}, 3).feasible);
  // Exactly one sample each: the time of one micro-batch.
  EXPECT_DOUBLE_EQ(balanced_time_ms({k}, 4), 1.0);
}

TEST(DataBalance, FastPipelineTakesProportionallyMore) {
  // Per-sample steady-state times 1 and 3 ms, no fill cost beyond one micro-batch:
  // T_fast(B) = B, T_slow(B) = 3B at m = 1. With 12 samples the optimum is 9 / 3: 9 ms each.
  PipelineKind fast{{{1, 1.0, 1.0}}, 1};
  PipelineKind slow{{{1, 3.0, 3.0}}, 1};
  const DataSplit s = balance_data({fast, slow}, 12);
  ASSERT_TRUE(s.feasible);
  EXPECT_EQ(s.batch[0], 9);
  EXPECT_EQ(s.batch[1], 3);
  EXPECT_DOUBLE_EQ(s.time_ms, 9.0);
}

}  // namespace
}  // namespace eth::search

namespace eth::search {
namespace {

// The search's partition key (balanced_lower_ms) against the exact balance: never above it,
// above the threshold exactly when the exact value is, and within its precision of the exact
// value or of the threshold otherwise.
TEST(DataBalance, LowerKeyIsExactAboutTheThreshold) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> sum_d(5.0, 40.0), max_d(0.5, 6.0), frac(0.3, 1.6);
  const std::int64_t sizes[] = {1, 2, 4, 8};
  int above = 0, below = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<PipelineKind> kinds;
    const int nk = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < nk; ++k) {
      PipelineKind kind;
      kind.count = 1 + static_cast<std::int64_t>(rng() % 5);
      for (auto m : sizes) {
        if (rng() % 3 == 0 && !kind.options.empty()) continue;
        const double mx = max_d(rng) * static_cast<double>(m) * 0.8;
        kind.options.push_back(MicroBatchOption{m, sum_d(rng) + mx, mx});
      }
      kinds.push_back(kind);
    }
    const std::int64_t gbs = 1 + static_cast<std::int64_t>(rng() % 400);
    const double exact = balanced_time_ms(kinds, gbs);
    // Thresholds around the exact value, on it, and none.
    for (const double cap : {exact * frac(rng), exact, std::numeric_limits<double>::infinity()}) {
      const double rel = 1.0 / 256;
      const double key = balanced_lower_ms(kinds, gbs, cap, rel);
      if (exact == std::numeric_limits<double>::infinity()) {
        EXPECT_EQ(key, exact);
        continue;
      }
      EXPECT_LE(key, exact) << "trial " << trial;
      EXPECT_EQ(key > cap, exact > cap) << "trial " << trial << " cap " << cap;
      if (exact > cap) {
        ++above;
      } else {
        ++below;
        EXPECT_GE(key, std::min(exact, cap) * (1 - 2 * rel)) << "trial " << trial;
      }
    }
  }
  EXPECT_GT(above, 100);
  EXPECT_GT(below, 100);
}

}  // namespace
}  // namespace eth::search
