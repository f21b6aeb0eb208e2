// The planner's cost tables against the cost functions they cache: every prefix difference is the
// profile's figure for that unit (times, held bytes per recompute set, static bytes at the
// precision's bytes per parameter written out here, workspace), ranges price as the sum of their
// units, the range's pick is the fastest set that fits among all eight (brute force), pruned
// candidates are dominated, and coverage follows the profile's keys.
#include "search/cost_tables.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include <nlohmann/json.hpp>

#include "cluster/cluster_spec.h"
#include "cost/stage_costs.h"
#include "model/arithmetic.h"
#include "profile/analytic.h"
#include "search/raw_units.h"

namespace eth::cost_tables_test {
namespace {

using search::CostTables;
using search::kFullRecompute;
using search::kNumRecomputeCandidates;
using search::RangeCost;
using search::recompute_candidates;
using search::UnitTable;

ClusterSpec one_type_cluster() {
  const Json j = Json::parse(R"({"nodes": [{"device_type": "fast", "devices": 4}],
      "device_types": {"fast": {"tflops": 100, "memory_gb": 1,
                                "intra_node_bandwidth_gbps": 800}}})");
  return parse_cluster(JsonCursor(j, JsonOrigin{"cluster", "test", ""}));
}

// tiny: 4 blocks of C 64 (units 0..5), T 64, V 256.
struct Fixture {
  ModelSpec model = model_preset("tiny");
  ClusterSpec cluster = one_type_cluster();
  ProfileDb db = analytic_profile_db(model, cluster, {1, 2}, {2, 4}, model.seq_len);
};

double unit_of(const std::vector<double>& prefix, std::size_t u) {
  return prefix[u + 1] - prefix[u];
}

// A unit's figure read back from prefix sums: equal up to the rounding of the sums (a few ulps
// of the whole model's total).
void expect_unit(const std::vector<double>& prefix, std::size_t u, double want) {
  EXPECT_NEAR(unit_of(prefix, u), want, 1e-13 * std::abs(prefix.back()));
}

// The least forward + backward time of units [i, j) over all eight sets whose range_memory
// fits `cap` (+infinity when none does), summed as range_cost sums it.
double fastest_that_fits(const UnitTable& t, double cap, std::int64_t q, std::int64_t i,
                         std::int64_t j) {
  const auto a = static_cast<std::size_t>(i), b = static_cast<std::size_t>(j);
  double best = std::numeric_limits<double>::infinity();
  for (int r = 0; r < kNumRecomputeCandidates; ++r) {
    if (search::range_memory(t, q, i, j, r) > cap) continue;
    const auto ri = static_cast<std::size_t>(r);
    const double fwd = t.forward_prefix[b] - t.forward_prefix[a];
    best = std::min(best, fwd + (t.backward_prefix[ri][b] - t.backward_prefix[ri][a]));
  }
  return best;
}

TEST(CostTables, EachUnitIsTheProfilesFigure) {
  const Fixture f;
  ASSERT_EQ(f.db.entries().size(), 4u);
  const auto& sets = recompute_candidates();
  for (const auto& [key, entry] : f.db.entries()) {
    const UnitTable t = search::build_unit_table(entry, f.model, f.model.seq_len);
    ASSERT_EQ(t.num_units(), 6);
    EXPECT_EQ(t.tp, key.tp);
    EXPECT_EQ(t.mbs, key.mbs);
    for (std::size_t u = 0; u < 6; ++u) {
      const UnitProfile& p = entry.units[u];
      expect_unit(t.forward_prefix, u, p.forward_ms);
      EXPECT_DOUBLE_EQ(t.compute_ms[u], p.forward_ms + p.backward_ms);
      for (std::size_t r = 0; r < sets.size(); ++r) {
        expect_unit(t.backward_prefix[r], u, p.backward_with_recompute_ms(sets[r]));
        expect_unit(t.held_prefix[r], u, p.activation.held(sets[r]));
      }
      // Mixed16: 2 + 2 + 12 bytes of state per parameter, 2 per gradient element.
      const auto params =
          static_cast<double>(unit_params(f.model, static_cast<std::int64_t>(u), key.tp));
      expect_unit(t.static_prefix, u, 16.0 * params);
      expect_unit(t.gradient_prefix, u, 2.0 * params);
      EXPECT_DOUBLE_EQ(t.workspace[u],
                       unit_workspace_bound_bytes(f.model, static_cast<std::int64_t>(u), key.mbs,
                                                  f.model.seq_len, key.tp, entry.precision,
                                                  profile_has_dropout(entry)) +
                           entry.process_baseline_bytes);
    }
    // One micro-batch's hidden state in 16 bits: mbs x T 64 x C 64 x 2 bytes.
    EXPECT_EQ(t.boundary_bytes, 2.0 * static_cast<double>(key.mbs) * 64 * 64);
    // The copy of what a set drops: the largest drop of a unit of each kind (embedding unit 0,
    // blocks 1..4, head 5).
    for (std::size_t r = 0; r < sets.size(); ++r) {
      auto drop = [&](std::size_t u) {
        return entry.units[u].activation.total() - entry.units[u].activation.held(sets[r]);
      };
      EXPECT_DOUBLE_EQ(t.copy_bytes[r][0], drop(0));
      EXPECT_DOUBLE_EQ(t.copy_bytes[r][1], std::max({drop(1), drop(2), drop(3), drop(4)}));
      EXPECT_DOUBLE_EQ(t.copy_bytes[r][2], drop(5));
    }
  }
}

TEST(CostTables, CandidatesAreTheDocumentedSetsInOrder) {
  const std::vector<std::vector<std::string>> want{
      {},
      {"mlp_act"},
      {"attn_dropout"},
      {"attn_score", "attn_dropout"},
      {"attn_score", "attn_softmax", "attn_dropout"},
      {"qkv", "attn_score", "attn_softmax", "attn_dropout"},
      {"qkv", "attn_score", "attn_softmax", "attn_dropout", "mlp_act"},
      {"unit"}};
  ASSERT_EQ(recompute_candidates().size(), want.size());
  for (std::size_t r = 0; r < want.size(); ++r) {
    EXPECT_EQ(recompute_candidates()[r].names(), want[r]);
  }
  EXPECT_TRUE(recompute_candidates()[kFullRecompute].full_unit());
}

TEST(CostTables, RangePicksTheFastestOfAllSetsThatFit) {
  const Fixture f;
  const UnitTable t = search::build_unit_table(f.db.entries().begin()->second, f.model, 64);
  ASSERT_FALSE(t.rc_order.empty());
  std::mt19937 rng(7);
  int fitted = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const std::int64_t i = rng() % 6, j = i + 1 + rng() % (6 - i), q = 1 + rng() % 4;
    // Capacities around the range's least and most memory, so some sets fit and some do not.
    double lo = std::numeric_limits<double>::infinity(), hi = 0;
    for (int r = 0; r < kNumRecomputeCandidates; ++r) {
      lo = std::min(lo, search::range_memory(t, q, i, j, r));
      hi = std::max(hi, search::range_memory(t, q, i, j, r));
    }
    const double cap = lo + (hi - lo) * std::uniform_real_distribution<double>(-0.1, 1.1)(rng);
    const double best = fastest_that_fits(t, cap, q, i, j);
    const RangeCost c = search::range_cost(t, cap, q, i, j);
    ASSERT_EQ(c.fits, best < std::numeric_limits<double>::infinity()) << trial;
    if (!c.fits) continue;
    ++fitted;
    EXPECT_DOUBLE_EQ(c.time_ms, best) << trial;
    EXPECT_LE(c.memory_bytes, cap);
    EXPECT_DOUBLE_EQ(c.memory_bytes, search::range_memory(t, q, i, j, c.recompute));
  }
  EXPECT_GT(fitted, 100);
}

