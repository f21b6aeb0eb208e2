// The costlier lower-bound terms of pipeline templates (template_bounds.cpp: the whole-unit count
// bound and the speed and memory bound), which join the cheap terms once a template is deepened
// or when bounds are not generated in tiers: with them a template's bound still never exceeds
// what any split that fits achieves (its bottleneck, or its round-trip slot when larger; its
// stage times summed with the transfers), a size they rule out has no split that fits, and they
// do tighten: some bound rises or some size goes against the cheap terms alone. The oracle is
// every unit split, priced range by range (template_fixture.h).
#include <gtest/gtest.h>

#include <string>

#include "search/template_evaluator.h"
#include "search/template_fixture.h"

namespace eth::template_bounds_test {
namespace {

using search::template_fixture::kNoSplit;
using search::template_fixture::SmallTemplates;

TEST(TemplateBounds, DeepTermsNeverAboveAnySplitThatFitsAndTighten) {
  SmallTemplates deep(/*bound_generation=*/false), cheap(/*bound_generation=*/true);
  ASSERT_GT(deep.set().size(), 20);
  ASSERT_EQ(deep.set().size(), cheap.set().size());
  search::TemplateEvaluator ev(deep.ctx(), deep.set(), deep.ctx().tables);
  search::TemplateEvaluator first(cheap.ctx(), cheap.set(), cheap.ctx().tables);
  int bounded = 0, fitting = 0, ruled_out = 0, tighter = 0;
  for (int tpl = 0; tpl < deep.set().size(); ++tpl) {
    const search::PipelineTemplate& t = deep.set().at(tpl);
    for (std::size_t mi = 0; mi < deep.sizes().size(); ++mi) {
      const std::int64_t mbs = deep.sizes()[mi];
      const auto best = deep.best(t, mbs);
      const auto& bound = ev.bound_at(tpl, mi);
      const auto& loose = first.bound_at(tpl, mi);
      const std::string what =
          search::describe_template(t, deep.ctx().types) + " mbs " + std::to_string(mbs);
      if (best.max_ms < kNoSplit) ++fitting;
      if (!bound) {
        ++ruled_out;
        EXPECT_EQ(best.max_ms, kNoSplit) << what << ": no bound, yet a split fits";
        if (loose) ++tighter;
        continue;
      }
      ++bounded;
      EXPECT_EQ(bound->mbs, mbs);
      EXPECT_LE(bound->max_ms, best.max_ms) << what;
      EXPECT_LE(bound->sum_ms, best.sum_ms) << what;
      if (loose && (bound->max_ms > loose->max_ms || bound->sum_ms > loose->sum_ms)) ++tighter;
    }
  }
  // The cluster's memory leaves some templates no split and some several.
  EXPECT_GT(fitting, 20);
  EXPECT_GT(ruled_out, 0);
  EXPECT_GT(bounded, fitting / 2);
  // Not vacuous: the deep terms change some bounds.
  EXPECT_GT(tighter, 0);
}

}  // namespace
}  // namespace eth::template_bounds_test
