// Per-stage costs of a plan (DESIGN.md section 3): what one micro-batch costs each stage in
// time and memory, from a profile. Shared by the predictor (closed forms) and the simulator
// (discrete events), so both price the same work. Pure: no I/O.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "cluster/cluster_spec.h"
#include "plan/blocks.h"
#include "plan/plan.h"
#include "profile/profile.h"

namespace eth {

// Per-message latency of a point-to-point activation transfer (launch + wire), added to
// bytes / bandwidth: 10 us, the order of an NCCL/HCCL send between two devices.
inline constexpr double kDefaultP2pLatencyMs = 0.01;

// No bound on the gradient-collective pieces in flight (PredictOptions::collective_window_bytes):
// a runtime that posts every piece of a collective at once.
inline constexpr double kUnboundedCollectiveWindow = std::numeric_limits<double>::infinity();
// What the runtime keeps in flight per communicator by default: max(CommOptions::window_bytes,
// CommOptions::chunk_bytes) = 2 MiB (comm/communicator.h; the cost library cannot include comm,
// so tests/runtime/memory_model_test.cpp checks that the two agree).
inline constexpr double kDefaultCollectiveWindowBytes = 2.0 * 1024 * 1024;

// The runtime cuts every gradient collective into pieces of at most this many bytes, one MPI
// collective each (CommOptions::chunk_bytes, 512 KiB; docs/comm.md "Chunking"); the predictor
// prices a collective piece by piece (PredictOptions::collective_chunk_bytes). Mirrored here
// because the cost library cannot include comm; tests/runtime/memory_model_test.cpp checks
// that the two agree.
inline constexpr double kDefaultCollectiveChunkBytes = 512.0 * 1024;

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
  // Activation bytes an in-flight micro-batch holds on one device: the runtime's arena slot,
  // sized for the full micro-batch share, so the last micro-batch, partial or not, holds the
  // full share's bytes too.
  double activation_bytes = 0;
  // Per unit of the stage, in unit order, the forward time; sums to forward_ms.
  std::vector<double> unit_forward_ms;
};

// Memory of one device of a stage besides its in-flight micro-batches' slots (all of it held for
// the whole step: the runtime allocates it once). Bytes per parameter follow the profile entry's precision (core/precision.h: fp32 4 + 4 + 8, bf16
// 2 + 4 + 12, the paper's 16-bit training 2 + 2 + 12), what the runtime allocates.
struct StageStaticMemory {
  double weight_bytes = 0;     // the weights the kernels read (fp32, or the 16-bit copy)
  double gradient_bytes = 0;   // parameter gradients
  double optimizer_bytes = 0;  // fp32 master weights (where separate) + two Adam moments
  // The activation arena's part beside its micro-batch slots (stage_workspace_bytes): one copy
  // of what the recompute set drops and the forward transients and backward gradients.
  double workspace_bytes = 0;
  // Activation-message buffers (message_buffer_bytes, at the plan schedule's in-flight count).
  double message_bytes = 0;
  // Gradient-collective temporaries of the stage's busiest device (collective_buffer_bytes).
  double collective_bytes = 0;
  // The process's own resident memory before any model buffer (libraries, the communication
  // runtime, thread stacks): the profile entry's process_baseline_bytes, 0 when not measured.
  double baseline_bytes = 0;
  double total() const {
    return weight_bytes + gradient_bytes + optimizer_bytes + workspace_bytes + message_bytes +
           collective_bytes + baseline_bytes;
  }
};

// The unit kinds of a unit range (the runtime sizes its workspace by them).
struct UnitMix {
  bool embedding = false, block = false, head = false;
  bool several = false;  // more than one unit
};
UnitMix unit_mix(const ModelSpec& m, std::int64_t first_unit, std::int64_t last_unit);

// Bytes of the forward transients and backward gradient buffers the runtime's activation arena
// (train/stage_compute.cpp, StageCompute::Impl::assign) holds once for a stage whose units are
// `mix`, at `mbs` samples of `seq` tokens, tp degree `tp`, in precision `p` (activation elements
// of precision_bytes(p).activation bytes, fp32 statistics): with N = mbs * seq, C hidden, F and A
// = C the rank's MLP and attention columns, NH its heads, R the activation element bytes,
//   blocks:  attention and MLP outputs, the residual's gradient, the MLP, qkv and attention-score
//            gradients: (3 N C + N F + 3 N A + mbs NH seq^2) R
//   blocks or the embedding under dropout: a branch gradient N C R
//   blocks or the head: the layer-norm gradient N C R
//   more than one unit: two residual-gradient buffers 2 N C R
//   the head at tp > 1: the vocabulary-parallel loss statistics 3 N x 4
//   tp > 1 where partial sums are wider than activations (bf16): N C x tp_element
// `dropout`: the run keeps dropout masks (profile_has_dropout).
double transient_workspace_bytes(const ModelSpec& m, const UnitMix& mix, std::int64_t mbs,
                                 std::int64_t seq, std::int64_t tp, Precision p, bool dropout);