// Random tables in which later sets often hold more than earlier ones (so pruning drops some),
// with the copies as build_unit_table makes them (the largest drop of each unit kind): after
// pruning, every range still picks the fastest of all eight sets that fit.
TEST(CostTables, PrunedTablesStillPickTheFastestOfAllSets) {
  std::mt19937 rng(31);
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  int pruned = 0, fitted = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const std::size_t n = 3 + rng() % 4;
    search::raw_units::RawUnits r;
    for (std::size_t u = 0; u < n; ++u) {
      r.fwd.push_back(1);
      r.static_bytes.push_back(10 * unif(rng));
      r.workspace.push_back(10 * unif(rng));
      std::array<double, kNumRecomputeCandidates> bwd{}, held{};
      held[0] = 200;
      bwd[0] = 2;
      for (std::size_t k = 1; k < bwd.size(); ++k) {
        bwd[k] = bwd[k - 1] + 0.1 + unif(rng);
        held[k] = unif(rng) < 0.5 ? held[k - 1] * (0.5 + 0.5 * unif(rng))
                                  : std::min(200.0, held[k - 1] + 20 * unif(rng));
      }
      r.bwd.push_back(bwd);
      r.held.push_back(held);
    }
    UnitTable t = search::raw_units::make_table(r);
    for (std::size_t k = 0; k < t.copy_bytes.size(); ++k) {
      for (std::size_t u = 0; u < n; ++u) {
        const std::size_t kind = u == 0 ? 0 : (u + 1 == n ? 2 : 1);
        t.copy_bytes[k][kind] = std::max(t.copy_bytes[k][kind], 200 - r.held[u][k]);
      }
    }
    search::order_recompute_candidates(t);
    ASSERT_TRUE(t.rc_first_fit);
    pruned += t.rc_order.size() < kNumRecomputeCandidates ? 1 : 0;
    for (int probe = 0; probe < 10; ++probe) {
      const auto i = static_cast<std::int64_t>(rng() % n);
      const auto j = i + 1 + static_cast<std::int64_t>(rng() % (n - static_cast<std::size_t>(i)));
      const std::int64_t q = 1 + rng() % 4;
      const double cap = 150 + 800 * unif(rng);
      const double best = fastest_that_fits(t, cap, q, i, j);
      const RangeCost c = search::range_cost(t, cap, q, i, j);
      ASSERT_EQ(c.fits, best < std::numeric_limits<double>::infinity()) << trial;
      if (c.fits) {
        ++fitted;
        EXPECT_DOUBLE_EQ(c.time_ms, best) << trial;
      }
    }
  }
  EXPECT_GT(pruned, 20);  // 50 of the 300 tables drop a set
  EXPECT_GT(fitted, 500);
}

