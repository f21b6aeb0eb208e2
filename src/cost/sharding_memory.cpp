// Sharded optimizer state in the memory model. See sharding_memory.h.
#include "cost/sharding_memory.h"

#include <algorithm>

#include "core/error.h"
#include "plan/sharding.h"

namespace eth {

std::map<std::int64_t, double> free_besides_optimizer(const Prediction& p) {
  std::map<std::int64_t, double> out;
  for (const DevicePrediction& d : p.devices) {
    out[d.device] = d.capacity_bytes - (d.peak_bytes - d.optimizer_state_bytes);
  }
  return out;
}

Plan shard_optimizer_state(const Plan& plan, OptimizerSharding mode, const ClusterSpec& cluster,
                           const ProfileDb& profile, const PredictOptions& options) {
  if (mode != OptimizerSharding::Memory) return with_optimizer_sharding(plan, mode);
  const Plan unsharded = with_optimizer_sharding(plan, OptimizerSharding::None);
  PredictOptions o = options;
  o.all_modes = false;
  return with_optimizer_sharding(plan, mode,
                                 free_besides_optimizer(predict(unsharded, cluster, profile, o)));
}

namespace {

std::string recompute_text(const RecomputeSet& r) {
  if (r.empty()) return "-";
  std::string out;
  for (const std::string& n : r.names()) out += (out.empty() ? "" : "+") + n;
  return out;
}

// Smaller recompute sets to try for `r`, most freed first: none, then r less one operator.
std::vector<RecomputeSet> smaller_sets(const RecomputeSet& r) {
  std::vector<RecomputeSet> out;
  if (r.empty()) return out;
  out.push_back(RecomputeSet{});
  const std::vector<RecomputeOp> ops = r.ops();
  if (ops.size() < 2) return out;
  for (std::size_t skip = 0; skip < ops.size(); ++skip) {
    RecomputeSet s;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (i != skip) s.add(ops[i]);
    }
    out.push_back(s);
  }
  return out;
}

}  // namespace

Plan use_freed_memory(const Plan& plan, const ClusterSpec& cluster, const ProfileDb& profile,
                      std::vector<std::string>* changes, std::int64_t max_micro_batch) {
  Plan best = plan;
  double best_ms = predict(best, cluster, profile).iteration_ms;
  for (bool improved = true; improved;) {
    improved = false;
    for (std::size_t p = 0; p < best.pipelines.size(); ++p) {
      // A larger micro-batch (twice, within the local batch; dp <= micro-batch still holds).
      const std::int64_t mbs = best.pipelines[p].micro_batch_size;
      if (2 * mbs <= best.pipelines[p].local_batch &&
          (max_micro_batch <= 0 || 2 * mbs <= max_micro_batch)) {
        Plan trial = best;
        trial.pipelines[p].micro_batch_size = 2 * mbs;
        const Prediction pr = predict(trial, cluster, profile);
        if (pr.fits && pr.iteration_ms < best_ms) {
          best = std::move(trial);
          best_ms = pr.iteration_ms;
          improved = true;
          if (changes) {
            changes->push_back("pipelines[" + std::to_string(p) + "].micro_batch_size: " +
                               std::to_string(mbs) + " -> " + std::to_string(2 * mbs));
          }
        }
      }
    }
    for (std::size_t p = 0; p < best.pipelines.size(); ++p) {
      for (std::size_t s = 0; s < best.pipelines[p].stages.size(); ++s) {
        const RecomputeSet was = best.pipelines[p].stages[s].recompute;
        for (const RecomputeSet& smaller : smaller_sets(was)) {
          Plan trial = best;
          trial.pipelines[p].stages[s].recompute = smaller;
          const Prediction pr = predict(trial, cluster, profile);
          if (!pr.fits || pr.iteration_ms >= best_ms) continue;
          best = std::move(trial);
          best_ms = pr.iteration_ms;
          improved = true;
          if (changes) {
            changes->push_back("pipelines[" + std::to_string(p) + "].stages[" +
                               std::to_string(s) + "].recompute: " + recompute_text(was) +
                               " -> " + recompute_text(smaller));
          }
          break;
        }
      }
    }
  }
  return best;
}

double shard_state_bytes(Precision precision, double elements) {
  return precision_bytes(precision).optimizer_state * elements;
}

double shard_receive_buffer_bytes(double elements) { return 4.0 * elements; }

double even_share_bound(double elements, std::int64_t holders, double blocks) {
  ETH_CHECK(holders >= 1, "even_share_bound: a block has at least one holder");
  return elements / static_cast<double>(holders) + blocks;
}

double sharded_optimizer_bytes(const Plan& plan, std::int64_t device, Precision precision) {
  return shard_state_bytes(precision, static_cast<double>(shard_elements(plan, device)));
}

double shard_buffer_bytes(const Plan& plan, std::int64_t device, AggregationMode mode) {
  if (mode != AggregationMode::Block) return 0;
  return shard_receive_buffer_bytes(static_cast<double>(largest_shard_of_groups(plan, device)));
}

double shard_gather_ms(const Plan& plan, const ClusterIndex& cluster, Precision precision,
                       const PredictOptions& options) {
  std::map<std::int64_t, double> busy;
  for (const BlockShards& b : plan.optimizer_shards) {
    if (b.holders.size() < 2) continue;
    const double ms = shard_gather_block_ms(b, cluster, precision, options.collective_latency_ms);
    for (std::int64_t h : b.holders) busy[h] += ms;
  }
  double worst = 0;
  for (const auto& [device, ms] : busy) worst = std::max(worst, ms);
  return worst;
}

double shard_gather_block_ms(const BlockShards& b, const ClusterIndex& cluster,
                             Precision precision, double collective_latency_ms) {
  if (b.holders.size() < 2) return 0;
  double elements = 0;
  for (std::int64_t e : b.elements) elements += static_cast<double>(e);
  // A ring all-reduce moves 2(n-1)/n of the bytes; the all-gather half of that.
  const double bytes = elements * precision_bytes(precision).weights;
  return 0.5 * ring_allreduce_ms(cluster, b.holders, bytes, 0.0) + collective_latency_ms;
}

double gradient_ring_share(const Plan& plan, AggregationMode mode) {
  return plan.optimizer_sharding != OptimizerSharding::None && mode == AggregationMode::Block
             ? 0.5
             : 1.0;
}

MemoryBreakdown device_memory(const Prediction&, const MemoryBreakdown& stage,
                              const DevicePrediction& d) {
  MemoryBreakdown m = stage;
  m.optimizer_state = d.optimizer_state_bytes;
  m.collective_buffers = d.collective_buffer_bytes + d.shard_buffer_bytes;
  return m;
}

MemoryBreakdown device_memory(const Prediction& p, std::int64_t device) {
  for (const DevicePrediction& d : p.devices) {
    if (d.device != device) continue;
    return device_memory(p, p.pipelines[static_cast<std::size_t>(d.pipeline)]
                                .stages[static_cast<std::size_t>(d.stage)]
                                .memory,
                         d);
  }
  ETH_CHECK(false, "device_memory: device " + std::to_string(device) + " is not in the plan");
  return {};
}

}  // namespace eth
