// Why nothing fits, as the search says it: the sentence for a cluster with no usable tp, for no
// templates, for nothing profiled at the size, and for a layout that overflows, which names the
// template whose best split comes closest to fitting (found here by trying every split of every
// template) and its first overflowing stage with the bytes it needs (the floor written out
// here: static + workspace + in-flight x the least held bytes); a layout that fits memory blames
// the search limits, each limit with its count and flag.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>

#include "cluster/cluster_spec.h"
#include "core/format.h"
#include "profile/analytic.h"
#include "search/engine.h"
#include "search/search_fixture.h"

namespace eth::diagnose_test {
namespace {

using search::PipelineTemplate;
using search::TemplateSet;
using search::search_fixture::small_cluster;
using search::search_fixture::small_model;  // units 0..9

PlannerOptions options() {
  PlannerOptions o;
  o.micro_batch_sizes = {2, 4};
  o.tp = {1, 2};
  return o;
}

struct Planning {
  ModelSpec m = small_model();
  ClusterSpec c;
  ProfileDb db;
  PlannerOptions o;
  search::Context ctx;
  Planning(const std::string& nodes, const PlannerOptions& opt)
      : c(small_cluster(nodes)),
        db(analytic_profile_db(m, c, {1, 2}, {2, 4}, m.seq_len)),
        o(opt),
        ctx(m, c, db, 16, m.seq_len, o) {}
};

// The least bytes any recompute set leaves on stage s of S holding units [i, j).
double floor_bytes(const search::UnitTable& t, std::size_t s, std::size_t S, std::size_t i,
                   std::size_t j) {
  double ws = 0, held = std::numeric_limits<double>::infinity();
  for (std::size_t u = i; u < j; ++u) ws = std::max(ws, t.workspace[u]);
  for (const auto& h : t.held_prefix) held = std::min(held, h[j] - h[i]);
  return t.static_prefix[j] - t.static_prefix[i] + ws + static_cast<double>(S - s) * held;
}

TEST(Diagnose, NoUsableTpAndNoTemplatesAreSaidSo) {
  PlannerOptions o = options();
  o.tp = {3};  // divides neither the 8 heads nor the FFN
  Planning none(R"({"device_type": "fast", "devices": 4})", o);
  ASSERT_TRUE(none.ctx.types.empty());
  TemplateSet empty;
  EXPECT_EQ(search::explain_overflow(none.ctx, empty).rfind(
                "no device type of the cluster has a usable tp degree", 0),
            0u);
  Planning some(R"({"device_type": "fast", "devices": 4})", options());
  EXPECT_EQ(search::explain_overflow(some.ctx, empty).rfind("no pipeline template fits", 0), 0u);
}

TEST(Diagnose, NothingProfiledAtTheSmallestSizeIsSaidSo) {
  PlannerOptions o = options();
  o.micro_batch_sizes = {1, 4};  // the profile starts at 2
  Planning s(R"({"device_type": "fast", "devices": 4})", o);
  TemplateSet set;
  set.intern(PipelineTemplate{{{0, 1, 2}}});
  EXPECT_EQ(search::explain_overflow(s.ctx, set),
            "no template is profiled at micro-batch size 1");
}

TEST(Diagnose, OverflowNamesTheClosestTemplateAndItsFirstOverflowingStage) {
  // tiny devices of 5 MB: the 10 units (about 110 MB of state) overflow any layout of up to
  // four of them.
  Planning s(R"({"device_type": "tiny", "devices": 4})", options());
  ASSERT_EQ(s.ctx.types.size(), 1u);
  TemplateSet set;
  const std::vector<PipelineTemplate> templates{PipelineTemplate{{{0, 1, 1}}},
                                                PipelineTemplate{{{0, 1, 3}}},
                                                PipelineTemplate{{{0, 2, 2}}},
                                                PipelineTemplate{{{0, 1, 4}}}};
  for (const auto& t : templates) set.intern(t);
  const double cap = 0.005e9;
  // Every split of every template at the smallest size (2): the least worst ratio.
  double best_ratio = std::numeric_limits<double>::infinity();
  std::size_t best = 0;
  std::vector<std::size_t> best_bounds;
  for (std::size_t k = 0; k < templates.size(); ++k) {
    const auto& g = templates[k].groups.front();
    const search::UnitTable& t = s.ctx.tables.get("tiny", g.tp, 2);
    const auto S = static_cast<std::size_t>(g.count);
    std::vector<std::size_t> b(S + 1, 0);
    b[S] = 10;
    // Cuts of 10 units into S non-empty ranges, as an S - 1 digit counter.
    std::vector<std::size_t> cut(S - 1);
    for (std::size_t x = 0; x + 1 < S; ++x) cut[x] = x + 1;
    for (;;) {
      for (std::size_t x = 0; x + 1 < S; ++x) b[x + 1] = cut[x];
      double worst = 0;
      for (std::size_t st = 0; st < S; ++st)
        worst = std::max(worst, floor_bytes(t, st, S, b[st], b[st + 1]) / cap);
      if (worst < best_ratio) {
        best_ratio = worst;
        best = k;
        best_bounds = b;
      }
      std::size_t x = S - 1;  // advance the last cut that can move
      while (x > 0 && cut[x - 1] == 10 - (S - 1 - (x - 1))) --x;
      if (x == 0) break;
      ++cut[x - 1];
      for (std::size_t y = x; y + 1 < S; ++y) cut[y] = cut[y - 1] + 1;
    }
  }
  ASSERT_GT(best_ratio, 1.0);
  const std::string msg = search::explain_overflow(s.ctx, set);
  const std::string name = search::describe_template(templates[best], s.ctx.types);
  EXPECT_NE(msg.find("pipeline template [" + name + "] at micro-batch size 2"), std::string::npos)
      << msg;
  // Its first stage over capacity, with the floor's bytes.
  const auto& g = templates[best].groups.front();
  const search::UnitTable& t = s.ctx.tables.get("tiny", g.tp, 2);
  const auto S = static_cast<std::size_t>(g.count);
  std::size_t st = 0;
  while (floor_bytes(t, st, S, best_bounds[st], best_bounds[st + 1]) <= cap) ++st;
  const double need = floor_bytes(t, st, S, best_bounds[st], best_bounds[st + 1]);
  const std::string want = "still overflows stage " + std::to_string(st) +
                           " (device type tiny, tp " + std::to_string(g.tp) + ", units " +
                           std::to_string(best_bounds[st]) + "-" +
                           std::to_string(best_bounds[st + 1] - 1) + "): it needs " +
                           fmt_bytes(need) + " of its 5.0 MB (over by " + fmt_bytes(need - cap) +
                           ")";
  EXPECT_NE(msg.find(want), std::string::npos) << msg << "\nwanted: " << want;
  EXPECT_FALSE(s.ctx.limits_not_memory);
}

TEST(Diagnose, ALayoutThatFitsBlamesTheSearchLimits) {
  Planning s(R"({"device_type": "fast", "devices": 4})", options());
  TemplateSet set;
  set.intern(PipelineTemplate{{{0, 1, 4}}});  // 4 x 80 MB hold the model
  const std::string msg = search::explain_overflow(s.ctx, set);
  EXPECT_NE(msg.find("fits memory but was rejected by the search limits: none recorded"),
            std::string::npos)
      << msg;
  EXPECT_TRUE(s.ctx.limits_not_memory);
}

TEST(Diagnose, EachLimitIsNamedWithItsCountAndFlag) {
  PlannerOptions o = options();
  o.max_pipelines = 6;
  Planning s(R"({"device_type": "fast", "devices": 4})", o);
  EXPECT_EQ(search::limits_that_bound(s.ctx), "none recorded");
  s.ctx.stats.skipped["max_pipelines"] = 3;
  s.ctx.stats.skipped["packing"] = 2;
  s.ctx.stats.skipped["v_inter"] = 1;
  s.ctx.stats.rejected_options["v_intra"] = 4;
  s.ctx.stats.rejected_options["enumeration_limit"] = 5;
  s.ctx.stats.limits["max_partitions"] = 7;
  s.ctx.stats.skipped["no_fit"] = 9;  // memory, not a limit: not named
  EXPECT_EQ(search::limits_that_bound(s.ctx),
            "3 partitions need more than 6 pipelines (every pipeline takes at least one sample "
            "of the global batch of 16, and --max-pipelines 6): a larger --gbs, or larger --tp "
            "and more stages per pipeline; "
            "2 partitions do not pack onto the nodes (a stage's tp devices sit in one node); "
            "1 partitions exceed --v-inter; "
            "4 template options exceed --v-intra; "
            "5 templates have more unit splits than the enumeration limit (--no-dpo); "
            "the search stopped after 7 partitions (--max-partitions)");
}

}  // namespace
}  // namespace eth::diagnose_test
