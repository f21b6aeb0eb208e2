// The per-template lower-bound options (template_options.cpp, through template_evaluator.h)
// against every unit split of every template, priced here range by range (template_fixture.h):
//   - the first tier (memory floor and cheap terms) never exceeds what any split that fits
//     achieves, and a size it leaves out has no split that fits;
//   - deepening only tightens: a bound never falls, a size left out stays out, once only, and
//     it gives the numbers of an evaluator that is deep from the start;
//   - the bounds shared by every order of a template's groups (the layer baseline's) hold for
//     every order, and a size they leave out fits no order.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "search/template_evaluator.h"
#include "search/template_fixture.h"

namespace eth::template_options_test {
namespace {

using search::template_fixture::kNoSplit;
using search::template_fixture::SmallTemplates;

TEST(TemplateOptions, FirstTierNeverAboveAnySplitThatFits) {
  SmallTemplates g(/*bound_generation=*/true);
  search::TemplateEvaluator ev(g.ctx(), g.set(), g.ctx().tables);
  search::template_fixture::expect_bounds_below_every_split(g, ev);
}

TEST(TemplateOptions, OrderFreeBoundsNeverAboveAnySplitThatFits) {
  SmallTemplates g(/*bound_generation=*/true);
  search::TemplateEvaluator ev(g.ctx(), g.set(), g.ctx().tables);
  ev.use_order_free_bounds();
  search::template_fixture::expect_bounds_below_every_split(g, ev);
}

TEST(TemplateOptions, DeepeningOnlyTightensAndGivesTheDeepNumbers) {
  SmallTemplates tiered(/*bound_generation=*/true), deep(/*bound_generation=*/false);
  ASSERT_EQ(tiered.set().size(), deep.set().size());
  search::TemplateEvaluator ev(tiered.ctx(), tiered.set(), tiered.ctx().tables);
  search::TemplateEvaluator at_once(deep.ctx(), deep.set(), deep.ctx().tables);
  int rose = 0;
  for (int tpl = 0; tpl < tiered.set().size(); ++tpl) {
    const std::string what = search::describe_template(tiered.set().at(tpl), tiered.ctx().types);
    std::vector<std::optional<search::MicroBatchOption>> first;
    for (std::size_t mi = 0; mi < tiered.sizes().size(); ++mi) first.push_back(ev.bound_at(tpl, mi));
    EXPECT_TRUE(ev.deepen(tpl)) << what;
    EXPECT_FALSE(ev.deepen(tpl)) << what << ": deepened twice";
    EXPECT_FALSE(at_once.deepen(tpl)) << what << ": deep from the start";
    std::vector<std::int64_t> listed;
    for (const search::MicroBatchOption& o : ev.bound_options(tpl)) listed.push_back(o.mbs);
    std::vector<std::int64_t> present;
    for (std::size_t mi = 0; mi < tiered.sizes().size(); ++mi) {
      const auto& now = ev.bound_at(tpl, mi);
      const auto& ref = at_once.bound_at(tpl, mi);
      ASSERT_EQ(now.has_value(), ref.has_value()) << what << " size " << mi;
      if (!now) continue;
      present.push_back(now->mbs);
      EXPECT_EQ(now->max_ms, ref->max_ms) << what << " size " << mi;
      EXPECT_EQ(now->sum_ms, ref->sum_ms) << what << " size " << mi;
      ASSERT_TRUE(first[mi].has_value()) << what << ": a size the floor left out came back";
      EXPECT_GE(now->max_ms, first[mi]->max_ms) << what << " size " << mi;
      EXPECT_GE(now->sum_ms, first[mi]->sum_ms) << what << " size " << mi;
      if (now->max_ms > first[mi]->max_ms) ++rose;
    }
    EXPECT_EQ(listed, present) << what << ": bound_options is not the sizes bound_at holds";
  }
  EXPECT_GT(rose, 0);  // the second tier is not empty
}

// order_free_options of each set of groups against every order of them (in the generated set
// or not) and the tiers' bound of each order in the set.
TEST(TemplateOptions, OrderFreeOptionsHoldForEveryOrderOfTheGroups) {
  SmallTemplates g(/*bound_generation=*/false);
  search::TemplateEvaluator ev(g.ctx(), g.set(), g.ctx().tables);
  std::map<std::vector<search::StageGroup>, std::vector<int>> orders_in_set;
  for (int tpl = 0; tpl < g.set().size(); ++tpl) {
    std::vector<search::StageGroup> key = g.set().at(tpl).groups;
    std::sort(key.begin(), key.end());
    orders_in_set[key].push_back(tpl);
  }
  int several = 0, options = 0;
  for (const auto& [groups, tpls] : orders_in_set) {
    search::PipelineTemplate t{groups};
    const std::vector<search::MicroBatchOption> shared = ev.order_free_options(t);
    const std::string what = search::describe_template(t, g.ctx().types);
    int orders = 0;
    do {
      ++orders;
      for (const std::int64_t mbs : g.sizes()) {
        const auto best = g.best(t, mbs);
        const auto it = std::find_if(shared.begin(), shared.end(),
                                     [&](const search::MicroBatchOption& o) { return o.mbs == mbs; });
        if (it == shared.end()) {
          EXPECT_EQ(best.max_ms, kNoSplit) << what << " mbs " << mbs << ": left out, yet fits";
          continue;
        }
        ++options;
        const std::string order = search::describe_template(t, g.ctx().types);
        EXPECT_LE(it->max_ms, best.max_ms) << order << " mbs " << mbs;
        EXPECT_LE(it->sum_ms, best.sum_ms) << order << " mbs " << mbs;
      }
    } while (std::next_permutation(t.groups.begin(), t.groups.end()));
    if (orders > 1) ++several;
    for (const int tpl : tpls) {
      for (std::size_t mi = 0; mi < g.sizes().size(); ++mi) {
        const auto& bound = ev.bound_at(tpl, mi);
        if (!bound) continue;
        const auto it = std::find_if(shared.begin(), shared.end(), [&](const auto& o) {
          return o.mbs == g.sizes()[mi];
        });
        ASSERT_NE(it, shared.end()) << what << ": an order bounds a size the shared bound lacks";
        // Up to rounding: the two sum the same terms in other orders (seen 2 ulp apart here);
        // against the splits themselves, above, neither has slack.
        EXPECT_LE(it->max_ms, bound->max_ms * (1 + 1e-12)) << what;
        EXPECT_LE(it->sum_ms, bound->sum_ms * (1 + 1e-12)) << what;
      }
    }
  }
  EXPECT_GT(several, 0);  // some sets of groups come in several orders
  EXPECT_GT(options, 10);
}

}  // namespace
}  // namespace eth::template_options_test