// A per-unit bound for callers that take the maximum over a range's units (the planner's tables):
// transient_workspace_bytes of unit `u`'s kind as if in a range of several units, plus, at
// tp > 1, the head's loss statistics on every kind. The maximum over a range's units is at least
// transient_workspace_bytes of the range, and exceeds it by at most 2 N C R (a one-unit range)
// plus 3 N x 4 (a range without the head at tp > 1), N = mbs * seq; ranges of a head and an
// embedding without blocks (a model of no blocks) excepted.
double unit_workspace_bound_bytes(const ModelSpec& m, std::int64_t unit, std::int64_t mbs,
                                  std::int64_t seq, std::int64_t tp, Precision p, bool dropout);

// Bytes of the one copy the runtime keeps of the tensors `rc` drops: per unit kind of the range,
// the largest unit's dropped bytes (total - held(rc)), shared by every unit of that kind and
// every micro-batch slot. `units` is a profile entry's per-unit figures.
double recompute_copy_bytes(const ModelSpec& m, const std::vector<UnitProfile>& units,
                            std::int64_t first_unit, std::int64_t last_unit,
                            const RecomputeSet& rc);

// Whether the run an entry describes keeps dropout masks: its embedding holds more than its
// token ids (the mask), as measured with --dropout > 0 and in the analytic formula.
bool profile_has_dropout(const ProfileEntry& e);

// The stage's workspace: transient_workspace_bytes + recompute_copy_bytes for the stage's units,
// at the entry's micro-batch size and tp. With in-flight x the slots' held bytes (the sum over
// units of activation.held(rc) at that size), the runtime's planned arena, up to its 64-byte
// alignment of each buffer.
double stage_workspace_bytes(const ModelSpec& m, const ProfileEntry& e, std::int64_t seq,
                             std::int64_t first_unit, std::int64_t last_unit,
                             const RecomputeSet& rc);

// Bytes of gradient-collective temporaries a device holds for one holder group (one
// communicator) into whose collectives it feeds `fed_bytes`, in a run of precision `p` with at
// most `window_bytes` of that communicator's pieces posted and not completed
// (PredictOptions::collective_window_bytes): min(window, fed). A device sums this over its
// groups. Open MPI's non-blocking all-reduce, which ETH's CPU runtime (fp32, bf16) uses,
// allocates one temporary of each posted piece's size (docs/training.md, "Memory"). 0 in
// Mixed16, the paper's GPU training, whose collectives (NCCL) reduce in place.
double collective_buffer_bytes(Precision p, double window_bytes, double fed_bytes);

// Activation-message buffers of one device of stage `stage` of `num_stages` (runtime/
// stage_runner.cpp): one receive buffer per neighbour (input activation, output gradient) and
// the send buffers: a forward send stays pending at most until its micro-batch's gradient comes
// back (so at most `in_flight` of them), and `gradient_sends` gradient sends
// (gradient_sends_in_flight). Each holds a share of `share_mbs` samples of `sample_bytes`.
double message_buffer_bytes(std::int64_t stage, std::int64_t num_stages, std::int64_t in_flight,
                            std::int64_t gradient_sends, std::int64_t share_mbs,
                            double sample_bytes);

// How many gradient sends of a stage can be pending at once. 1F1B: two. The previous stage
// posts its receive of gradient j right after sending activation j + w (w: this stage's
// in-flight count), which this stage needs before its backward j + 1, so the send of j may
// still be pending when backward j + 1 takes a buffer (it depends on which thread runs first),
// but backward j + 2 needs activation j + w + 1, sent only after the previous stage's backward
// j. GPipe: every backward of this stage may finish before the previous stage takes the first
// gradient, so all `num_microbatches`.
std::int64_t gradient_sends_in_flight(const std::string& schedule, std::int64_t num_microbatches);

struct PipelineCosts {
  std::vector<StageCost> full;  // micro-batch of micro_batch_size samples
  std::vector<StageCost> last;  // the last micro-batch (partial or not)
  std::vector<StageStaticMemory> memory;
  // Per stage: optimizer step of one device: the stage's share (by parameters at the stage's
  // tp) of the profile's whole-model optimizer_ms, or, where the profile gives none (0), the
  // precision's bytes per parameter / kOptimizerBytesPerS (the state streamed once). Under
  // optimizer sharding, scaled to the largest shard a device of the stage steps.
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

// Micro-batches whose activations stage `stage` of `num_stages` holds at its peak: all k under
// GPipe, min(S - s, k) under 1F1B (0-based s: warm-up forwards plus one).
std::int64_t stage_in_flight(const std::string& schedule, std::int64_t stage,
                             std::int64_t num_stages, std::int64_t num_microbatches);

// One entry per pipeline of the plan, one element per stage in each vector. Throws InputError
// (naming the profile key) when the profile lacks a needed entry, and what plan_precision
// throws. Activation messages between stages cost the precision's activation bytes per element
// (2 in bf16 and the paper's 16-bit training, 4 in fp32). Memory charges the collective
// temporaries of `aggregation`'s collectives with at most `collective_window_bytes` in flight
// (PredictOptions has both).
std::vector<PipelineCosts> compute_stage_costs(
    const Plan& plan, const ClusterSpec& cluster, const ProfileDb& profile,
    double p2p_latency_ms = kDefaultP2pLatencyMs, std::optional<Precision> precision = std::nullopt,
    AggregationMode aggregation = AggregationMode::Block,
    double collective_window_bytes = kDefaultCollectiveWindowBytes);

}  // namespace eth
