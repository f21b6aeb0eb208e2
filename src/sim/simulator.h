// The discrete-event pipeline simulator (DESIGN.md section 6, docs/simulator.md): every stage's
// devices run their RankProgram in order; compute occupies the stage, a transfer occupies the
// sender's outgoing and the receiver's incoming link, gradient collectives occupy each holder's
// communication resource (which overlaps compute) one at a time in the global block order, and
// the optimizer step runs last. Durations come from cost/ (StageCost, ring_allreduce_ms); this
// file never reads a profile itself. Pure: no I/O; the trace and SVG writers are in trace.h.
//
// How to use:
//   auto costs = compute_stage_costs(plan, cluster, profile);
//   auto colls = make_collectives(plan, cluster, AggregationMode::Block);
//   SimResult r = simulate(plan, costs, colls, {});       // r.iteration_ms, r.timeline, ...
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "cluster/cluster_spec.h"
#include "plan/blocks.h"
#include "cost/predictor.h"
#include "cost/stage_costs.h"
#include "plan/plan.h"
#include "schedule/schedule.h"
#include "sim/event_queue.h"

namespace eth {

// Milliseconds to simulated nanoseconds, rounded to nearest.
TimeNs ms_to_ns(double ms);
inline double ns_to_ms(TimeNs ns) { return static_cast<double>(ns) * 1e-6; }

// One gradient collective as the simulator sees it.
struct SimCollective {
  std::vector<std::int64_t> holders;  // global device ids, ascending, >= 2 of them
  // A holder joins once its last backward has passed max(ready_unit, its stage's first unit).
  std::int64_t ready_unit = 0;
  double duration_ms = 0;
  double bytes = 0;  // per holder (for reports)
  // Nodes of holders whose devices share one memory system (node_shared_bandwidth_gbps): such
  // a node runs one collective at a time, as the predictor's schedule does.
  std::vector<std::int64_t> shared_nodes = {};
};

// The collectives of `mode` in the global order (plan/blocks.h), priced by the ring model
// (cost/predictor.h) at `bytes_per_element` per gradient element (the predictor's
// Prediction::gradient_element_bytes: 2 for 16-bit gradients, 4 for ETH's fp32 and bf16 runs);
// groups of one holder are dropped (nothing to reduce).
std::vector<SimCollective> make_collectives(const Plan& plan, const ClusterSpec& cluster,
                                            AggregationMode mode,
                                            double latency_ms = kDefaultCollectiveLatencyMs,
                                            double bytes_per_element = 2.0);

// Optimizer sharding (plan/sharding.h): the all-gather of each block's updated weights among
// its holders (cost/sharding_memory.h shard_gather_block_ms), in the plan's block order; none
// for an unsharded plan. (make_collectives prices a sharded plan's block-wise collectives as
// the reduce-scatters they are.)
std::vector<SimCollective> make_weight_gathers(const Plan& plan, const ClusterSpec& cluster,
                                               Precision precision,
                                               double latency_ms = kDefaultCollectiveLatencyMs);

struct SimOptions {
  ScheduleKind schedule = ScheduleKind::OneFOneB;
  // true: a collective starts once every holder's last backward has passed its units; false:
  // only once every pipeline has finished its backward (the predictor's overlap = false).
  bool overlap = true;
  bool record_timeline = true;  // off for benchmarks that only want the totals
  // make_weight_gathers: each runs on its holders once every one of them has finished its
  // optimizer step and its previous gathers (the next forward waits for the weights), so the
  // iteration ends after them. In the timeline: ReduceGradients entries whose block is
  // collectives.size() + the gather's index.
  std::vector<SimCollective> weight_gathers;
};

// The lowered program of every pipeline: generator, insert_p2p, then each stage's collectives
// (indices into `collectives` of those a device of the stage holds) and the optimizer step.
std::vector<Schedule> build_schedules(const Plan& plan, ScheduleKind kind,
                                      const std::vector<SimCollective>& collectives);

// One interval of the timeline. Compute and collectives appear once per device of the stage;
// a transfer appears as Send* on every sending device and Recv* on every receiving device, both
// over the transfer's interval.
struct TimelineEntry {
  std::int64_t device = 0;
  std::int64_t pipeline = 0;
  std::int64_t stage = 0;
  ActionKind kind = ActionKind::Forward;
  std::int64_t microbatch = -1;  // -1 for ReduceGradients and OptimizerStep
  std::int64_t block = -1;       // ReduceGradients: index into the collectives
  TimeNs start = 0;
  TimeNs end = 0;
};

struct Timeline {
  std::vector<TimelineEntry> entries;  // in the order the simulator started them
};

struct MemorySample {
  TimeNs time = 0;
  double bytes = 0;  // static + in-flight activations from this time on
};

struct StageSimResult {
  std::int64_t pipeline = 0, stage = 0;
  std::vector<std::int64_t> devices;
  std::string device_type;
  std::vector<MemorySample> memory;  // step function, starting at time 0 with the static bytes
  double peak_memory_bytes = 0;
  std::int64_t peak_in_flight = 0;  // micro-batches whose activations were held at once
  TimeNs backward_end = 0;          // end of the stage's last backward
};

struct DeviceSimResult {
  std::int64_t device = 0, pipeline = 0, stage = 0;
  double compute_ms = 0;     // forward + backward + optimizer
  double reduce_ms = 0;      // time in gradient collectives (overlaps compute when allowed)
  double busy_fraction = 0;  // compute_ms / iteration
  double idle_fraction = 0;  // 1 - busy_fraction
  // Idle share of the pipeline's forward/backward span [0, last backward of the pipeline]:
  // (S - 1) / (k + S - 1) for uniform stages and free communication.
  double bubble_fraction = 0;
  double peak_memory_bytes = 0;
};

struct SimResult {
  double iteration_ms = 0;
  std::vector<double> pipeline_ms;       // per pipeline: end of its last backward
  std::vector<StageSimResult> stages;    // pipeline-major
  std::vector<DeviceSimResult> devices;  // ascending device id
  Timeline timeline;
  std::uint64_t events = 0;  // events processed
};

// The queue drained while some program had actions left: a schedule that cannot run. what()
// carries, per stuck pipeline, the step x stage grid with '*' on each stage's stuck action.
class SimDeadlock : public std::runtime_error {
 public:
  explicit SimDeadlock(const std::string& grid) : std::runtime_error(grid) {}
};

// `costs[p]` per pipeline as compute_stage_costs returns it; `schedules[p]` lowered programs
// (build_schedules, or hand-written for tests) whose ReduceGradients index `collectives`.
// Throws SimDeadlock as above.
SimResult simulate(const Plan& plan, const std::vector<PipelineCosts>& costs,
                   const std::vector<SimCollective>& collectives,
                   const std::vector<Schedule>& schedules, const SimOptions& options);
SimResult simulate(const Plan& plan, const std::vector<PipelineCosts>& costs,
                   const std::vector<SimCollective>& collectives, const SimOptions& options);

}  // namespace eth
