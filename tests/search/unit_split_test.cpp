// The intra-pipeline unit split: the dynamic program against exhaustive enumeration and against
// a brute force written here from the definition, plus a case worked by hand.
#include "search/unit_split.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "search/raw_units.h"

namespace eth::search {
namespace {

constexpr int R = kNumRecomputeCandidates;
using raw_units::make_table;
using raw_units::random_units;
using raw_units::RawUnits;

// Stage s of S holding units [i, j): cheapest time among recompute sets that fit, or +inf.
double stage_time(const RawUnits& r, double cap, std::size_t s, std::size_t S, std::size_t i,
                  std::size_t j) {
  double best = std::numeric_limits<double>::infinity();
  for (std::size_t k = 0; k < R; ++k) {
    double mem = 0, ws = 0, time = 0;
    for (std::size_t u = i; u < j; ++u) {
      mem += r.static_bytes[u] + static_cast<double>(S - s) * r.held[u][k];
      ws = std::max(ws, r.workspace[u]);
      time += r.fwd[u] + r.bwd[u][k];
    }
    if (mem + ws <= cap) best = std::min(best, time);
  }
  return best;
}

// Lexicographic (max, sum) optimum over every split, straight from the definition.
std::pair<double, double> brute_force(const std::vector<RawUnits>& raw,
                                      const std::vector<double>& caps, std::size_t U) {
  const std::size_t S = raw.size();
  std::pair<double, double> best{std::numeric_limits<double>::infinity(), 0};
  std::vector<std::size_t> b(S + 1, 0);
  b[S] = U;
  std::function<void(std::size_t)> rec = [&](std::size_t s) {
    if (s == S) {
      double mx = 0, sum = 0;
      for (std::size_t k = 0; k < S; ++k) {
        const double t = stage_time(raw[k], caps[k], k, S, b[k], b[k + 1]);
        mx = std::max(mx, t);
        sum += t;
      }
      if (mx < best.first - 1e-9 || (std::abs(mx - best.first) <= 1e-9 && sum < best.second)) {
        best = {mx, sum};
      }
      return;
    }
    for (std::size_t e = b[s] + 1; e + (S - 1 - s) <= U; ++e) {
      if (s + 1 == S && e != U) continue;
      b[s + 1] = e;
      rec(s + 1);
    }
    b[S] = U;
  };
  rec(0);
  return best;
}

TEST(UnitSplit, WorkedExampleWithRecompute) {
  // Four units: forward 0.25, backward 0.75 (1 ms each); 10 bytes held per micro-batch unless
  // recomputed (2 bytes, +0.5 ms backward); no static or workspace bytes; capacity 25 bytes.
  RawUnits r;
  for (int u = 0; u < 4; ++u) {
    r.fwd.push_back(0.25);
    r.static_bytes.push_back(0);
    r.workspace.push_back(0);
    std::array<double, R> bw{}, held{};
    for (std::size_t k = 0; k < R; ++k) {
      bw[k] = k == 0 ? 0.75 : 1.25;
      held[k] = k == 0 ? 10 : 2;
    }
    r.bwd.push_back(bw);
    r.held.push_back(held);
  }
  const UnitTable t = make_table(r);
  // Stage 0 holds 2 micro-batches, stage 1 one. Split 2|2: stage 0 needs 2*2*10 = 40 > 25 bytes
  // without recompute, 2*2*2 = 8 with: 2 + 2*0.5 = 3 ms; stage 1: 2*10 = 20 bytes, 2 ms.
  // Splits 1|3 and 3|1 have a 4.5 ms stage (three units recomputed). So max 3, sum 5.
  const UnitSplit s = split_units_dp({{&t, 25.0}, {&t, 25.0}}, 4);
  ASSERT_TRUE(s.feasible);
  EXPECT_DOUBLE_EQ(s.max_ms, 3.0);
  EXPECT_DOUBLE_EQ(s.sum_ms, 5.0);
  EXPECT_EQ(s.bounds, (std::vector<std::int64_t>{0, 2, 4}));
  EXPECT_EQ(s.recompute[0], 1);  // the first set that fits (all recompute sets cost the same)
  EXPECT_EQ(s.recompute[1], 0);
  EXPECT_DOUBLE_EQ(s.memory_bytes[0], 8.0);
  EXPECT_DOUBLE_EQ(s.memory_bytes[1], 20.0);
}

TEST(UnitSplit, NothingFitsIsInfeasible) {
  std::mt19937 rng(1);
  const RawUnits r = random_units(rng, 3);
  const UnitTable t = make_table(r);
  EXPECT_FALSE(split_units_dp({{&t, 1.0}}, 3).feasible);
  EXPECT_FALSE(split_units_enumerate({{&t, 1.0}}, 3).feasible);
  EXPECT_FALSE(split_units_dp({{&t, 1e9}, {&t, 1e9}, {&t, 1e9}, {&t, 1e9}}, 3).feasible);
}

TEST(UnitSplit, DynamicProgramEqualsEnumerationAndBruteForce) {
  std::mt19937 rng(11);
  int feasible = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const std::size_t U = 2 + rng() % 8;
    const std::size_t S = 1 + rng() % std::min<std::size_t>(U, 4);
    // Two device types along the pipeline, each with its own figures and capacity.
    const RawUnits a = random_units(rng, U), b = random_units(rng, U);
    UnitTable ta = make_table(a), tb = make_table(b);
    // Half the trials try the candidates in order and stop at the first that fits (the random
    // units make every further set slower unit by unit, so that is the fastest that fits).
    if (trial % 2 == 1) {
      order_recompute_candidates(ta);
      order_recompute_candidates(tb);
      EXPECT_TRUE(ta.rc_first_fit);
    }
    std::uniform_real_distribution<double> cap(20.0, 120.0);
    const double ca = cap(rng), cb = cap(rng);
    const std::size_t cut = rng() % (S + 1);
    std::vector<StageSlot> slots;
    std::vector<RawUnits> raw;
    std::vector<double> caps;
    for (std::size_t s = 0; s < S; ++s) {
      slots.push_back(s < cut ? StageSlot{&ta, ca} : StageSlot{&tb, cb});
      raw.push_back(s < cut ? a : b);
      caps.push_back(s < cut ? ca : cb);
    }
    const UnitSplit dp = split_units_dp(slots, static_cast<std::int64_t>(U));
    const UnitSplit en = split_units_enumerate(slots, static_cast<std::int64_t>(U));
    // The program's first phase alone, as the search runs it for a bound, then the second.
    SplitScratch scratch;
    const double bottleneck =
        split_units_bottleneck(slots, static_cast<std::int64_t>(U), scratch);
    EXPECT_EQ(bottleneck < std::numeric_limits<double>::infinity(), en.feasible) << trial;
    if (!en.feasible) {
      EXPECT_EQ(split_units_bottleneck(slots, static_cast<std::int64_t>(U), scratch, 0.0, 1e9),
                std::numeric_limits<double>::infinity())
          << trial;
    }
    if (en.feasible) {
      EXPECT_EQ(bottleneck, en.max_ms) << "trial " << trial;
      // With a floor at most the bottleneck and a cap: the bottleneck itself when the cap
      // reaches it, else +infinity (the search's proof that it exceeds the cap).
      // (Its own generator, so the trials' cases stay those drawn before it existed.)
      std::mt19937 draw(static_cast<unsigned>(trial));
      std::uniform_real_distribution<double> frac(0.0, 1.0);
      const double floor = en.max_ms * frac(draw);
      for (const double limit : {en.max_ms, std::nextafter(en.max_ms, 0.0),
                                 en.max_ms * (0.5 + frac(draw)), en.max_ms * 2}) {
        const double capped =
            split_units_bottleneck(slots, static_cast<std::int64_t>(U), scratch, floor, limit);
        EXPECT_EQ(capped,
                  limit >= en.max_ms ? en.max_ms : std::numeric_limits<double>::infinity())
            << "trial " << trial << " cap " << limit;
      }
      EXPECT_EQ(split_units_bottleneck(slots, static_cast<std::int64_t>(U), scratch, en.max_ms),
                en.max_ms)
          << "trial " << trial;
      const UnitSplit two =
          split_units_dp(slots, static_cast<std::int64_t>(U), scratch, bottleneck);
      EXPECT_EQ(two.sum_ms, en.sum_ms) << "trial " << trial;
      EXPECT_EQ(two.bounds, dp.bounds) << "trial " << trial;
    }
    const auto bf = brute_force(raw, caps, U);
    ASSERT_EQ(dp.feasible, en.feasible) << "trial " << trial;
    ASSERT_EQ(dp.feasible, bf.first < std::numeric_limits<double>::infinity()) << trial;
    if (!dp.feasible) continue;
    ++feasible;
    EXPECT_EQ(dp.max_ms, en.max_ms) << "trial " << trial;
    EXPECT_EQ(dp.sum_ms, en.sum_ms) << "trial " << trial;
    EXPECT_NEAR(dp.max_ms, bf.first, 1e-9) << "trial " << trial;
    EXPECT_NEAR(dp.sum_ms, bf.second, 1e-9) << "trial " << trial;
    for (std::size_t s = 0; s < S; ++s) EXPECT_LE(dp.memory_bytes[s], caps[s]);
  }
  EXPECT_GT(feasible, 100);  // the random cases exercise the feasible path
}

TEST(UnitSplit, LeastMemorySplitProvesInfeasibility) {
  std::mt19937 rng(3);
  const RawUnits r = random_units(rng, 6);
  const UnitTable t = make_table(r);
  const MemoryFloor f = split_units_dp({{&t, 1.0}, {&t, 1.0}}, 6).feasible
                            ? MemoryFloor{}
                            : least_memory_split({{&t, 1.0}, {&t, 1.0}}, 6);
  EXPECT_GT(f.worst_ratio, 1.0);
  ASSERT_EQ(f.bounds.size(), 3u);
  EXPECT_EQ(f.bounds.front(), 0);
  EXPECT_EQ(f.bounds.back(), 6);
  // With room to spare the floor is below one and the DP finds a split.
  const MemoryFloor g = least_memory_split({{&t, 1e6}, {&t, 1e6}}, 6);
  EXPECT_LT(g.worst_ratio, 1.0);
  EXPECT_TRUE(split_units_dp({{&t, 1e6}, {&t, 1e6}}, 6).feasible);
}

TEST(UnitSplit, SplitCount) {
  EXPECT_EQ(num_unit_splits(10, 1), 1);
  EXPECT_EQ(num_unit_splits(10, 3), 36);        // C(9, 2)
  EXPECT_EQ(num_unit_splits(42, 8), 22481940);  // C(41, 7)
  EXPECT_EQ(num_unit_splits(3, 4), 0);
}

}  // namespace
}  // namespace eth::search
