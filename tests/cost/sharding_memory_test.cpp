// The memory model under optimizer sharding (cost/sharding_memory.h): across the plan's devices
// the sharded optimizer state adds up to the model's state counted once (each element on one
// holder), where unsharded every holder pays for its whole blocks; each device pays exactly its
// shares; the all-gather is priced into the iteration; the memory-proportional planner choice
// gives the device with more free memory the larger share; spending the freed memory never
// makes a plan slower or overflow.
#include <gtest/gtest.h>

#include "cost/sharding_memory.h"
#include "model/arithmetic.h"
#include "plan/blocks.h"
#include "plan/sharding.h"
#include "profile/analytic.h"

namespace eth {
namespace {

StagePlan stage(const std::string& type, std::vector<std::int64_t> devices, std::int64_t first,
                std::int64_t last, RecomputeSet rc = {}) {
  StagePlan s;
  s.device_type = type;
  s.dp = static_cast<std::int64_t>(devices.size());
  s.devices = std::move(devices);
  s.first_unit = first;
  s.last_unit = last;
  s.recompute = rc;
  return s;
}

// gpt3-350m (units 0..25) on 2 A100 (devices 0, 1) + 2 RTX3090 (2, 3): pipeline A units 0-12 on
// both A100 at dp 2 (recomputing attention), 13-25 on RTX3090 2; pipeline B all units on 3.
ClusterSpec four_devices() {
  ClusterSpec c = load_cluster("13b-a100-rtx3090");
  c.nodes = {NodeSpec{"A100", 2}, NodeSpec{"RTX3090", 2}};
  return c;
}

struct Fixture {
  ModelSpec model = model_preset("gpt3-350m");
  ClusterSpec cluster = four_devices();
  ProfileDb db = analytic_profile_db(model, cluster, {1}, {1, 2}, model.seq_len);
  Plan plan;
  Fixture() {
    plan.model = model;
    plan.seq_len = model.seq_len;
    plan.gbs = 8;
    RecomputeSet attn;
    attn.add(RecomputeOp::AttnScore);
    attn.add(RecomputeOp::AttnSoftmax);
    plan.pipelines.push_back(
        PipelinePlan{2, 6, {stage("A100", {0, 1}, 0, 12, attn), stage("RTX3090", {2}, 13, 25)}});
    plan.pipelines.push_back(PipelinePlan{1, 2, {stage("RTX3090", {3}, 0, 25)}});
  }
};

TEST(ShardingMemory, ShardsAddUpToTheStateOnceAndEachDevicePaysItsShares) {
  Fixture f;
  const Prediction whole = predict(f.plan, f.cluster, f.db);
  const Plan sharded =
      shard_optimizer_state(f.plan, OptimizerSharding::Memory, f.cluster, f.db);
  const Prediction shard = predict(sharded, f.cluster, f.db);
  const double per = precision_bytes(shard.precision).optimizer_state;
  double total = 0, total_whole = 0;
  for (std::size_t i = 0; i < shard.devices.size(); ++i) {
    const DevicePrediction& d = shard.devices[i];
    EXPECT_DOUBLE_EQ(d.optimizer_state_bytes,
                     per * static_cast<double>(shard_elements(sharded, d.device)));
    total += d.optimizer_state_bytes;
    total_whole += whole.devices[i].optimizer_state_bytes;
    EXPECT_LT(d.peak_bytes, whole.devices[i].peak_bytes) << "device " << d.device;
  }
  EXPECT_NEAR(total, per * static_cast<double>(total_params(f.model)), 1.0);
  // Unsharded, every unit is held by 2 (pipeline A's dp 2 stage: 3) devices.
  EXPECT_GT(total_whole, 1.9 * total);
  EXPECT_GT(shard.shard_gather_ms, 0.0);
  EXPECT_NEAR(shard.iteration_ms,
              shard.pipeline_ms + shard.sync.exposed_ms + shard.optimizer_ms +
                  shard.shard_gather_ms,
              1e-9);
}

TEST(ShardingMemory, MoreFreeMemoryGetsTheLargerShare) {
  Fixture f;
  const Prediction whole = predict(f.plan, f.cluster, f.db);
  const std::map<std::int64_t, double> free = free_besides_optimizer(whole);
  const Plan sharded =
      shard_optimizer_state(f.plan, OptimizerSharding::Memory, f.cluster, f.db);
  for (const BlockShards& b : sharded.optimizer_shards) {
    for (std::size_t i = 0; i < b.holders.size(); ++i) {
      for (std::size_t j = 0; j < b.holders.size(); ++j) {
        if (free.at(b.holders[i]) > 1.01 * free.at(b.holders[j])) {
          EXPECT_GE(b.elements[i], b.elements[j]) << b.holders[i] << " vs " << b.holders[j];
        }
      }
    }
  }
  EXPECT_EQ(shard_optimizer_state(f.plan, OptimizerSharding::Memory, f.cluster, f.db), sharded);
}

// A holder steps only its shards: a one-device stage's optimizer time falls in the ratio its
// optimizer bytes do (the time from stage_costs' parameter count, the bytes from the shares).
TEST(ShardingMemory, OptimizerStepShrinksWithTheShard) {
  Fixture f;
  const Plan sharded = shard_optimizer_state(f.plan, OptimizerSharding::Even, f.cluster, f.db);
  const Prediction whole = predict(f.plan, f.cluster, f.db);
  const Prediction shard = predict(sharded, f.cluster, f.db);
  const auto costs_whole = compute_stage_costs(f.plan, f.cluster, f.db);
  const auto costs_shard = compute_stage_costs(sharded, f.cluster, f.db);
  int checked = 0;
  for (const DevicePrediction& d : shard.devices) {
    const auto p = static_cast<std::size_t>(d.pipeline), s = static_cast<std::size_t>(d.stage);
    if (f.plan.pipelines[p].stages[s].devices.size() != 1) continue;
    const double bytes_ratio =
        d.optimizer_state_bytes / whole.devices[static_cast<std::size_t>(d.device)].optimizer_state_bytes;
    EXPECT_NEAR(costs_shard[p].optimizer_ms[s] / costs_whole[p].optimizer_ms[s], bytes_ratio,
                1e-9) << "device " << d.device;
    EXPECT_LT(bytes_ratio, 0.75);
    ++checked;
  }
  EXPECT_EQ(checked, 2);
  EXPECT_LT(shard.optimizer_ms, whole.optimizer_ms);
}

TEST(ShardingMemory, SpendingTheFreedMemoryNeverSlowsOrOverflows) {
  Fixture f;
  const Plan sharded =
      shard_optimizer_state(f.plan, OptimizerSharding::Memory, f.cluster, f.db);
  std::vector<std::string> why;
  const Plan spent = use_freed_memory(sharded, f.cluster, f.db, &why);
  const Prediction a = predict(sharded, f.cluster, f.db), b = predict(spent, f.cluster, f.db);
  EXPECT_TRUE(b.fits);
  EXPECT_LE(b.iteration_ms, a.iteration_ms);
  EXPECT_EQ(why.empty(), spent == sharded);
}

}  // namespace
}  // namespace eth
