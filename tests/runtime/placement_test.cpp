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

TEST(Placement, RefusesTensorParallelismClearly) {
  Plan plan = test::make_plan(test::small3(), 8, {{2, 6, {{0, 1}, {2, 4}}}});
  plan.pipelines[0].stages[1].tp = 2;
  plan.pipelines[0].stages[1].devices = {1, 2};
  const std::string e = error_of([&] { check_runnable(plan, test::cpu_cluster(4), 3, "p.json"); });
  EXPECT_NE(e.find("pipelines[0].stages[1].tp: tensor parallelism (tp 2) is not supported"),
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
