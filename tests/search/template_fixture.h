// The exhaustive oracle the template-bound tests (template_options_test.cpp,
// template_bounds_test.cpp) hold the bounds to: every unit split of a template's stages, priced
// here range by range, on the small model and a cluster of 4 fast and 4 slow devices whose
// memory leaves some templates no split and some several. Test-only.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "profile/analytic.h"
#include "search/engine.h"
#include "search/partition_fixture.h"
#include "search/search_fixture.h"
#include "search/template_evaluator.h"

namespace eth::search::template_fixture {

inline constexpr double kNoSplit = std::numeric_limits<double>::infinity();

struct Best {
  double max_ms = kNoSplit;  // least over fitting splits of max(bottleneck, round-trip slot)
  double sum_ms = kNoSplit;  // least over fitting splits of the stage times plus transfers
};

// Every split of the stages over units [0, U), each stage priced by range_cost with its
// in-flight count S - s; comm: the template's transfers.
inline Best every_split(const std::vector<StageSlot>& slots, std::size_t U, double comm) {
  const std::size_t S = slots.size();
  Best best;
  std::vector<std::size_t> b(S + 1, 0);
  b[S] = U;
  std::function<void(std::size_t)> place = [&](std::size_t s) {
    if (s + 1 == S) {
      double mx = 0, sum = 0;
      for (std::size_t k = 0; k < S; ++k) {
        const RangeCost c =
            range_cost(*slots[k].table, slots[k].capacity_bytes, static_cast<std::int64_t>(S - k),
                       static_cast<std::int64_t>(b[k]), static_cast<std::int64_t>(b[k + 1]));
        if (!c.fits) return;
        mx = std::max(mx, c.time_ms);
        sum += c.time_ms;
      }
      best.max_ms = std::min(best.max_ms, std::max(mx, (sum + comm) / static_cast<double>(S)));
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

// The small model (10 units) on 4 fast and 4 slow devices, micro-batch sizes 1, 2 and 4, tp 1
// and 2, and every template of the partitions of up to 8 pipelines.
class SmallTemplates {
 public:
  explicit SmallTemplates(bool bound_generation)
      : model_(search_fixture::small_model()),
        cluster_(search_fixture::small_cluster(
            R"({"device_type": "fast", "devices": 4}, {"device_type": "slow", "devices": 4})")),
        db_(analytic_profile_db(model_, cluster_, {1, 2}, {1, 2, 4}, model_.seq_len)),
        opt_(options(bound_generation)),
        ctx_(model_, cluster_, db_, 16, model_.seq_len, opt_) {
    std::vector<Partition> parts;
    generate_partitions(ctx_.types, partition_fixture::gen(10, 8, false), set_, parts);
  }

  Context& ctx() { return ctx_; }
  const TemplateSet& set() const { return set_; }
  const std::vector<std::int64_t>& sizes() const { return opt_.micro_batch_sizes; }
  static constexpr std::size_t kUnits = 10;

  // The oracle for template t (in the set or not) at micro-batch size mbs.
  Best best(const PipelineTemplate& t, std::int64_t mbs) {
    const std::vector<StageSlot> slots = template_slots(ctx_, t, mbs);
    EXPECT_FALSE(slots.empty());
    if (slots.empty()) return {};
    return every_split(slots, kUnits,
                       template_comm_ms(ctx_, t, slots.front().table->boundary_bytes));
  }

 private:
  static PlannerOptions options(bool bound_generation) {
    PlannerOptions o;
    o.micro_batch_sizes = {1, 2, 4};
    o.tp = {1, 2};
    o.bound_generation = bound_generation;
    return o;
  }

  ModelSpec model_;
  ClusterSpec cluster_;
  ProfileDb db_;
  PlannerOptions opt_;
  Context ctx_;
  TemplateSet set_;
};

// bound_at of `ev` (over g's set) for every template and size held to the oracle: never above
// the least any fitting split achieves, absent only where no split fits; `each` sees every
// (template, size index, bound) too. Fails unless the cluster's memory leaves some templates no
// split and some several (else the check would say little).
inline void expect_bounds_below_every_split(
    SmallTemplates& g, TemplateEvaluator& ev,
    const std::function<void(int, std::size_t, const std::optional<MicroBatchOption>&)>& each =
        {}) {
  ASSERT_GT(g.set().size(), 20);
  int bounded = 0, fitting = 0, ruled_out = 0;
  for (int tpl = 0; tpl < g.set().size(); ++tpl) {
    const PipelineTemplate& t = g.set().at(tpl);
    for (std::size_t mi = 0; mi < g.sizes().size(); ++mi) {
      const std::int64_t mbs = g.sizes()[mi];
      const Best best = g.best(t, mbs);
      const std::optional<MicroBatchOption>& bound = ev.bound_at(tpl, mi);
      const std::string what = describe_template(t, g.ctx().types) + " mbs " + std::to_string(mbs);
      if (each) each(tpl, mi, bound);
      if (best.max_ms < kNoSplit) ++fitting;
      if (!bound) {
        ++ruled_out;
        EXPECT_EQ(best.max_ms, kNoSplit) << what << ": no bound, yet a split fits";
        continue;
      }
      ++bounded;
      EXPECT_EQ(bound->mbs, mbs);
      EXPECT_LE(bound->max_ms, best.max_ms) << what;
      EXPECT_LE(bound->sum_ms, best.sum_ms) << what;
    }
  }
  EXPECT_GT(fitting, 20);
  EXPECT_GT(ruled_out, 0);
  EXPECT_GT(bounded, fitting / 2);
}

}  // namespace eth::search::template_fixture
