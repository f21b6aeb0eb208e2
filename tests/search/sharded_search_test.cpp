// The planner under optimizer sharding (issue 28): the search's memory charge for a sharded
// stage against the predictor's (cost/sharding_memory.h), and what the freed memory buys, each
// plan checked independently of the search: validate_plan, the predictor's peak of every
// device under its memory, and the same plan with its state whole overflowing (so the
// unsharded search could not have chosen it).
#include "search/planner.h"

#include <gtest/gtest.h>

#include <cstdio>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "cost/sharding_memory.h"
#include "plan/sharding.h"
#include "plan/validate.h"
#include "profile/analytic.h"
#include "search/cost_tables.h"

namespace eth::sharded_search_test {
namespace {

// 8 blocks of hidden 256 (units 0..9): about 12.6 MB of static state per block at 16 B/param.
ModelSpec small_model() { return ModelSpec{"small", 8, 256, 8, 128, 1024, 1024}; }
ModelSpec two_blocks() { return ModelSpec{"two-blocks", 2, 256, 8, 128, 1024, 1024}; }

ClusterSpec two_types(double fast_gb, double slow_gb, int per_type) {
  char b[1024];
  std::snprintf(b, sizeof b, R"({"nodes": [{"device_type": "fast", "devices": %d},
      {"device_type": "slow", "devices": %d}], "device_types": {
      "fast": {"tflops": 100, "memory_gb": %g, "intra_node_bandwidth_gbps": 800},
      "slow": {"tflops": 40, "memory_gb": %g, "intra_node_bandwidth_gbps": 400}},
      "inter_node_bandwidth_gbps": 100})",
                per_type, per_type, fast_gb, slow_gb);
  const Json j = Json::parse(b);
  return parse_cluster(JsonCursor(j, JsonOrigin{"cluster", "test", ""}));
}

StagePlan stage(const char* type, std::int64_t device, std::int64_t first, std::int64_t last) {
  StagePlan s;
  s.device_type = type;
  s.devices = {device};
  s.first_unit = first;
  s.last_unit = last;
  return s;
}

// Four pipelines of two stages, each cut at its own unit (blocks of one to three units, each
// held by four devices): every device's optimizer charge in the sharded search's tables (least
// holder count D = 4 and D = 2) against the predictor's for the evenly sharded plan. D = 4 is
// the plan's own holder count: the charge is the predictor's share, up by at most the rounding
// of one element per block; D = 2 charges more. The whole range charge (range_memory, every
// term the search adds) covers the predictor's device peak in every aggregation mode.
TEST(ShardedSearch, ChargeOfEachStageIsThePredictorsShare) {
  const ModelSpec m = small_model();
  const ClusterSpec c = two_types(1.0, 1.0, 4);
  const ProfileDb db = analytic_profile_db(m, c, {1}, {1, 2}, m.seq_len);
  const std::int64_t U = m.num_units();
  const std::int64_t cuts[] = {3, 5, 6, 8};
  Plan plan;
  plan.model = m;
  plan.seq_len = m.seq_len;
  plan.gbs = 8;
  for (std::int64_t p = 0; p < 4; ++p) {
    const char* type = p < 2 ? "fast" : "slow";
    plan.pipelines.push_back(PipelinePlan{
        1, 2, {stage(type, 2 * p, 0, cuts[p] - 1), stage(type, 2 * p + 1, cuts[p], U - 1)}});
  }
  const Plan sharded = with_optimizer_sharding(plan, OptimizerSharding::Even);
  ASSERT_TRUE(validate_plan(sharded, c).empty());
  const Prediction whole = predict(plan, c, db);
  search::CostTables tables(db, m.seq_len);
  search::CostTables four(db, m.seq_len, true, kDefaultCollectiveWindowBytes, 4);
  search::CostTables two(db, m.seq_len, true, kDefaultCollectiveWindowBytes, 2);
  const double per_element = precision_bytes(whole.precision).optimizer_state;
  for (AggregationMode agg :
       {AggregationMode::Block, AggregationMode::Tensor, AggregationMode::Device}) {
    PredictOptions po;
    po.aggregation = agg;
    const Prediction pred = predict(sharded, c, db, po);
    for (const DevicePrediction& d : pred.devices) {
      const StagePlan& st = sharded.pipelines[static_cast<std::size_t>(d.pipeline)]
                                .stages[static_cast<std::size_t>(d.stage)];
      const auto i = static_cast<std::size_t>(st.first_unit);
      const auto j = static_cast<std::size_t>(st.last_unit + 1);
      const auto& t = tables.get(st.device_type, 1, 1);
      auto state = [&](const search::UnitTable& s) {
        // The sharded table's static bytes less the whole one's: the state's change.
        return s.static_prefix[j] - s.static_prefix[i] -
               (t.static_prefix[j] - t.static_prefix[i]) +
               whole.devices[static_cast<std::size_t>(d.device)].optimizer_state_bytes;
      };
      const std::string who = "device " + std::to_string(d.device);
      const double at4 = state(four.get(st.device_type, 1, 1));
      EXPECT_GE(at4, d.optimizer_state_bytes) << who;
      EXPECT_LE(at4 - d.optimizer_state_bytes, per_element * 3.0 * static_cast<double>(j - i))
          << who;
      EXPECT_GT(state(two.get(st.device_type, 1, 1)), at4) << who;
      // Stage s of S holds S - s micro-batches in flight in the search's charge.
      const double charged = search::range_memory(four.get(st.device_type, 1, 1), 2 - d.stage,
                                                  st.first_unit, st.last_unit + 1, 0);
      EXPECT_GE(charged, d.peak_bytes) << who << " " << aggregation_mode_name(agg);
    }
  }
}

