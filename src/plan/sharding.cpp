// Shares of the optimizer state per gradient block and their rules. See sharding.h.
#include "plan/sharding.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "core/error.h"
#include "plan/blocks.h"

namespace eth {

namespace {

std::string list_text(const std::vector<std::int64_t>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

std::vector<std::int64_t> split_even(std::int64_t n, std::size_t parts) {
  const auto k = static_cast<std::int64_t>(parts);
  std::vector<std::int64_t> out(parts, n / k);
  for (std::int64_t i = 0; i < n % k; ++i) out[static_cast<std::size_t>(i)] += 1;
  return out;
}

}  // namespace

std::string_view optimizer_sharding_name(OptimizerSharding s) {
  switch (s) {
    case OptimizerSharding::None: return "none";
    case OptimizerSharding::Even: return "even";
    case OptimizerSharding::Memory: return "memory";
  }
  return "none";
}

std::optional<OptimizerSharding> parse_optimizer_sharding(std::string_view name) {
  if (name == "none") return OptimizerSharding::None;
  if (name == "even") return OptimizerSharding::Even;
  if (name == "memory") return OptimizerSharding::Memory;
  return std::nullopt;
}

ShardRange shard_range(const BlockShards& b, std::int64_t device) {
  std::int64_t at = 0;
  for (std::size_t i = 0; i < b.holders.size(); ++i) {
    if (b.holders[i] == device) return ShardRange{at, b.elements[i]};
    at += b.elements[i];
  }
  ETH_CHECK(false, "shard_range: device " + std::to_string(device) + " holds no shard");
  return {};
}

std::int64_t shard_elements(const Plan& plan, std::int64_t device) {
  ETH_CHECK(plan.optimizer_sharding != OptimizerSharding::None, "shard_elements: not sharded");
  std::int64_t n = 0;
  for (const BlockShards& b : plan.optimizer_shards) {
    if (std::binary_search(b.holders.begin(), b.holders.end(), device)) {
      n += shard_range(b, device).count;
    }
  }
  return n;
}

std::int64_t largest_shard_of_groups(const Plan& plan, std::int64_t device) {
  std::int64_t n = 0;
  for (const BlockShards& b : plan.optimizer_shards) {
    if (b.holders.size() < 2) continue;
    if (!std::binary_search(b.holders.begin(), b.holders.end(), device)) continue;
    for (std::int64_t e : b.elements) n = std::max(n, e);
  }
  return n;
}

std::vector<BlockShards> even_shards(const Plan& plan) {
  std::vector<BlockShards> out;
  for (const GradBlock& b : aggregation_collectives(plan, AggregationMode::Block)) {
    out.push_back(BlockShards{b.holders, split_even(b.elements, b.holders.size())});
  }
  return out;
}

std::vector<BlockShards> proportional_shards(const Plan& plan,
                                             const std::map<std::int64_t, double>& weight) {
  std::vector<BlockShards> out;
  for (const GradBlock& b : aggregation_collectives(plan, AggregationMode::Block)) {
    const std::size_t n = b.holders.size();
    std::vector<double> w(n, 0.0);
    for (std::size_t i = 0; i < n; ++i) {
      auto it = weight.find(b.holders[i]);
      if (it != weight.end() && std::isfinite(it->second) && it->second > 0) w[i] = it->second;
    }
    const double total = std::accumulate(w.begin(), w.end(), 0.0);
    if (!(total > 0)) {
      out.push_back(BlockShards{b.holders, split_even(b.elements, n)});
      continue;
    }
    std::vector<std::int64_t> share(n);
    std::vector<double> frac(n);
    std::int64_t given = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const double exact = static_cast<double>(b.elements) * (w[i] / total);
      share[i] = std::min(b.elements, static_cast<std::int64_t>(std::floor(exact)));
      frac[i] = exact - static_cast<double>(share[i]);
      given += share[i];
    }
    // Rounding can leave a few elements over (never under: floors of parts of the whole).
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t c) { return frac[a] > frac[c]; });
    for (std::size_t k = 0; given < b.elements; k = (k + 1) % n, ++given) share[order[k]] += 1;
    while (given > b.elements) {  // floating excess (at most a few): take from the largest
      const auto big = static_cast<std::size_t>(
          std::max_element(share.begin(), share.end()) - share.begin());
      share[big] -= 1;
      --given;
    }
    out.push_back(BlockShards{b.holders, std::move(share)});
  }
  return out;
}

Plan with_optimizer_sharding(Plan plan, OptimizerSharding mode,
                             const std::map<std::int64_t, double>& weight) {
  plan.optimizer_sharding = mode;
  plan.optimizer_shards.clear();
  if (mode == OptimizerSharding::Even) plan.optimizer_shards = even_shards(plan);
  if (mode == OptimizerSharding::Memory) plan.optimizer_shards = proportional_shards(plan, weight);
  return plan;
}

std::vector<PlanViolation> sharding_violations(const Plan& plan) {
  std::vector<PlanViolation> out;
  if (plan.optimizer_sharding == OptimizerSharding::None) {
    if (!plan.optimizer_shards.empty()) {
      out.push_back({"optimizer_shards",
                     "shares given, but optimizer_sharding is none (absent); expected no "
                     "optimizer_shards, or optimizer_sharding \"even\" or \"memory\""});
    }
    return out;
  }
  const std::vector<GradBlock> blocks = aggregation_collectives(plan, AggregationMode::Block);
  if (plan.optimizer_shards.size() != blocks.size()) {
    out.push_back({"optimizer_shards",
                   "expected " + std::to_string(blocks.size()) +
                       " entries (one per gradient block of the plan, in the block-wise order), "
                       "got " + std::to_string(plan.optimizer_shards.size()) +
                       "; `eth plan --optimizer-sharding` writes them"});
    return out;
  }
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const GradBlock& b = blocks[i];
    const BlockShards& s = plan.optimizer_shards[i];
    const std::string path = "optimizer_shards[" + std::to_string(i) + "]";
    if (s.holders != b.holders) {
      out.push_back({path + ".holders",
                     "expected the holders of gradient block " + std::to_string(i) + " (units " +
                         std::to_string(b.lowest_unit()) + ".." +
                         std::to_string(b.highest_unit()) + "), " + list_text(b.holders) +
                         ", got " + list_text(s.holders)});
      continue;
    }
    if (s.elements.size() != s.holders.size()) {
      out.push_back({path + ".elements",
                     "expected one share per holder (" + std::to_string(s.holders.size()) +
                         "), got " + std::to_string(s.elements.size())});
      continue;
    }
    const std::int64_t sum = std::accumulate(s.elements.begin(), s.elements.end(),
                                             std::int64_t{0});
    if (sum != b.elements) {
      out.push_back({path + ".elements",
                     "the shares " + list_text(s.elements) + " sum to " + std::to_string(sum) +
                         "; expected the block's " + std::to_string(b.elements) + " elements"});
    }
  }
  return out;
}

}  // namespace eth
