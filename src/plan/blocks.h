// Gradient blocks for asymmetric gradient aggregation (DESIGN.md section 5): pipelines cut the
// model in different places, so a unit's gradient lives on different devices per pipeline.
// Derives the collectives of the device-wise, tensor-wise and block-wise schemes and their byte
// and collective counts. A property of the plan (which device holds which gradient elements),
// so it lives here: the runtime runs these collectives and the predictor and simulator price
// them, and the runtime needs no cost model for it. No timing here (cost/predictor.h).
//
// How to use: `derive_blocks(plan, 2.0)` for the merged block-wise collectives plus the stats of
// all three modes, or `aggregation_collectives(plan, mode)` for any mode's collectives in the
// order every rank issues them.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "model/model_spec.h"
#include "plan/plan.h"

namespace eth {

enum class AggregationMode : std::uint8_t { Block, Tensor, Device };
std::string_view aggregation_mode_name(AggregationMode m);  // "block", "tensor", "device"
std::optional<AggregationMode> parse_aggregation_mode(std::string_view name);

// Which gradient elements of a unit range a piece covers.
//   Sharded:    chunk `tp_chunk` of `num_tp_chunks` of every tp-sharded tensor (rows
//               [c*R/n, (c+1)*R/n) of a tensor with R rows, floor division).
//   Replicated: the tp-replicated tensors (norms, biases added after a row-parallel matmul).
//   Whole:      every element of the unsharded units (device-wise, zero-padded buffers).
//   Tied:       chunk `tp_chunk` of `num_tp_chunks` of a tied model's embedding matrix (wte of
//               unit 0, which the head holds again as lm_head_w): one more block, held by the
//               first and the last unit's stages of every pipeline (first_unit 0, last_unit
//               the head; a holder holds one copy or both, and a rank holding both keeps one
//               gradient for them, train/model_state.h), so every copy gets the sum of both
//               gradients. The segments' pieces leave these two tensors out.
enum class GradPart : std::uint8_t { Sharded, Replicated, Whole, Tied };

struct GradPiece {
  std::int64_t first_unit = 0;  // inclusive
  std::int64_t last_unit = 0;   // inclusive
  GradPart part = GradPart::Whole;
  std::int64_t tp_chunk = 0;       // Sharded and Tied only
  std::int64_t num_tp_chunks = 1;  // Sharded and Tied only: lcm of the tp degrees holding it
  // Tensor-wise pieces name one tensor: index into unit_tensors(model, first_unit)
  // (first_unit == last_unit then). -1: every tensor of `part` in the range.
  std::int64_t tensor = -1;
  std::int64_t elements = 0;
};

// One collective (a SUM all-reduce) over `holders`: global device ids, ascending, one per
// pipeline per intra-stage dp replica holding the pieces (device-wise: every device of the plan).
// A holder is ready once its last backward has passed the lowest unit of the pieces it holds.
// Tp-replicated tensors join from tp rank 0 of each stage (the representative); the other tp
// ranks receive the result within their tp group, which is not part of this cost.
struct GradBlock {
  std::vector<GradPiece> pieces;  // in layout order; block-wise: pieces with the same holders
  std::vector<std::int64_t> holders;
  std::int64_t elements = 0;  // sum over pieces
  std::int64_t lowest_unit() const;
  std::int64_t highest_unit() const;
};

// Counts only collectives with two or more holders: a group of one has nothing to reduce.
struct AggregationStats {
  double bytes_per_device_max = 0;  // bytes the busiest device feeds into collectives
  double bytes_total = 0;           // sum over collectives of elements * bytes * group size
  std::int64_t collectives = 0;     // collectives issued per iteration
  std::int64_t communicators = 0;   // distinct holder groups
};

struct BlockPlan {
  std::vector<GradBlock> blocks;  // merged by identical holder group, in one global order
  AggregationStats device_wise;
  AggregationStats tensor_wise;
  AggregationStats block_wise;
  const AggregationStats& stats(AggregationMode m) const;
};

// Global device id of (dp replica, tp rank) of a stage: `devices` lists tp * dp ids as dp groups
// of tp consecutive ids, so this is devices[dp_rank * tp + tp_rank].
// Inline: the predictor asks for it per message and per collective holder; out of range it
// ETH_CHECKs (stage_device_checked).
std::int64_t stage_device_checked(const StagePlan& s, std::int64_t dp_rank, std::int64_t tp_rank);
inline std::int64_t stage_device(const StagePlan& s, std::int64_t dp_rank, std::int64_t tp_rank) {
  if (dp_rank >= 0 && dp_rank < s.dp && tp_rank >= 0 && tp_rank < s.tp &&
      static_cast<std::int64_t>(s.devices.size()) == s.tp * s.dp) {
    return s.devices[static_cast<std::size_t>(dp_rank * s.tp + tp_rank)];
  }
  return stage_device_checked(s, dp_rank, tp_rank);
}

// The collectives of one mode, in the one global order every rank issues them: descending unit
// order (the order the last backward finishes the units), within a unit range tp chunk 0..n-1
// then the replicated part; block-wise merges every piece into the first block with the same
// holder group. Includes groups of one holder (they keep the layout complete); their
// collectives are free. A tied model's embedding matrix comes last (its chunks 0..n-1, n the lcm
// of the tp degrees of every stage holding unit 0 or the head): it is final only once backward
// has passed unit 0. ETH_CHECKs that every pipeline covers all units.
std::vector<GradBlock> aggregation_collectives(const Plan& plan, AggregationMode mode);

// `bytes_per_element` is 2 for 16-bit gradients (the cost model) and 4 for the fp32 runtime.
AggregationStats aggregation_stats(const std::vector<GradBlock>& collectives,
                                   double bytes_per_element);
BlockPlan derive_blocks(const Plan& plan, double bytes_per_element);

}  // namespace eth