TEST(CostTables, RangeMemoryIsTheSumOfItsParts) {
  // A table filled by hand: 4 units (embedding, two blocks, head).
  UnitTable t;
  t.forward_prefix = {0, 1, 3, 6, 10};
  t.static_prefix = {0, 100, 300, 600, 1000};
  t.gradient_prefix = {0, 10, 30, 60, 100};
  t.workspace = {7, 50, 20, 9};
  for (auto& v : t.backward_prefix) v = {0, 2, 4, 6, 8};
  for (auto& v : t.held_prefix) v = {0, 1, 2, 3, 4};
  t.held_prefix[3] = {0, 1, 1, 1, 2};
  t.copy_bytes[3] = {1000, 2000, 4000};
  t.boundary_bytes = 5;
  t.precision = Precision::Fp32;
  t.collective_window_bytes = 8;
  // Units [1, 3), 2 in flight, set 3: static 500, workspace max(50, 20), block copy 2000,
  // messages (4 + 2) x 5, fp32 temporaries min(2 units x window 8, gradients 50) = 16, held
  // 2 x 0.
  EXPECT_DOUBLE_EQ(search::range_memory(t, 2, 1, 3, 3), 500 + 50 + 2000 + 30 + 16 + 0);
  // Units [0, 4), one in flight, set 0: every kind's copy of set 0 (none), held 4.
  EXPECT_DOUBLE_EQ(search::range_memory(t, 1, 0, 4, 0), 1000 + 50 + 25 + 32 + 4);
  // The copies by kind: [0, 1) embedding only, [0, 2) embedding and block, [3, 4) head.
  EXPECT_EQ(search::range_copy_bytes(t, 3, 0, 1), 1000);
  EXPECT_EQ(search::range_copy_bytes(t, 3, 0, 2), 3000);
  EXPECT_EQ(search::range_copy_bytes(t, 3, 3, 4), 4000);
  EXPECT_EQ(search::range_copy_bytes(t, 3, 0, 4), 7000);
  // At tp 2 the window does not bound the temporaries: the range's gradients do.
  t.tp = 2;
  EXPECT_DOUBLE_EQ(search::range_comm_bytes(t, 2, 1, 3), 30 + 50);
  // Mixed16 (NCCL reduces in place): messages only.
  t.precision = Precision::Mixed16;
  EXPECT_DOUBLE_EQ(search::range_comm_bytes(t, 2, 1, 3), 30);
}

