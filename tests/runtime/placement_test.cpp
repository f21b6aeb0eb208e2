// Rank coordinates, dp chunks and the refusals a plan gets before any compute.
#include "runtime/placement.h"

#include <gtest/gtest.h>

#include <set>

#include "runtime_test_util.h"
#include "test_util.h"

namespace eth {
namespace {

using test::error_of;

TEST(Placement, EveryRankGetsItsOwnDeviceAndCoordinates) {
  const Plan plan = test::make_plan(test::small3(), 8,
                                    {{2, 4, {{0, 1, 2}, {2, 4, 1}}}, {3, 5, {{0, 2, 1}, {3, 4, 3}}}});
  const std::vector<RankPlace> places = place_ranks(plan);
  ASSERT_EQ(places.size(), 7u);
  for (std::size_t r = 0; r < places.size(); ++r) {
    const RankPlace& p = places[r];
    EXPECT_EQ(p.device, plan.device_ids()[r]);
    const StagePlan& st = plan.pipelines[static_cast<std::size_t>(p.pipeline)]
                              .stages[static_cast<std::size_t>(p.stage)];
    EXPECT_EQ(stage_device(st, p.dp_rank, p.tp_rank), p.device);
    EXPECT_EQ(rank_of_device(plan, p.device), static_cast<int>(r));
  }
  EXPECT_EQ(places[5].pipeline, 1);
  EXPECT_EQ(places[5].stage, 1);
  EXPECT_EQ(places[5].dp_rank, 1);
}

TEST(Placement, DpChunksTileEveryMicroBatch) {
  for (std::int64_t b = 1; b <= 9; ++b) {
    for (std::int64_t dp = 1; dp <= 4; ++dp) {
      std::int64_t next = 0;
      for (std::int64_t r = 0; r < dp; ++r) {
        const Chunk c = dp_chunk(b, dp, r);
        EXPECT_EQ(c.begin, next);
        EXPECT_GE(c.size, b / dp);
        EXPECT_LE(c.size, (b + dp - 1) / dp);
        next = c.end();
      }
      EXPECT_EQ(next, b);
    }
  }
  EXPECT_EQ(overlap({0, 3}, {2, 4}).begin, 2);
  EXPECT_EQ(overlap({0, 3}, {2, 4}).size, 1);
  EXPECT_EQ(overlap({0, 2}, {2, 4}).size, 0);
}

TEST(Placement, RunnablePlanPasses) {
  const Plan plan = test::make_plan(test::small3(), 8, {{2, 6, {{0, 1}, {2, 4}}}, {1, 2, {{0, 0}, {1, 2}, {3, 4}}}});
  EXPECT_NO_THROW(check_runnable(plan, test::cpu_cluster(5), 5, "plan.json", 8));
}

TEST(Placement, RefusesTheWrongRankCount) {
  const Plan plan = test::make_plan(test::small3(), 8, {{2, 6, {{0, 1}, {2, 4}}}});
  EXPECT_EQ(error_of([&] { check_runnable(plan, test::cpu_cluster(4), 3, "plan.json"); }),
            "[plan] plan.json: pipelines: the plan has 2 devices but the run has 3 ranks; start "
            "one rank per device (eth launch does)");
}

TEST(Placement, RefusesDevicesOutsideTheClusterAndUncoveredUnits) {
  Plan plan = test::make_plan(test::small3(), 8, {{2, 6, {{0, 1}, {2, 3}}}});
  plan.pipelines[0].stages[1].devices = {7};
  const std::string e = error_of([&] { check_runnable(plan, test::cpu_cluster(4), 2, "p.json"); });
  EXPECT_NE(e.find("device 7"), std::string::npos) << e;
  EXPECT_NE(e.find("unit 4"), std::string::npos) << e;
}

TEST(Placement, TensorParallelPlansRunAndEveryTpRankHasItsCoordinates) {
  const Plan plan =
      test::make_plan(test::small3(), 8, {{2, 6, {{0, 1, 1, {}, 2}, {2, 4, 2, {}, 2}}}});
  EXPECT_NO_THROW(check_runnable(plan, test::cpu_cluster(6), 6, "p.json", 6));
  const std::vector<RankPlace> places = place_ranks(plan);
  ASSERT_EQ(places.size(), 6u);
  // Stage 1 holds devices 2..5 as dp groups of tp consecutive ids: (dp 0: 2, 3), (dp 1: 4, 5).
  EXPECT_EQ(places[4].stage, 1);
  EXPECT_EQ(places[4].dp_rank, 1);
  EXPECT_EQ(places[4].tp_rank, 0);
  EXPECT_EQ(places[3].dp_rank, 0);
  EXPECT_EQ(places[3].tp_rank, 1);
}

// Two nodes of 4 cpu devices, or one of each type.
ClusterSpec two_nodes(const std::string& second_type) {
  ClusterSpec c = test::cpu_cluster(4);
  c.nodes.push_back(NodeSpec{second_type, 4});
  c.device_types.emplace(second_type, *find_device_type_preset(second_type));
  return c;
}

TEST(Placement, RefusesTpThatDoesNotDivideHeadsOrFfn) {
  // small3 has 2 heads (tp 4 does not divide them) and ffn 48; then 4 heads and ffn 50.
  Plan plan = test::make_plan(test::small3(), 8, {{2, 6, {{0, 4, 1, {}, 4}}}});
  EXPECT_EQ(error_of([&] { check_runnable(plan, test::cpu_cluster(4), 4, "p.json"); }),
            "[plan] p.json: pipelines[0].stages[0].tp: expected a divisor of the model's heads "
            "(2), got 4");
  plan.model.heads = 4;
  plan.model.ffn = 50;
  EXPECT_EQ(error_of([&] { check_runnable(plan, test::cpu_cluster(4), 4, "p.json"); }),
            "[plan] p.json: pipelines[0].stages[0].tp: expected a divisor of the model's ffn size "
            "(50), got 4");
}

TEST(Placement, RefusesATpGroupSpreadOverTwoNodes) {
  // A stage may span nodes with its dp replicas (span_nodes), never with a tp group: devices
  // 2, 3 | 4, 5 are two tp groups split across nodes 0 (0..3) and 1 (4..7).
  Plan plan = test::make_plan(test::small3(), 8, {{2, 2, {{0, 4, 1, {}, 2}}}});
  plan.pipelines[0].stages[0].devices = {3, 4};
  plan.pipelines[0].stages[0].span_nodes = true;
  ClusterSpec cluster = two_nodes("cpu");
  const std::string e = error_of([&] { check_runnable(plan, cluster, 2, "p.json"); });
  EXPECT_EQ(e.rfind("[plan] p.json: pipelines[0].stages[0].devices[1]: device 4 is on node 1 but "
                    "its tp group (dp replica 0, devices 3..4) starts on node 0",
                    0),
            0u)
      << e;
  // dp replicas on two nodes, each tp group inside one: runnable.
  plan.pipelines[0].stages[0].dp = 2;
  plan.pipelines[0].stages[0].devices = {2, 3, 4, 5};
  plan.pipelines[0].micro_batch_size = 2;
  plan.pipelines[0].local_batch = 2;
  EXPECT_NO_THROW(check_runnable(plan, cluster, 4, "p.json"));
}

TEST(Placement, RefusesATpGroupOfMixedDeviceTypes) {
  Plan plan = test::make_plan(test::small3(), 8, {{2, 2, {{0, 4, 1, {}, 2}}}});
  plan.pipelines[0].stages[0].devices = {3, 4};
  plan.pipelines[0].stages[0].span_nodes = true;
  const std::string e =
      error_of([&] { check_runnable(plan, two_nodes("cpu-slow"), 2, "p.json"); });
  EXPECT_NE(e.find("pipelines[0].stages[0].devices[1]: device 4 (node 1) has type cpu-slow, but "
                   "the stage's device_type is cpu"),
            std::string::npos)
      << e;
}

TEST(Placement, RefusesAnotherGlobalBatch) {
  const Plan plan = test::make_plan(test::small3(), 8, {{2, 6, {{0, 4}}}});
  EXPECT_NE(error_of([&] { check_runnable(plan, test::cpu_cluster(1), 1, "p.json", 12); })
                .find("gbs: the plan splits a global batch of 6 but the run asks for 12"),
            std::string::npos);
}

}  // namespace
}  // namespace eth
