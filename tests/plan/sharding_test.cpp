// Optimizer-sharding shares (plan/sharding.h): even and memory-proportional splits derived by
// hand, the file round trip, and every rule of the shares rejected by field.
#include <gtest/gtest.h>

#include <numeric>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "plan/blocks.h"
#include "plan/sharding.h"
#include "plan/validate.h"

namespace eth {
namespace {

ModelSpec small() { return ModelSpec{"small3", 3, 16, 2, 8, 32, 48}; }  // units 0..4

StagePlan stage(std::vector<std::int64_t> devices, std::int64_t first, std::int64_t last) {
  StagePlan s;
  s.device_type = "cpu";
  s.dp = static_cast<std::int64_t>(devices.size());
  s.devices = std::move(devices);
  s.first_unit = first;
  s.last_unit = last;
  return s;
}

// Pipeline A: units 0-1 at dp 2 on devices 0 and 1, units 2-4 on 2; pipeline B: units 0-2 on 3,
// 3-4 on 4. Blocks (descending units): 3-4 {2, 4}, 2 {2, 3}, 0-1 {0, 1, 3}.
Plan two_pipelines() {
  Plan p;
  p.model = small();
  p.model_is_preset = false;
  p.seq_len = 8;
  p.gbs = 8;
  p.pipelines.push_back(PipelinePlan{2, 6, {stage({0, 1}, 0, 1), stage({2}, 2, 4)}});
  p.pipelines.push_back(PipelinePlan{1, 2, {stage({3}, 0, 2), stage({4}, 3, 4)}});
  return p;
}

ClusterSpec cluster() {
  ClusterSpec c;
  c.nodes.push_back(NodeSpec{"cpu", 5});
  c.device_types.emplace("cpu", *find_device_type_preset("cpu"));
  return c;
}

TEST(Sharding, EvenSplitsEachBlockWithTheRemainderOnTheFirstHolders) {
  const Plan p = two_pipelines();
  const std::vector<GradBlock> blocks = aggregation_collectives(p, AggregationMode::Block);
  const std::vector<BlockShards> s = even_shards(p);
  ASSERT_EQ(s.size(), blocks.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    EXPECT_EQ(s[i].holders, blocks[i].holders);
    const auto n = static_cast<std::int64_t>(blocks[i].holders.size());
    for (std::size_t k = 0; k < s[i].elements.size(); ++k) {
      const std::int64_t want = blocks[i].elements / n +
                                (static_cast<std::int64_t>(k) < blocks[i].elements % n ? 1 : 0);
      EXPECT_EQ(s[i].elements[k], want) << "block " << i << " holder " << k;
    }
  }
}

TEST(Sharding, MemoryProportionalSharesFollowTheWeightsAndSumToTheBlock) {
  const Plan p = two_pipelines();
  const std::vector<GradBlock> blocks = aggregation_collectives(p, AggregationMode::Block);
  const std::map<std::int64_t, double> w{{0, 3e9}, {1, 1e9}, {2, 5e9}, {3, 2e9}, {4, 1e9}};
  const std::vector<BlockShards> s = proportional_shards(p, w);
  ASSERT_EQ(s.size(), blocks.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    double total_w = 0;
    for (std::int64_t h : blocks[i].holders) total_w += w.at(h);
    std::int64_t sum = 0;
    for (std::size_t k = 0; k < s[i].elements.size(); ++k) {
      const double exact =
          static_cast<double>(blocks[i].elements) * w.at(blocks[i].holders[k]) / total_w;
      EXPECT_LT(std::abs(static_cast<double>(s[i].elements[k]) - exact), 1.0);
      sum += s[i].elements[k];
    }
    EXPECT_EQ(sum, blocks[i].elements);
  }
  // The same inputs give the same shares; weights 0 everywhere fall back to even.
  EXPECT_EQ(proportional_shards(p, w), s);
  EXPECT_EQ(proportional_shards(p, {}), even_shards(p));
}

TEST(Sharding, ShardRangesTileTheBlockInHolderOrder) {
  const BlockShards b{{2, 5, 9}, {4, 0, 7}};
  EXPECT_EQ(shard_range(b, 2).offset, 0);
  EXPECT_EQ(shard_range(b, 2).count, 4);
  EXPECT_EQ(shard_range(b, 5).offset, 4);
  EXPECT_EQ(shard_range(b, 5).count, 0);
  EXPECT_EQ(shard_range(b, 9).offset, 4);
  EXPECT_EQ(shard_range(b, 9).count, 7);
}

TEST(Sharding, PlanFileRoundTripsAndAbsentMeansNone) {
  const Plan none = two_pipelines();
  const Json j0 = plan_to_json(none);
  EXPECT_FALSE(j0.contains("optimizer_sharding"));
  EXPECT_FALSE(j0.contains("optimizer_shards"));
  const Plan memory = with_optimizer_sharding(none, OptimizerSharding::Memory,
                                              {{0, 3}, {1, 1}, {2, 5}, {3, 2}, {4, 1}});
  const Json j = plan_to_json(memory);
  EXPECT_EQ(j["optimizer_sharding"], "memory");
  const Plan back = parse_plan(JsonCursor(j, JsonOrigin{"plan", "mem.json", ""}));
  EXPECT_EQ(back.optimizer_sharding, OptimizerSharding::Memory);
  EXPECT_EQ(back.optimizer_shards, memory.optimizer_shards);
  EXPECT_TRUE(validate_plan(back, cluster()).empty());
  EXPECT_TRUE(validate_plan(none, cluster()).empty());
}

// The first violation's path, or "" when valid.
std::string first_path(const Plan& p) {
  const auto v = validate_plan(p, cluster());
  return v.empty() ? "" : v.front().path;
}

TEST(Sharding, EveryRuleOfTheSharesIsRejectedByField) {
  const Plan good = with_optimizer_sharding(two_pipelines(), OptimizerSharding::Even);
  ASSERT_EQ(first_path(good), "");
  Plan p = good;
  p.optimizer_shards.pop_back();
  EXPECT_EQ(first_path(p), "optimizer_shards");
  p = good;
  p.optimizer_shards[2].holders = {0, 1};  // device 3 of pipeline B left out
  EXPECT_EQ(first_path(p), "optimizer_shards[2].holders");
  p = good;
  p.optimizer_shards[1].elements.push_back(0);
  EXPECT_EQ(first_path(p), "optimizer_shards[1].elements");
  p = good;
  p.optimizer_shards[0].elements[0] += 1;  // no longer sums to the block
  EXPECT_EQ(first_path(p), "optimizer_shards[0].elements");
  const auto v = validate_plan(p, cluster());
  ASSERT_FALSE(v.empty());
  EXPECT_NE(v.front().message.find("sum to"), std::string::npos) << v.front().message;
  p = good;
  p.optimizer_sharding = OptimizerSharding::None;  // shares without sharding
  EXPECT_EQ(first_path(p), "optimizer_shards");
  // The file form: an unknown mode names the field.
  Json j = plan_to_json(good);
  j["optimizer_sharding"] = "zero3";
  try {
    parse_plan(JsonCursor(j, JsonOrigin{"plan", "bad.json", ""}));
    FAIL() << "accepted optimizer_sharding \"zero3\"";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer_sharding"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace eth
