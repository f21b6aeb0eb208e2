// The simulator on optimizer-sharded plans (issue 28): block-wise, each gradient collective is a
// reduce-scatter moving half an all-reduce's ring bytes, and the updated weights are gathered
// after the step, delaying the iteration's end; the independent timeline checker accepts the
// result, and the simulation agrees with the predictor within the tolerance the unsharded
// plans hold (the CLI test's 5%), the predictor being the upper bound its schedule is.
#include <gtest/gtest.h>

#include <algorithm>

#include "cost/predictor.h"
#include "cost/sharding_memory.h"
#include "plan/sharding.h"
#include "profile/analytic.h"
#include "sim/simulator.h"
#include "sim/timeline_check.h"
#include "sim_fixture.h"

namespace eth {
namespace {

using test::make_plan;
using test::PipeSpec;

ClusterSpec four_a100() {
  ClusterSpec c = load_cluster("13b-a100-rtx3090");
  c.nodes = {NodeSpec{"A100", 4}};
  return c;
}

// Two pipelines cut at different units: blocks {0-2}, {3}, {4-5} on different holder pairs.
Plan two_pipelines(OptimizerSharding mode) {
  const PipeSpec a{1, 4, {{0, 2}, {3, 5}}};
  const PipeSpec b{1, 4, {{0, 3}, {4, 5}}};
  return with_optimizer_sharding(make_plan(test::sim_model(4), {a, b}), mode);
}

TEST(ShardedSim, ReduceScatterHalvesTheRingTransferAndGathersFollowTheStep) {
  const ClusterSpec c = four_a100();
  const Plan whole = two_pipelines(OptimizerSharding::None);
  const Plan shard = two_pipelines(OptimizerSharding::Even);
  const double latency = 0.05;
  const auto all_reduce = make_collectives(whole, c, AggregationMode::Block, latency, 4.0);
  const auto scatter = make_collectives(shard, c, AggregationMode::Block, latency, 4.0);
  ASSERT_EQ(all_reduce.size(), scatter.size());
  ASSERT_FALSE(scatter.empty());
  for (std::size_t i = 0; i < scatter.size(); ++i) {
    EXPECT_EQ(scatter[i].holders, all_reduce[i].holders);
    EXPECT_NEAR(scatter[i].duration_ms - latency, 0.5 * (all_reduce[i].duration_ms - latency),
                1e-12);
  }
  // Tensor-wise runs all-reduce, then keep their shard: the same collectives as unsharded.
  const auto tensor = make_collectives(shard, c, AggregationMode::Tensor, latency, 4.0);
  const auto tensor_whole = make_collectives(whole, c, AggregationMode::Tensor, latency, 4.0);
  for (std::size_t i = 0; i < tensor.size(); ++i) {
    EXPECT_EQ(tensor[i].duration_ms, tensor_whole[i].duration_ms);
  }
  EXPECT_TRUE(make_weight_gathers(whole, c, Precision::Fp32, latency).empty());

  SimOptions o;
  o.overlap = false;
  o.weight_gathers = make_weight_gathers(shard, c, Precision::Fp32, latency);
  ASSERT_EQ(o.weight_gathers.size(), scatter.size());  // every block has two holders
  const double opt_ms = 0.5;
  const auto costs = test::uniform_costs(shard, 1, 2, 0, opt_ms);
  const SimResult r = simulate(shard, costs, scatter, o);
  EXPECT_TRUE(check_timeline(shard, costs, scatter, r, o).empty());
  SimOptions no_gathers = o;
  no_gathers.weight_gathers.clear();
  const SimResult before = simulate(shard, costs, scatter, no_gathers);
  EXPECT_TRUE(check_timeline(shard, costs, scatter, before, no_gathers).empty());
  // The gathers run after the steps: the iteration is longer by at least the longest one and
  // at most all of them back to back.
  double longest = 0, sum = 0;
  for (const SimCollective& w : o.weight_gathers) {
    longest = std::max(longest, w.duration_ms);
    sum += w.duration_ms;
  }
  EXPECT_GE(r.iteration_ms - before.iteration_ms, longest - 1e-6);
  EXPECT_LE(r.iteration_ms - before.iteration_ms, sum + 1e-6);
  // The predictor's terms after the pipelines: its sync schedule (reduce-scatters), the step
  // and the busiest holder's gathers, an upper bound on the simulated tail.
  PredictOptions po;
  po.collective_latency_ms = latency;
  po.overlap = false;
  const double sync = predict_aggregation(shard, c, AggregationMode::Block, po).end_ms;
  const double gathers = shard_gather_ms(shard, ClusterIndex(c), Precision::Fp32, po);
  const double pipelines = *std::max_element(r.pipeline_ms.begin(), r.pipeline_ms.end());
  EXPECT_LE(r.iteration_ms - pipelines, sync + opt_ms + gathers + 1e-5);
  EXPECT_GE(r.iteration_ms - pipelines, sync + opt_ms - 1e-5);
}

// GPT-3 350M on 2 x 910B2 + 2 x 910B4, two two-stage pipelines cut at different units (the
// CLI test's plan), every aggregation mode, sharded evenly and by free memory: simulated and
// predicted iteration times within 5%, as unsharded, and the checker accepts every timeline.
TEST(ShardedSim, SimulatorAndPredictorAgreeOnShardedPlans) {
  ClusterSpec c = load_cluster("13b-910b2-910b4");
  c.nodes = {NodeSpec{"910B2", 2}, NodeSpec{"910B4", 2}};
  const ModelSpec m = model_preset("gpt3-350m");
  const ProfileDb db = analytic_profile_db(m, c, {1}, {1, 2}, m.seq_len);
  Plan plan;
  plan.model = m;
  plan.seq_len = m.seq_len;
  plan.gbs = 16;
  auto stage = [](const char* type, std::int64_t d, std::int64_t first, std::int64_t last) {
    StagePlan s;
    s.device_type = type;
    s.devices = {d};
    s.first_unit = first;
    s.last_unit = last;
    return s;
  };
  plan.pipelines.push_back(PipelinePlan{1, 9, {stage("910B2", 0, 0, 12), stage("910B2", 1, 13, 25)}});
  plan.pipelines.push_back(PipelinePlan{1, 7, {stage("910B4", 2, 0, 10), stage("910B4", 3, 11, 25)}});
  for (OptimizerSharding mode :
       {OptimizerSharding::None, OptimizerSharding::Even, OptimizerSharding::Memory}) {
    const Plan p = shard_optimizer_state(plan, mode, c, db);
    for (AggregationMode agg :
         {AggregationMode::Block, AggregationMode::Tensor, AggregationMode::Device}) {
      PredictOptions po;
      po.aggregation = agg;
      const Prediction pred = predict(p, c, db, po);
      const auto costs = compute_stage_costs(p, c, db, po.p2p_latency_ms, pred.precision, agg,
                                             po.collective_window_bytes);
      const auto colls =
          make_collectives(p, c, agg, po.collective_latency_ms, pred.gradient_element_bytes);
      SimOptions so;
      so.weight_gathers = make_weight_gathers(p, c, pred.precision, po.collective_latency_ms);
      EXPECT_EQ(so.weight_gathers.empty(), mode == OptimizerSharding::None);
      const SimResult r = simulate(p, costs, colls, so);
      const std::string what = std::string(optimizer_sharding_name(mode)) + " " +
                               std::string(aggregation_mode_name(agg));
      EXPECT_TRUE(check_timeline(p, costs, colls, r, so).empty()) << what;
      EXPECT_LT(std::abs(r.iteration_ms - pred.iteration_ms) / pred.iteration_ms, 0.05)
          << what << ": predicted " << pred.iteration_ms << " simulated " << r.iteration_ms;
      if (mode != OptimizerSharding::None) {
        EXPECT_GT(pred.shard_gather_ms, 0) << what;
      }
    }
  }
}

}  // namespace
}  // namespace eth
