// Where a rank keeps its gradients so aggregation needs no copies (DESIGN.md section 5,
// address and size consistency): the placed ParamLayout of a rank of a plan, and the runs of the
// rank's gradient buffer that each collective reduces.
//
// The layout follows the block-wise collectives of plan/blocks.h (aggregation_collectives, the
// derivation the predictor prices): the rank's blocks (collectives it is a holder of, groups of
// one included) back to back in the one global order, each block its pieces in order, each piece
// its elements in the canonical order below, so a block is one contiguous range holding the same
// elements in the same order on every holder, whatever the holder's tp. A rank of tp t in a
// segment of lcm(tp) n > t holds n/t chunks of each sharded tensor, which may belong to different
// blocks: its gradient is then cut into those row chunks (the kernels write each in place,
// kernels/grad_rows.h) while its parameters stay one matrix. Replicated tensors of a tp rank > 0
// (tp rank 0 speaks for the group and broadcasts the sums) go after the blocks, one range per
// segment, the order of tp rank 0's pieces. Tensor-wise collectives are sub-ranges of the same
// layout (one tensor chunk each). Device-wise, the rank's buffer is the whole model in the global
// block order with the rank's elements at their global offsets and zeros elsewhere, so the one
// whole-model all-reduce runs in place too.
//
// Canonical element order of a piece: units ascending; in each unit its tensors of the piece's
// part (sharded: rows [c*R/n, (c+1)*R/n) of chunk c of n; replicated: whole) in unit_tensors
// order; row-major inside a tensor.
//
// How to use:
//   ParamLayout l = plan_layout(plan, device, mode);     // ModelState(model, l), StageCompute
//   for (const GradBlock& b : aggregation_collectives(plan, mode))
//     if (holds) runs = collective_runs(plan, l, device, b);  // one run: reduce in place
#pragma once

#include <cstdint>
#include <vector>

#include "plan/blocks.h"
#include "plan/plan.h"
#include "train/model_state.h"

namespace eth {

// A contiguous run of a rank's gradient buffer in a collective's element order; `offset` -1
// stands for `count` zeros (device-wise padding for elements the rank does not hold). A
// collective whose runs are one run of the buffer is reduced in place; any other is packed.
struct PackRun {
  std::int64_t offset = -1;
  std::int64_t count = 0;
};

// The placed layout of device `device` of `plan` (its stage's units, tp and tp rank), for
// aggregation `mode`: blocks back to back for block- and tensor-wise, at their global offsets
// (a whole-model gradient buffer) for device-wise. Parameters are laid out the same in every mode.
ParamLayout plan_layout(const Plan& plan, std::int64_t device, AggregationMode mode);

// The runs holding `piece` (sharded or replicated, of units `layout` holds) in `layout`, in the
// canonical element order. Every holder lists the same elements in the same order. ETH_CHECKs
// that the layout holds them and that they add up to piece.elements.
std::vector<PackRun> piece_runs(const ModelSpec& model, const ParamLayout& layout,
                                const GradPiece& piece);

// The runs of collective `b` of any mode on `device` (a holder of it), whose gradients `layout`
// describes: its pieces' runs in order; for the device-wise collective (one whole-model piece),
// every block-wise block in the global order, the rank's own pieces as runs and every other
// piece as zeros, or, when the layout keeps the rank's blocks at their global offsets with gaps
// for the others' (plan_layout's device-wise layout), the one run [0, total_params) whose gaps
// must hold zeros (device_gaps). Adjacent runs are merged, so a collective in place is exactly
// one run.
std::vector<PackRun> collective_runs(const Plan& plan, const ParamLayout& layout,
                                     std::int64_t device, const GradBlock& b);

// The gaps of a device-wise gradient buffer in place (the other ranks' blocks), to be zero
// before the whole-model all-reduce: the padding device-wise aggregation pays for.
std::vector<PackRun> device_gaps(const Plan& plan, const ParamLayout& layout, std::int64_t device);

// The replicated pieces of the units `layout` holds, one per segment, in the global order: what
// tp rank 0 broadcasts to its tp group after the collectives.
std::vector<GradPiece> replicated_pieces(const Plan& plan, const ParamLayout& layout);

}  // namespace eth
