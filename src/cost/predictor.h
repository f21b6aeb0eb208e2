// The closed-form predictor (DESIGN.md section 3): iteration time, throughput, MFU, per-stage
// and per-device memory of a plan, and the ideal bound, from a profile. Pure and fast enough for
// the planner's inner loop; the discrete-event simulator (sim/) is its reference, not this.
//
// How to use: `Prediction p = predict(plan, cluster, profile, {})`, then read p.iteration_ms or
// write prediction_to_json(p). Throws InputError when the profile lacks an entry the plan needs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cluster/cluster_spec.h"
#include "core/json_cursor.h"
#include "plan/blocks.h"
#include "cost/stage_costs.h"
#include "plan/plan.h"
#include "profile/profile.h"

namespace eth {

// Launch + synchronization cost of one collective, added to its ring transfer time: 50 us.
inline constexpr double kDefaultCollectiveLatencyMs = 0.05;

struct PredictOptions {
  AggregationMode aggregation = AggregationMode::Block;
  double collective_latency_ms = kDefaultCollectiveLatencyMs;
  // What posting and completing one piece of a collective costs a holder (collective_time):
  // the runtime posts a collective as pieces of collective_chunk_bytes, and its window lets a
  // holder's pieces move while later ones are posted, so a holder's pieces cost the larger of
  // their transfers and this per piece, summed over what it has queued (schedule_sync). It
  // shows on runs of small pieces (many tiny all-reduces queued at once) and hides behind the
  // transfer of full pieces, small ones queued among them included. 0 (the default): a
  // collective costs its transfer plus collective_latency_ms, as on accelerators whose
  // collectives are not cut. On CPU ranks of one host, the time per piece of many tiny
  // all-reduces queued at once (docs/plan-format.md; cost/link_figures.h).
  double collective_piece_latency_ms = 0;
  // The bytes of one piece: the runtime's CommOptions::chunk_bytes by default.
  double collective_chunk_bytes = kDefaultCollectiveChunkBytes;
  double p2p_latency_ms = kDefaultP2pLatencyMs;
  // Gradient collectives start once every holder's last backward has passed the block's units
  // (true) or only after every pipeline has finished (false).
  bool overlap = true;
  // Price all three aggregation modes into sync_all_modes (false: only `aggregation`, which the
  // planner uses to rank its finalists quickly).
  bool all_modes = true;
  // The precision the plan's run trains in (eth train --plan sets its own); unset, the profile's
  // (plan_precision, cost/stage_costs.h). It sets the bytes of each element moved
  // (Prediction::activation_element_bytes, gradient_element_bytes), and a profile entry of
  // another precision is refused, since its times and bytes describe other kernels.
  std::optional<Precision> precision;
  // Bytes of gradient-collective pieces a rank may have posted and not yet completed on one
  // communicator (holder group): Open MPI's non-blocking all-reduce allocates a temporary of
  // each posted piece's size and frees it on completion (measured: docs/training.md, "Memory"),
  // so a rank that aggregates holds, per holder group it joins, min(this, the gradient bytes it
  // feeds that group) besides its buffers. Default: the runtime's window
  // (kDefaultCollectiveWindowBytes); kUnboundedCollectiveWindow: every piece posted at once.
  double collective_window_bytes = kDefaultCollectiveWindowBytes;
};

// Ring all-reduce of `bytes` per holder over `holders` (global ids): 2(n-1)/n * bytes / bw +
// latency, bw the slowest link of the ring through the holders in ascending id order (wrapping
// around). On a node whose type has node_shared_bandwidth_gbps (S), its k holders move
// k * 2(n-1)/n * bytes through the shared memory system: the time is at least that over S (all
// n on one node: 2(n-1) * bytes / S). 0 for fewer than two holders.
double ring_allreduce_ms(const ClusterSpec& cluster, const std::vector<std::int64_t>& holders,
                         double bytes, double latency_ms);
double ring_allreduce_ms(const ClusterIndex& cluster, const std::vector<std::int64_t>& holders,
                         double bytes, double latency_ms);

// One collective of `bytes` per holder as the runtime posts it: cut into pieces of
// options.collective_chunk_bytes (the last one shorter; one piece when infinite). transfer_ms
// is its ring_allreduce_ms with collective_latency_ms: how long it holds the holders' links,
// and a node whose devices share one memory system (node_shared_bandwidth_gbps) for its bytes;
// issue_ms = pieces x collective_piece_latency_ms, how long posting and completing its pieces
// holds the holders, overlapping the transfers (the window) but not the shared memory (the
// probe: every pair of a node queueing tiny all-reduces at once took no longer per piece than
// one group of all the node's ranks). Alone, a collective takes max(transfer_ms, issue_ms);
// the schedule runs each holder's issues and transfers as two queues (schedule_sync).
struct CollectiveTime {
  double transfer_ms = 0;
  double issue_ms = 0;
  double pieces = 0;
  double alone_ms() const { return std::max(transfer_ms, issue_ms); }
};
CollectiveTime collective_time(const ClusterIndex& cluster,
                               const std::vector<std::int64_t>& holders, double bytes,
                               const PredictOptions& options);

struct MemoryBreakdown {  // bytes on one device at its peak
  double weights = 0;
  double gradients = 0;
  double optimizer_state = 0;
  double activations = 0;  // the micro-batch slots: in-flight x a full micro-batch share's held
  double workspace = 0;    // the activation arena's workspace (stage_workspace_bytes)
  double messages = 0;     // activation-message buffers (message_buffer_bytes)
  double collective_buffers = 0;  // gradient-collective temporaries (collective_window_bytes)
  double baseline = 0;     // the process's own memory (profile's process_baseline_bytes)
  double comm_buffers() const { return messages + collective_buffers; }
  double total() const {
    return weights + gradients + optimizer_state + activations + workspace + comm_buffers() +
           baseline;
  }
};

// {"weights_bytes", ..., "total_bytes"}: every field of `m`, comm_buffers and total.
Json memory_to_json(const MemoryBreakdown& m);

struct StagePrediction {
  std::string device_type;
  std::int64_t first_unit = 0, last_unit = 0, tp = 1, dp = 1;
  std::vector<std::int64_t> devices;
  double forward_ms = 0, backward_ms = 0, send_ms = 0;  // one full micro-batch
  double last_forward_ms = 0, last_backward_ms = 0, last_send_ms = 0;  // the last micro-batch
  std::int64_t in_flight = 0;  // micro-batches whose activations are held at the peak
  MemoryBreakdown memory;
  double capacity_bytes = 0;
  bool fits = true;
  double optimizer_ms = 0;
};

struct PipelinePrediction {
  std::int64_t micro_batch_size = 0, local_batch = 0, num_microbatches = 0;
  std::int64_t last_microbatch_size = 0;
  std::int64_t bottleneck_stage = 0;  // 0-based stage with the largest F + B
  double time_ms = 0;                 // T_p
  std::vector<StagePrediction> stages;
};

struct DevicePrediction {
  std::int64_t device = 0, pipeline = 0, stage = 0, dp_rank = 0, tp_rank = 0;
  double peak_bytes = 0, capacity_bytes = 0;
  // Part of peak_bytes: the stage's optimizer state, or under optimizer sharding this device's
  // shards of it (cost/sharding_memory.h); and the reduce-scatter's receive buffer (sharded
  // block-wise aggregation, which then posts no all-reduce temporaries).
  double optimizer_state_bytes = 0, shard_buffer_bytes = 0;
  double collective_buffer_bytes = 0;  // the stage's collective temporaries (0 when scattered)
  bool fits = true;
};

struct SyncPrediction {
  AggregationMode mode = AggregationMode::Block;
  AggregationStats stats;  // at Prediction::gradient_element_bytes per element
  double busy_ms = 0;      // sum over the collectives of one busiest device
  double end_ms = 0;       // when the last collective ends, iteration start = 0
  double exposed_ms = 0;   // end_ms beyond max_p T_p (the non-overlapped part)
};

struct Prediction {
  // The precision priced and what it moves per element: activations and their gradients between
  // stages, and gradients in the all-reduces across pipelines (core/precision.h: bf16 sends
  // 2-byte activations but keeps gradients in fp32, 4 bytes).
  Precision precision = Precision::Mixed16;
  double activation_element_bytes = 2;
  double gradient_element_bytes = 2;
  std::vector<PipelinePrediction> pipelines;
  std::vector<DevicePrediction> devices;  // ascending device id
  SyncPrediction sync;                    // the mode in PredictOptions
  std::vector<SyncPrediction> sync_all_modes;  // block, tensor, device (all_modes)
  double pipeline_ms = 0;   // max_p T_p
  double optimizer_ms = 0;  // max over devices
  // Optimizer sharding: the all-gather of the updated weights after the step, before the next
  // forward (cost/sharding_memory.h shard_gather_ms); 0 unsharded.
  double shard_gather_ms = 0;
  double iteration_ms = 0;  // pipeline_ms + sync.exposed_ms + optimizer_ms + shard_gather_ms
  double tokens_per_s = 0;
  double model_flops = 0;   // 3 x forward FLOPs of the global batch, recompute not counted
  double mfu = 0;           // model_flops / iteration / aggregate peak of the cluster
  double ideal_iteration_ms = 0;
  bool fits = true;                           // every device within its memory
  std::vector<std::int64_t> oversubscribed;  // devices whose peak exceeds their memory
};

Prediction predict(const Plan& plan, const ClusterSpec& cluster, const ProfileDb& profile,
                   const PredictOptions& options = {});

// The aggregation term on its own: `mode`'s collectives of `plan` scheduled as predict() does
// (in the one global order, each after its holders' previous one, disjoint groups in parallel
// except on a node whose devices share one memory system, priced by collective_time) with
// every gradient final at time 0, i.e. one aggregation after the pipelines: end_ms (=
// exposed_ms) is its time. Needs no profile.
SyncPrediction predict_aggregation(const Plan& plan, const ClusterSpec& cluster,
                                   AggregationMode mode, const PredictOptions& options = {});

// 1F1B (schedule "1f1b") or GPipe ("gpipe") time of one pipeline from its stage costs and
// micro-batch count (the formula is documented in predictor.cpp).
double pipeline_time_ms(const PipelineCosts& costs, std::int64_t num_microbatches,
                        const std::string& schedule);

// Total model FLOPs of an iteration over the aggregate effective FLOPS of the plan's devices
// (per device type, the best transformer-block efficiency among its profile entries).
double ideal_iteration_ms(const Plan& plan, const ClusterSpec& cluster, const ProfileDb& profile);

Json prediction_to_json(const Prediction& p);

}  // namespace eth
