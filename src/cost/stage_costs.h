// Per-stage costs of a plan (DESIGN.md section 3): what one micro-batch costs each stage in
// time and memory, from a profile. Shared by the predictor (closed forms) and the simulator
// (discrete events), so both price the same work. Pure: no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "cluster/cluster_spec.h"
#include "plan/plan.h"
#include "profile/profile.h"

namespace eth {

// Per-message latency of a point-to-point activation transfer (launch + wire), added to
// bytes / bandwidth: 10 us, the order of an NCCL/HCCL send between two devices.
inline constexpr double kDefaultP2pLatencyMs = 0.01;

// One stage for one micro-batch of a given size (per device of the stage: with dp > 1 each
// replica processes its share of the micro-batch; the largest share, ceil(mbs / dp), is priced).
// The backward pass sends the activation gradient of stage s+1's input back to stage s: the same
// bytes over the same link, so it costs stage s's send_ms again.
struct StageCost {
  std::int64_t share_mbs = 0;  // samples the busiest dp replica processes (profile lookup size)
  double forward_ms = 0;
  double backward_ms = 0;  // includes the recomputed forward work of the stage's recompute set
  // Per unit of the stage, in unit order, the backward time (recompute included); sums to
  // backward_ms. Backward runs from the last unit to the first.
  std::vector<double> unit_backward_ms;
  double send_ms = 0;            // output activation to the next stage (0 on the last stage)
  double send_bytes = 0;         // bytes of that activation message
  double activation_bytes = 0;   // activation bytes held per in-flight micro-batch, per device
  // Per unit of the stage, in unit order, the forward time; sums to forward_ms.
  std::vector<double> unit_forward_ms;
};

// Memory of one device of a stage that does not depend on micro-batches in flight. Bytes per
// parameter follow the profile entry's precision (core/precision.h: fp32 4 + 4 + 8, bf16
// 2 + 4 + 12, the paper's 16-bit training 2 + 2 + 12), what the runtime allocates.
struct StageStaticMemory {
  double weight_bytes = 0;     // the weights the kernels read (fp32, or the 16-bit copy)
  double gradient_bytes = 0;   // parameter gradients
  double optimizer_bytes = 0;  // fp32 master weights (where separate) + two Adam moments
  // Transient scratch: the largest full (nothing recomputed) activation footprint of one unit of
  // the stage at the full micro-batch share. Backward of a unit materializes its recomputed
  // activations and the gradients of its activations, both bounded by that footprint, one unit
  // at a time.
  double workspace_bytes = 0;
  double total() const { return weight_bytes + gradient_bytes + optimizer_bytes + workspace_bytes; }
};

struct PipelineCosts {
  std::vector<StageCost> full;  // micro-batch of micro_batch_size samples
  std::vector<StageCost> last;  // the last micro-batch (partial or not)
  std::vector<StageStaticMemory> memory;
  // Per stage: optimizer step of one device: the stage's share (by parameters at the stage's
  // tp) of the profile's whole-model optimizer_ms, or, where the profile gives none (0), the
  // precision's bytes per parameter / kOptimizerBytesPerS (the state streamed once).
  std::vector<double> optimizer_ms;
};

inline constexpr double kOptimizerBytesPerS = 1.0e12;

// The precision a plan is priced in: `wanted` when given, else the precision of the profile
// entries of the plan's (device type, tp) pairs. Throws InputError naming the device type when
// an entry the plan uses is of another precision than `wanted`, or (without `wanted`) when the
// plan's device types were profiled in different precisions: their times, activation bytes and
// state describe different kernels, which one run cannot mix.
Precision plan_precision(const Plan& plan, const ProfileDb& profile,
                         std::optional<Precision> wanted = std::nullopt);

// One entry per pipeline of the plan, one element per stage in each vector. Throws InputError
// (naming the profile key) when the profile lacks a needed entry, and what plan_precision
// throws. Activation messages between stages cost the precision's activation bytes per element
// (2 in bf16 and the paper's 16-bit training, 4 in fp32).
std::vector<PipelineCosts> compute_stage_costs(const Plan& plan, const ClusterSpec& cluster,
                                               const ProfileDb& profile,
                                               double p2p_latency_ms = kDefaultP2pLatencyMs,
                                               std::optional<Precision> precision = std::nullopt);

}  // namespace eth
