// Optimizer-state sharding across each gradient block's holders (issue 28): which elements of
// every block-wise gradient block (plan/blocks.h) each holder keeps the fp32 masters and Adam
// moments of. The shares are a plan choice recorded in the file (Plan::optimizer_shards): even,
// or in proportion to what each holder's memory leaves free (the planner computes the free
// bytes, cost/sharding_memory.h). Pure: no cost model and no runtime here.
//
// How to use:
//   plan = with_optimizer_sharding(plan, OptimizerSharding::Memory, free_bytes_by_device);
//   for (const PlanViolation& v : sharding_violations(plan)) ...   // validate_plan calls it
//   ShardRange r = shard_range(plan.optimizer_shards[b], device);    // the runtime's slice
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include "plan/plan.h"
#include "plan/validate.h"

namespace eth {

std::string_view optimizer_sharding_name(OptimizerSharding s);  // "none", "even", "memory"
std::optional<OptimizerSharding> parse_optimizer_sharding(std::string_view name);

// Elements [offset, offset + count) of a block's element order.
struct ShardRange {
  std::int64_t offset = 0;
  std::int64_t count = 0;
};
// The shard of `device` in `b`; ETH_CHECKs that it is a holder.
ShardRange shard_range(const BlockShards& b, std::int64_t device);

// Elements of the optimizer state `device` keeps: its shares of the blocks it holds, summed.
// ETH_CHECKs that the plan is sharded.
std::int64_t shard_elements(const Plan& plan, std::int64_t device);
// The largest share of any block `device` holds (the reduce-scatter's receive buffer).
std::int64_t largest_shard_of_groups(const Plan& plan, std::int64_t device);

// Even: each block's elements split into near-equal parts, the first `elements % n` holders one
// element more.
std::vector<BlockShards> even_shards(const Plan& plan);
// Proportional: holder h of a block gets elements in proportion to weight[h] (its free bytes;
// missing or non-positive weights count as 0; a block whose holders all weigh 0 is split
// evenly). Floors first, then the remaining elements one each to the largest fractional parts,
// ties to the lower device id: the same inputs give the same shares on every machine.
std::vector<BlockShards> proportional_shards(const Plan& plan,
                                             const std::map<std::int64_t, double>& weight);

// The plan with `mode` and its shares (even or proportional to `weight`; none clears them).
Plan with_optimizer_sharding(Plan plan, OptimizerSharding mode,
                             const std::map<std::int64_t, double>& weight = {});

// The rules of the sharding fields, with their JSON paths: none carries no shares; otherwise one
// entry per block-wise block in the global order, listing exactly that block's holders, one
// non-negative share per holder, the shares summing to the block's elements. Call only on a plan
// whose pipelines each cover every unit once (validate_plan does, after its other rules pass).
std::vector<PlanViolation> sharding_violations(const Plan& plan);

}  // namespace eth