TEST(CostTables, PrunedCandidatesAreDominatedAndTheOrderIsByTime) {
  const Fixture f;
  for (const auto& [key, entry] : f.db.entries()) {
    const UnitTable t = search::build_unit_table(entry, f.model, 64);
    const std::size_t n = 6;
    auto total = [&](int r) { return t.backward_prefix[static_cast<std::size_t>(r)][n]; };
    for (std::size_t k = 1; k < t.rc_order.size(); ++k) {
      EXPECT_LE(total(t.rc_order[k - 1]), total(t.rc_order[k]));
    }
    // rc_first_fit: every unit's backward time is non-decreasing along the order of all eight.
    std::vector<int> all(kNumRecomputeCandidates);
    for (int r = 0; r < kNumRecomputeCandidates; ++r) all[static_cast<std::size_t>(r)] = r;
    std::stable_sort(all.begin(), all.end(), [&](int a, int b) { return total(a) < total(b); });
    bool monotone = true;
    for (std::size_t k = 1; k < all.size(); ++k) {
      for (std::size_t u = 0; u < n; ++u) {
        const auto before = static_cast<std::size_t>(all[k - 1]);
        const auto after = static_cast<std::size_t>(all[k]);
        monotone = monotone && unit_of(t.backward_prefix[before], u) <=
                                   unit_of(t.backward_prefix[after], u);
      }
    }
    EXPECT_EQ(t.rc_first_fit, monotone);
    // A candidate left out holds at least the bytes of a faster one kept, unit by unit (the
    // copies' part of the rule is PruningKeepsACandidateWhoseSmallerCopyMakesItFit's).
    for (int r = 0; r < kNumRecomputeCandidates; ++r) {
      if (std::find(t.rc_order.begin(), t.rc_order.end(), r) != t.rc_order.end()) continue;
      ASSERT_TRUE(t.rc_first_fit);
      bool dominated = false;
      for (int kept : t.rc_order) {
        if (total(kept) > total(r)) continue;
        bool holds_more = true;
        for (std::size_t u = 0; u < n; ++u) {
          holds_more = holds_more && unit_of(t.held_prefix[static_cast<std::size_t>(r)], u) >=
                                         unit_of(t.held_prefix[static_cast<std::size_t>(kept)], u);
        }
        dominated = dominated || holds_more;
      }
      EXPECT_TRUE(dominated) << "candidate " << r << " at tp " << key.tp << " mbs " << key.mbs;
    }
  }
}

// A candidate that holds more bytes than a faster one on every unit may still need less memory
// on some range: it drops less, so the copy the runtime keeps of what it drops is smaller, and
// that copy is the largest drop of any unit of the kind in the whole model. Blocks 1 and 2 (of
// 200 bytes each) below: set 1 holds 80 and 99.5, set 2 (slower) 90 and 100, so set 2's block
// copy is max(110, 100) = 110 against set 1's max(120, 100.5) = 120. On block 2 with two
// micro-batches in flight set 2 needs 110 + 2 x 100 = 310 bytes, set 1 120 + 2 x 99.5 = 319,
// nothing recomputed 2 x 200 = 400; every other set is made too big. With 315 bytes only set 2
// fits, so it must stay a candidate.
TEST(CostTables, PruningKeepsACandidateWhoseSmallerCopyMakesItFit) {
  search::raw_units::RawUnits r;
  for (int u = 0; u < 4; ++u) {
    r.fwd.push_back(1);
    r.static_bytes.push_back(0);
    r.workspace.push_back(0);
    std::array<double, kNumRecomputeCandidates> bwd{}, held{};
    for (std::size_t k = 0; k < bwd.size(); ++k) {
      bwd[k] = 2 + 0.1 * static_cast<double>(k);  // slower set by set, unit by unit
      held[k] = 200;  // sets 3..7 drop nothing: 400 bytes at two in flight
    }
    if (u == 1 || u == 2) {
      held[1] = u == 1 ? 80 : 99.5;
      held[2] = u == 1 ? 90 : 100;
    }
    r.bwd.push_back(bwd);
    r.held.push_back(held);
  }
  UnitTable t = search::raw_units::make_table(r);
  for (std::size_t k = 0; k < t.copy_bytes.size(); ++k) {
    const double drop1 = 200 - r.held[1][k], drop2 = 200 - r.held[2][k];
    t.copy_bytes[k][1] = std::max(drop1, drop2);
  }
  EXPECT_DOUBLE_EQ(search::range_memory(t, 2, 2, 3, 0), 400);
  EXPECT_DOUBLE_EQ(search::range_memory(t, 2, 2, 3, 1), 319);
  EXPECT_DOUBLE_EQ(search::range_memory(t, 2, 2, 3, 2), 310);
  search::order_recompute_candidates(t);
  const RangeCost c = search::range_cost(t, 315, 2, 2, 3);
  ASSERT_TRUE(c.fits);
  EXPECT_EQ(c.recompute, 2);
  EXPECT_DOUBLE_EQ(c.time_ms, 1 + 2.2);
}

