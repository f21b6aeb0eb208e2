// The costlier lower-bound terms of pipeline templates (template_bounds.cpp: the whole-unit count
// bound and the speed and memory bound), which join the cheap terms once a template is deepened
// or when bounds are not generated in tiers: with them a template's bound still never exceeds
// what any split that fits achieves (its bottleneck, or its round-trip slot when larger; its
// stage times summed with the transfers), a size they rule out has no split that fits, and they
// do tighten: some bound rises or some size goes against the cheap terms alone. The oracle is
// every unit split, priced range by range (template_fixture.h).
#include <gtest/gtest.h>

#include <optional>

#include "search/template_evaluator.h"
#include "search/template_fixture.h"

namespace eth::template_bounds_test {
namespace {

using search::template_fixture::SmallTemplates;

TEST(TemplateBounds, DeepTermsNeverAboveAnySplitThatFitsAndTighten) {
  SmallTemplates deep(/*bound_generation=*/false), cheap(/*bound_generation=*/true);
  ASSERT_EQ(deep.set().size(), cheap.set().size());
  search::TemplateEvaluator ev(deep.ctx(), deep.set(), deep.ctx().tables);
  search::TemplateEvaluator first(cheap.ctx(), cheap.set(), cheap.ctx().tables);
  int tighter = 0;
  search::template_fixture::expect_bounds_below_every_split(
      deep, ev, [&](int tpl, std::size_t mi, const std::optional<search::MicroBatchOption>& b) {
        const auto& loose = first.bound_at(tpl, mi);
        if (loose && (!b || b->max_ms > loose->max_ms || b->sum_ms > loose->sum_ms)) ++tighter;
      });
  // Not vacuous: the deep terms change some bounds.
  EXPECT_GT(tighter, 0);
}

}  // namespace
}  // namespace eth::template_bounds_test