// The plan's rules and memory, checked outside the search; and that with its state whole it
// would overflow some device.
void expect_fits_only_sharded(const Plan& plan, const ClusterSpec& c, const ProfileDb& db) {
  EXPECT_NE(plan.optimizer_sharding, OptimizerSharding::None);
  EXPECT_TRUE(validate_plan(plan, c).empty());
  for (AggregationMode agg :
       {AggregationMode::Block, AggregationMode::Tensor, AggregationMode::Device}) {
    PredictOptions po;
    po.aggregation = agg;
    const Prediction pred = predict(plan, c, db, po);
    for (const DevicePrediction& d : pred.devices) {
      EXPECT_LE(d.peak_bytes, c.type(c.device(d.device).device_type).memory_bytes())
          << "device " << d.device << " " << aggregation_mode_name(agg);
    }
  }
  EXPECT_FALSE(predict(with_optimizer_sharding(plan, OptimizerSharding::None), c, db).fits);
}

PlannerOptions options(OptimizerSharding mode) {
  PlannerOptions o;
  o.micro_batch_sizes = {1, 2, 4, 8};
  o.tp = {1};  // no unit split across devices: memory is per unit
  o.optimizer_sharding = mode;
  return o;
}

// Two blocks on 8 devices of 14 MB: a block's 12.6 MB of static state does not fit whole on
// any device, so no unsharded plan exists; sharded across the holders of 2 or more pipelines
// it does, evenly or by free memory.
TEST(ShardedSearch, FitsWhereNoUnshardedPlanDoes) {
  const ModelSpec m = two_blocks();
  const ClusterSpec c = two_types(0.014, 0.014, 4);
  const ProfileDb db = analytic_profile_db(m, c, {1}, {1, 2, 4, 8}, m.seq_len);
  EXPECT_THROW(plan_training(PlanMethod::Eth, m, c, db, 64, m.seq_len,
                             options(OptimizerSharding::None)),
               InputError);
  for (OptimizerSharding mode : {OptimizerSharding::Even, OptimizerSharding::Memory}) {
    const PlannerResult r = plan_training(PlanMethod::Eth, m, c, db, 64, m.seq_len, options(mode));
    expect_fits_only_sharded(r.plan, c, db);
    EXPECT_GE(r.plan.pipelines.size(), 2u);
    // The search's charge bounds the predictor's: no finalist overflowed under it.
    EXPECT_EQ(r.stats.skipped.count("predictor_overflow"), 0u);
  }
}

// Two blocks on 4 fast devices of 17 MB and 4 slow of 12.75 MB: whole, the state fits one
// pipeline (a block takes a fast device, the slow ones idle); sharded, more pipelines fit and
// the plan is faster by more than a fifth.
TEST(ShardedSearch, FreedMemoryGivesAFasterPlan) {
  const ModelSpec m = two_blocks();
  const ClusterSpec c = two_types(0.017, 0.01275, 4);
  const ProfileDb db = analytic_profile_db(m, c, {1}, {1, 2, 4, 8}, m.seq_len);
  const PlannerResult whole =
      plan_training(PlanMethod::Eth, m, c, db, 64, m.seq_len, options(OptimizerSharding::None));
  EXPECT_EQ(whole.plan.optimizer_sharding, OptimizerSharding::None);
  EXPECT_TRUE(whole.prediction.fits);
  const PlannerResult sharded =
      plan_training(PlanMethod::Eth, m, c, db, 64, m.seq_len, options(OptimizerSharding::Memory));
  expect_fits_only_sharded(sharded.plan, c, db);
  EXPECT_GT(sharded.plan.pipelines.size(), whole.plan.pipelines.size());
  EXPECT_LT(sharded.prediction.iteration_ms, 0.8 * whole.prediction.iteration_ms);
  EXPECT_DOUBLE_EQ(sharded.prediction.iteration_ms, predict(sharded.plan, c, db).iteration_ms);
  EXPECT_EQ(sharded.stats.skipped.count("predictor_overflow"), 0u);
}

}  // namespace
}  // namespace eth::sharded_search_test
