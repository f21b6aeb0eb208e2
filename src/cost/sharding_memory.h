// What optimizer-state sharding (plan/sharding.h) changes in the memory model, and the planner's
// memory-proportional choice of shares: each holder's weight is what its device's memory leaves
// free after everything else the predictor charges it (weights, gradients, activations, buffers,
// the process baseline), so a 32 GB device beside a 64 GB one keeps less of a block's state.
// Pure (no runtime): the predictor and `eth plan --optimizer-sharding` call it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cluster/cluster_spec.h"
#include "cost/predictor.h"
#include "plan/plan.h"
#include "profile/profile.h"

namespace eth {

// Per device of `p` (a prediction of an unsharded or sharded plan): its memory capacity minus
// its predicted peak without the optimizer state (may be negative when even that does not fit).
std::map<std::int64_t, double> free_besides_optimizer(const Prediction& p);

// `plan` with optimizer sharding `mode` and its shares: even, or memory-proportional to
// free_besides_optimizer of the unsharded plan's prediction (deterministic: the same inputs give
// the same shares). None clears them.
Plan shard_optimizer_state(const Plan& plan, OptimizerSharding mode, const ClusterSpec& cluster,
                           const ProfileDb& profile, const PredictOptions& options = {});

// What the memory sharding frees, spent: starting from `plan` (sharded), each pipeline tries
// twice its micro-batch (within its local batch), and each stage in turn a smaller recompute set (none, then each set with one operator fewer, lowest bits
// first), keeping the first that still fits every device and lowers the predicted iteration;
// repeated until nothing improves. Deterministic. `changes` (if given) receives one line per
// accepted change ("pipelines[0].micro_batch_size: 1 -> 2",
// "pipelines[0].stages[1].recompute: attn_score+mlp_act -> -"). `max_micro_batch` (> 0): no
// micro-batch above it (the planner's largest candidate size).
Plan use_freed_memory(const Plan& plan, const ClusterSpec& cluster, const ProfileDb& profile,
                      std::vector<std::string>* changes = nullptr,
                      std::int64_t max_micro_batch = 0);

// A sharded device's charges (bytes): its shards' optimizer state (masters where separate, both
// moments), and the reduce-scatter's receive buffer (block-wise only: the largest share of a
// block of two or more holders it is in, fp32). The all-gather runs in place.
double sharded_optimizer_bytes(const Plan& plan, std::int64_t device, Precision precision);
double shard_buffer_bytes(const Plan& plan, std::int64_t device, AggregationMode mode);

// The arithmetic behind both, per element, shared with the planner's search (which knows a
// stage's elements and its least holder count, not the shares; search/cost_tables.h):
// optimizer state of `elements` shard elements, and the receive buffer of a largest share of
// `elements` (fp32 gradients).
double shard_state_bytes(Precision precision, double elements);
double shard_receive_buffer_bytes(double elements);
// At most a holder's share of `elements` gradient elements it holds in at most `blocks` blocks,
// each split evenly (plan/sharding.h even_shards) among at least `holders` holders: a block's
// share rounds up by at most one element.
double even_share_bound(double elements, std::int64_t holders, double blocks);

// The all-gather of the updated compute weights (bytes per element: the precision's weights), a
// ring per block of two or more holders moving (n-1)/n of the block's bytes plus one
// collective latency; blocks sharing a holder run one after another, so the term is the
// busiest holder's sum. Block-wise, the gradient's reduce-scatter replaces the all-reduce in the
// sync schedule at half its ring bytes (gradient_ring_share).
double shard_gather_ms(const Plan& plan, const ClusterIndex& cluster, Precision precision,
                       const PredictOptions& options);
// One block's all-gather as above (0 for a block of one holder): the simulator's too.
double shard_gather_block_ms(const BlockShards& block, const ClusterIndex& cluster,
                             Precision precision, double collective_latency_ms);
// The share of a ring all-reduce's bytes each gradient collective of `mode` moves: a sharded
// plan's block-wise reduce-scatter half (each holder receives only its shard's sums), else 1.
// The predictor's sync schedule and the simulator's collectives both price it.
double gradient_ring_share(const Plan& plan, AggregationMode mode);

// One device's breakdown: its stage's `stage` with the device's own optimizer state and buffers
// (DevicePrediction: under sharding they differ between a stage's devices; the shard buffer is
// counted with the collective buffers).
MemoryBreakdown device_memory(const Prediction& p, const MemoryBreakdown& stage,
                              const DevicePrediction& d);
// The same by device id, from a finished prediction (ETH_CHECKs the device is in it).
MemoryBreakdown device_memory(const Prediction& p, std::int64_t device);

}  // namespace eth
