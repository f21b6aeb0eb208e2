// `eth plan` and `eth compare` as a user runs them: exit codes, the plan file, the JSON fields.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/json_file.h"
#include "eth_run.h"
#include "plan/plan.h"

namespace eth::cmd_plan_test {
namespace {

TEST(PlanCli, JsonPlanFileAndPrediction) {
  const auto dir = std::filesystem::temp_directory_path() / "eth_plan_cli_test";
  std::filesystem::create_directories(dir);
  const auto out = (dir / "plan.json").string();
  const test::EthRun r = test::eth_cli(
      "plan --cluster 350m-a100-rtx3090 --model gpt3-350m --gbs 61 --tp 1,2 "
      "--micro-batch-sizes 1,2,4 --format json --out " +
      out);
  ASSERT_EQ(r.code, 0) << r.out_and_err();
  const Json j = Json::parse(r.out);
  EXPECT_GT(j.at("predicted").at("iteration_ms").get<double>(), 0.0);
  EXPECT_GT(j.at("predicted").at("ideal_iteration_ms").get<double>(), 0.0);
  EXPECT_TRUE(j.at("search").contains("seconds"));
  for (const char* k : {"generated", "evaluated", "skipped", "cache_hits"}) {
    EXPECT_TRUE(j.at("search").contains(k)) << k;
  }
  EXPECT_TRUE(j.at("pipelines")[0].at("stages")[0].at("predicted").contains("peak_memory_bytes"));
  // The file written is the same plan and loads back.
  const Plan p = load_plan(out);
  EXPECT_EQ(p.gbs, 61);
  std::int64_t total = 0;
  for (const auto& pipe : p.pipelines) total += pipe.local_batch;
  EXPECT_EQ(total, 61);
  std::filesystem::remove_all(dir);
}

TEST(PlanCli, TextOutputAndCompare) {
  const test::EthRun r =
      test::eth_cli("plan --cluster 350m-910b2-910b4 --model gpt3-350m --gbs 64 --tp 1,2");
  ASSERT_EQ(r.code, 0) << r.out_and_err();
  EXPECT_NE(r.out_and_err().find("predicted iteration"), std::string::npos);
  EXPECT_NE(r.out_and_err().find("ideal bound"), std::string::npos);
  EXPECT_NE(r.out_and_err().find("search:"), std::string::npos);
  const test::EthRun c =
      test::eth_cli("compare --cluster 350m-910b2-910b4 --model gpt3-350m --gbs 64 --tp 1,2");
  ASSERT_EQ(c.code, 0) << c.out_and_err();
  for (const char* m : {"eth", "layer", "uniform", "eth speedup"}) {
    EXPECT_NE(c.out_and_err().find(m), std::string::npos) << m;
  }
}

// --optimizer-sharding reaches the search: the plan written carries its shares (validated on
// load) and what the freed memory bought.
TEST(PlanCli, OptimizerShardingWritesAShardedPlan) {
  const auto dir = std::filesystem::temp_directory_path() / "eth_plan_cli_sharding_test";
  std::filesystem::create_directories(dir);
  const auto out = (dir / "plan.json").string();
  const test::EthRun r =
      test::eth_cli("plan --cluster 350m-910b2-910b4 --model gpt3-350m --gbs 16 --tp 1 "
                    "--optimizer-sharding memory --format json --out " + out);
  ASSERT_EQ(r.code, 0) << r.out_and_err();
  const Json j = Json::parse(r.out);
  EXPECT_TRUE(j.at("predicted").contains("freed_memory_spent_on"));
  const Plan p = load_plan(out);
  EXPECT_NE(p.optimizer_sharding, OptimizerSharding::None);
  EXPECT_FALSE(p.optimizer_shards.empty());
  EXPECT_EQ(j.at("predicted").at("optimizer_sharding").get<std::string>(),
            p.optimizer_sharding == OptimizerSharding::Even ? "even" : "memory");
  std::filesystem::remove_all(dir);
}

TEST(PlanCli, BadInputExitCodes) {
  // A bad command line is exit 1 (docs/exit-codes.md), bad input exit 2.
  EXPECT_EQ(
      test::eth_cli("plan --cluster 350m-910b2-910b4 --model gpt3-350m --gbs 8 --method fast").code,
      1);
  // A 70B model on four devices cannot fit: exit 2 with the overflowing device named.
  const test::EthRun r =
      test::eth_cli("plan --cluster 350m-910b2-910b4 --model gpt3-70b --gbs 8 --tp 1,2");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out_and_err().find("overflows stage"), std::string::npos) << r.out_and_err();
  EXPECT_EQ(test::eth_cli("plan --model gpt3-350m --gbs 8").code, 1);  // no cluster: a usage error
}

}  // namespace
}  // namespace eth::cmd_plan_test
