// The lower bounds of pipeline templates (the whole-unit count bound and the speed and memory
// bound of template_bounds.cpp, with the cheaper terms they join) against every unit split of
// every template, priced here range by range: a template's bound never exceeds what any split
// that fits achieves (its bottleneck, or its round-trip slot when larger; its stage times summed
// with the transfers), and a size left without a bound has no split that fits. The same holds
// for the bounds shared by every order of a template's groups (the layer baseline's).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <string>

#include "profile/analytic.h"
#include "search/engine.h"
#include "search/partition_fixture.h"
#include "search/search_fixture.h"
#include "search/template_evaluator.h"

namespace eth::template_bounds_test {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Best {
  double max_ms = kInf;  // least over fitting splits of max(bottleneck, round-trip slot)
  double sum_ms = kInf;  // least over fitting splits of the stage times plus transfers
};

// Every split of the template's stages over the units, each stage priced by range_cost with its
// in-flight count S - s.
Best every_split(const std::vector<search::StageSlot>& slots, std::size_t U, double comm) {
  const std::size_t S = slots.size();
  Best best;
  std::vector<std::size_t> b(S + 1, 0);
  b[S] = U;
  std::function<void(std::size_t)> place = [&](std::size_t s) {
    if (s + 1 == S) {
      double mx = 0, sum = 0;
      for (std::size_t k = 0; k < S; ++k) {
        const search::RangeCost c =
            search::range_cost(*slots[k].table, slots[k].capacity_bytes,
                               static_cast<std::int64_t>(S - k), static_cast<std::int64_t>(b[k]),
                               static_cast<std::int64_t>(b[k + 1]));
        if (!c.fits) return;
        mx = std::max(mx, c.time_ms);
        sum += c.time_ms;
      }
      best.max_ms =
          std::min(best.max_ms, std::max(mx, (sum + comm) / static_cast<double>(S)));
      best.sum_ms = std::min(best.sum_ms, sum + comm);
      return;
    }
    for (std::size_t e = b[s] + 1; e + (S - 1 - s) <= U; ++e) {  // a unit for each stage left
      b[s + 1] = e;
      place(s + 1);
    }
  };
  if (S <= U) place(0);
  return best;
}

void expect_bounds_below_every_split(bool order_free) {
  const ModelSpec m = search::search_fixture::small_model();  // units 0..9
  const ClusterSpec c = search::search_fixture::small_cluster(
      R"({"device_type": "fast", "devices": 4}, {"device_type": "slow", "devices": 4})");
  const ProfileDb db = analytic_profile_db(m, c, {1, 2}, {1, 2, 4}, m.seq_len);
  PlannerOptions o;
  o.micro_batch_sizes = {1, 2, 4};
  o.tp = {1, 2};
  search::Context ctx(m, c, db, 16, m.seq_len, o);
  search::TemplateSet set;
  std::vector<search::Partition> parts;
  search::generate_partitions(ctx.types, search::partition_fixture::gen(10, 8, false), set, parts);
  ASSERT_GT(set.size(), 20);
  search::TemplateEvaluator ev(ctx, set, ctx.tables);
  if (order_free) ev.use_order_free_bounds();
  int bounded = 0, fitting = 0, ruled_out = 0;
  for (int tpl = 0; tpl < set.size(); ++tpl) {
    const search::PipelineTemplate& t = set.at(tpl);
    for (std::size_t mi = 0; mi < o.micro_batch_sizes.size(); ++mi) {
      const std::int64_t mbs = o.micro_batch_sizes[mi];
      const auto slots = search::template_slots(ctx, t, mbs);
      ASSERT_FALSE(slots.empty());
      const double comm = search::template_comm_ms(ctx, t, slots.front().table->boundary_bytes);
      const Best best = every_split(slots, 10, comm);
      const auto& bound = ev.bound_at(tpl, mi);
      const std::string what = search::describe_template(t, ctx.types) + " mbs " +
                               std::to_string(mbs);
      if (best.max_ms < kInf) ++fitting;
      if (!bound) {
        ++ruled_out;
        EXPECT_EQ(best.max_ms, kInf) << what << ": no bound, yet a split fits";
        continue;
      }
      ++bounded;
      EXPECT_EQ(bound->mbs, mbs);
      EXPECT_LE(bound->max_ms, best.max_ms) << what;
      EXPECT_LE(bound->sum_ms, best.sum_ms) << what;
    }
  }
  // The cluster's memory leaves some templates no split and some several.
  EXPECT_GT(fitting, 20);
  EXPECT_GT(ruled_out, 0);
  EXPECT_GT(bounded, fitting / 2);
}

TEST(TemplateBounds, NeverAboveAnySplitThatFits) { expect_bounds_below_every_split(false); }

TEST(TemplateBounds, OrderFreeBoundsNeverAboveAnySplitThatFits) {
  expect_bounds_below_every_split(true);
}

}  // namespace
}  // namespace eth::template_bounds_test
