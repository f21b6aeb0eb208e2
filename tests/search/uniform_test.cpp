// The uniform baseline against its definition, checked from the cluster and the options alone:
// one (tp, pp) shape per candidate laid over the devices in Megatron's rank order (tp fastest,
// then data parallel, then pipeline), units split evenly, equal data, one micro-batch size, no
// or full recompute; the shapes counted, packed and skipped as the hand count below says; the
// best uniform plan valid under validate_plan and within memory under the predictor.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "cluster/cluster_spec.h"
#include "cost/predictor.h"
#include "plan/validate.h"
#include "profile/analytic.h"
#include "search/engine.h"
#include "search/planner.h"
#include "search/search_fixture.h"

namespace eth::uniform_test {
namespace {

using search::search_fixture::small_cluster;
using search::search_fixture::small_model;  // units 0..9

PlannerOptions options() {
  PlannerOptions o;
  o.micro_batch_sizes = {1, 2, 4};
  o.tp = {1, 2, 4};
  return o;
}

struct UniformRun {
  std::vector<search::Candidate> candidates;
  std::string diagnosis;
  SearchStats stats;
};

UniformRun uniform(const ClusterSpec& c, std::int64_t gbs, const PlannerOptions& o) {
  const ModelSpec m = small_model();
  const ProfileDb db = analytic_profile_db(m, c, {1, 2, 4}, {1, 2, 4}, m.seq_len);
  search::Context ctx(m, c, db, gbs, m.seq_len, o);
  UniformRun r;
  r.candidates = search::search_uniform(ctx, r.diagnosis);
  r.stats = ctx.stats;
  return r;
}

std::int64_t count(const std::map<std::string, std::int64_t>& m, const std::string& key) {
  const auto it = m.find(key);
  return it == m.end() ? 0 : it->second;
}

// One fast node of 4 (ids 0-3), one slow node of 4 (ids 4-7).
const char* const kTwoNodes =
    R"({"device_type": "fast", "devices": 4}, {"device_type": "slow", "devices": 4})";

TEST(Uniform, CandidatesAreMegatronShapesWithEvenUnitsAndData) {
  const ClusterSpec c = small_cluster(kTwoNodes);
  const std::int64_t gbs = 13, U = 10, N = 8;
  const UniformRun r = uniform(c, gbs, options());
  ASSERT_GT(r.candidates.size(), 2u) << r.diagnosis;  // several shapes fit
  std::set<std::pair<std::int64_t, std::int64_t>> shapes;
  for (std::size_t i = 0; i < r.candidates.size(); ++i) {
    const search::Candidate& cand = r.candidates[i];
    if (i > 0) {
      EXPECT_LE(r.candidates[i - 1].objective_ms, cand.objective_ms);
    }
    EXPECT_EQ(cand.family, "uniform");
    const auto dp = static_cast<std::int64_t>(cand.pipelines.size());
    const auto pp = static_cast<std::int64_t>(cand.pipelines.front().stages.size());
    const std::int64_t tp = cand.pipelines.front().stages.front().tp;
    EXPECT_EQ(dp * pp * tp, N);
    EXPECT_TRUE(shapes.insert({tp, pp}).second) << "one candidate per shape";
    const RecomputeSet rc = cand.pipelines.front().stages.front().recompute;
    EXPECT_TRUE(rc.empty() || rc.full_unit());
    std::int64_t batch = 0;
    for (std::int64_t p = 0; p < dp; ++p) {
      const auto& pipe = cand.pipelines[static_cast<std::size_t>(p)];
      EXPECT_EQ(pipe.mbs, cand.pipelines.front().mbs);
      // Equal data: the first gbs % dp replicas take one sample more.
      EXPECT_EQ(pipe.batch, gbs / dp + (p < gbs % dp ? 1 : 0));
      batch += pipe.batch;
      ASSERT_EQ(static_cast<std::int64_t>(pipe.stages.size()), pp);
      std::int64_t first = 0;
      for (std::int64_t s = 0; s < pp; ++s) {
        const auto& st = pipe.stages[static_cast<std::size_t>(s)];
        EXPECT_EQ(st.tp, tp);
        EXPECT_EQ(st.recompute, rc);
        std::vector<std::int64_t> ids;
        for (std::int64_t k = 0; k < tp; ++k) ids.push_back((s * dp + p) * tp + k);
        EXPECT_EQ(st.devices, ids) << "tp " << tp << " pp " << pp << " replica " << p;
        EXPECT_EQ(st.device_type, ids.front() < 4 ? "fast" : "slow");
        // U / pp units each, the first U % pp stages one more.
        const std::int64_t units = U / pp + (s < U % pp ? 1 : 0);
        EXPECT_EQ(st.first_unit, first);
        EXPECT_EQ(st.last_unit, first + units - 1);
        first += units;
      }
      EXPECT_EQ(first, U);
    }
    EXPECT_EQ(batch, gbs);
  }
  // Shapes with N % (tp pp) == 0 and pp <= U: tp 1: pp 1, 2, 4, 8; tp 2: pp 1, 2, 4; tp 4:
  // pp 1, 2. Each is evaluated or skipped for a reason.
  EXPECT_EQ(r.stats.generated, 9);
  EXPECT_EQ(r.stats.generated, r.stats.evaluated + r.stats.skipped_total());
  EXPECT_EQ(static_cast<std::int64_t>(r.candidates.size()),
            std::min<std::int64_t>(r.stats.evaluated, options().top_k));
}

TEST(Uniform, ShapesThatSpanNodesOrExceedThePipelineLimitAreSkipped) {
  // Nodes of 2: a tp-4 group would span two nodes (tp 4: pp 1 and 2).
  const ClusterSpec c = small_cluster(R"({"device_type": "fast", "devices": 2},
      {"device_type": "fast", "devices": 2}, {"device_type": "slow", "devices": 2},
      {"device_type": "slow", "devices": 2})");
  PlannerOptions o = options();
  UniformRun r = uniform(c, 13, o);
  EXPECT_EQ(count(r.stats.skipped, "packing"), 2);
  for (const auto& cand : r.candidates) EXPECT_LT(cand.pipelines.front().stages.front().tp, 4);
  // At most 2 pipelines: dp 8 (tp 1 pp 1), dp 4 (tp 1 pp 2, tp 2 pp 1) go.
  o.max_pipelines = 2;
  r = uniform(c, 13, o);
  EXPECT_EQ(count(r.stats.skipped, "max_pipelines"), 3);
  for (const auto& cand : r.candidates) EXPECT_LE(cand.pipelines.size(), 2u);
}

TEST(Uniform, NothingFitsNamesTheSmallestMemory) {
  const ClusterSpec c = small_cluster(R"({"device_type": "tiny", "devices": 2})");
  const UniformRun r = uniform(c, 8, options());
  EXPECT_TRUE(r.candidates.empty());
  EXPECT_NE(r.diagnosis.find("fits the smallest device memory of the cluster (0.005 GB)"),
            std::string::npos)
      << r.diagnosis;
}

// The plan made from the best uniform candidate obeys the plan rules and fits every device
// under the predictor (whose memory model the search's tables must not undercut).
TEST(Uniform, BestPlanIsValidAndFitsUnderThePredictor) {
  const ClusterSpec c = small_cluster(kTwoNodes);
  const ModelSpec m = small_model();
  const ProfileDb db = analytic_profile_db(m, c, {1, 2, 4}, {1, 2, 4}, m.seq_len);
  const PlannerResult r = plan_training(PlanMethod::Uniform, m, c, db, 13, m.seq_len, options());
  EXPECT_EQ(r.family, "uniform");
  const auto problems = validate_plan(r.plan, c);
  EXPECT_TRUE(problems.empty()) << problems.front().path << ": " << problems.front().message;
  const Prediction pred = predict(r.plan, c, db);
  EXPECT_TRUE(pred.fits);
  for (const auto& d : pred.devices) EXPECT_LE(d.peak_bytes, d.capacity_bytes) << d.device;
}

}  // namespace
}  // namespace eth::uniform_test