TEST(CostTables, CoverageFollowsTheProfilesKeysAndTablesAreBuiltOnce) {
  const Fixture f;  // profiled: tp 1 and 2 at mbs 2 and 4
  CostTables tables(f.db, f.model.seq_len);
  EXPECT_TRUE(tables.covers("fast", 1, 2));
  EXPECT_TRUE(tables.covers("fast", 2, 3));   // interpolated
  EXPECT_TRUE(tables.covers("fast", 1, 16));  // extrapolated above the largest
  EXPECT_FALSE(tables.covers("fast", 1, 1));  // below the smallest
  EXPECT_FALSE(tables.covers("fast", 4, 2));  // tp not profiled
  EXPECT_FALSE(tables.covers("slow", 1, 2));  // type not profiled
  EXPECT_EQ(tables.num_units(), 6);
  EXPECT_EQ(tables.tables_built(), 0);
  const UnitTable& a = tables.get("fast", 2, 3);
  EXPECT_EQ(&tables.get("fast", 2, 3), &a);
  EXPECT_EQ(tables.tables_built(), 1);
  // The table of a size between two profiled ones is the interpolated entry's.
  const UnitTable want = search::build_unit_table(f.db.lookup("fast", 2, 3).entry, f.model, 64);
  EXPECT_EQ(a.forward_prefix, want.forward_prefix);
  EXPECT_EQ(a.held_prefix, want.held_prefix);
  EXPECT_EQ(a.mbs, 3);
  // Without operator recompute only "nothing" and "unit" are tried.
  CostTables layer(f.db, f.model.seq_len, false);
  for (int r : layer.get("fast", 1, 2).rc_order) EXPECT_TRUE(r == 0 || r == kFullRecompute);
}

// Growing one range with the resumable scan gives exactly what the plain scan gives, and a
// table restricted to full recompute only ever picks "nothing" or "unit".
TEST(CostTables, ResumableRecomputeScanAndFullRecomputeOnly) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t U = 3 + rng() % 8;
    UnitTable t = search::raw_units::make_table(search::raw_units::random_units(rng, U));
    search::order_recompute_candidates(t);
    ASSERT_TRUE(t.rc_first_fit);
    const double cap = std::uniform_real_distribution<double>(20.0, 120.0)(rng);
    const double q = static_cast<double>(1 + rng() % 4);
    const std::size_t j = U;
    std::size_t position = 0;
    double ws = 0;
    for (std::size_t i = j; i-- > 0;) {
      ws = std::max(ws, t.workspace[i]);
      const RangeCost a = search::range_cost_ws(t, cap, q, i, j, ws);
      const RangeCost b = search::range_cost_ws(t, cap, q, i, j, ws, &position);
      ASSERT_EQ(a.fits, b.fits) << trial;
      if (!a.fits) break;
      EXPECT_EQ(a.time_ms, b.time_ms) << trial;
      EXPECT_EQ(a.recompute, b.recompute) << trial;
    }
    UnitTable full = t;
    search::restrict_to_full_recompute(full);
    for (int r : full.rc_order) EXPECT_TRUE(r == 0 || r == kFullRecompute);
    const RangeCost c = search::range_cost(full, cap, static_cast<std::int64_t>(q), 0, 1);
    if (c.fits) {
      EXPECT_TRUE(c.recompute == 0 || c.recompute == kFullRecompute);
    }
  }
}

}  // namespace
}  // namespace eth::cost_tables_test
