// Gradient aggregation across pipelines and dp replicas (DESIGN.md section 5), in the three
// schemes of plan/blocks.h: block-wise (one all-reduce per distinct holder group), tensor-wise
// (one per parameter tensor) and device-wise (one zero-padded whole-model buffer). The
// collectives, their holders and their global order come from aggregation_collectives, the same
// derivation the predictor and simulator price, so what runs is what was costed. Under tensor
// parallelism a sharded tensor's chunk c of lcm(tp) is reduced over the tp ranks holding it in
// every pipeline; replicated tensors are reduced over one representative per stage replica (tp
// rank 0) and then broadcast within its tp group. Every scheme sums the same numbers, so all
// three give the same gradients (bitwise for two holders).
//
// How to use (every rank of the world, in the same order):
//   GradSync sync(plan, AggregationMode::Block, world, state.layout());  // creates the groups
//   ... backward of every micro-batch ...
//   sync.start(state.grads());   // packs and posts every collective this rank joins
//   sync.finish(state.grads());  // waits, and writes the sums back
#pragma once

#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "plan/blocks.h"
#include "plan/plan.h"
#include "runtime/trace_recorder.h"
#include "train/model_state.h"

namespace eth {

// A contiguous run of a rank's gradient buffer packed into a collective's buffer; `offset` -1
// stands for `count` zeros (device-wise padding for units the rank does not hold).
struct PackRun {
  std::int64_t offset = -1;
  std::int64_t count = 0;
};

// The runs, in packing order, that hold `piece` in a buffer laid out by `layout` (a tp rank's
// layout: its rows of each sharded tensor). Every holder of the piece lists the same elements
// in the same order, so their packed buffers line up element by element: a sharded chunk is the
// same rows of the whole tensor whatever the holder's tp; a whole-unit piece (device-wise) puts
// the rank's rows at their place in the whole tensor and zeros elsewhere, and its replicated
// tensors only on tp rank 0. ETH_CHECKs that the rank holds what it packs and that the runs add
// up to piece.elements.
std::vector<PackRun> piece_runs(const ModelSpec& model, const ParamLayout& layout,
                                const GradPiece& piece);

class GradSync {
 public:
  // Collective over `world`: creates one communicator per distinct holder group this rank is
  // in, in the global collective order. `layout` is this rank's (plan.device_ids()[rank]);
  // `tp_comm` its stage replica's tp group (null at tp 1), over which finish() broadcasts the
  // replicated tensors' sums from tp rank 0.
  GradSync(const Plan& plan, AggregationMode mode, const Communicator& world,
           const ParamLayout& layout, const Communicator& tp_comm = Communicator());

  AggregationMode mode() const { return mode_; }
  // eth train --trace: records each collective's post and wait (null: off).
  void set_trace(TraceRecorder* trace) { trace_ = trace; }
  // Posts, in the global order, every not yet posted collective whose units this rank has
  // finished: those whose lowest unit held here is >= `lowest_done_unit` (backward runs from
  // the last unit down, so a block is final once the last micro-batch's backward has passed its
  // lowest unit). Stops at the first collective not ready, so every rank keeps the one order.
  // Call it as the last backward passes each unit to overlap aggregation with the rest of it.
  void start_ready(const float* grads, std::int64_t lowest_done_unit);
  // Posts every remaining collective (all gradients final).
  void start(const float* grads);
  // Waits for the posted collectives and writes their sums into `grads`; then, under tp, the
  // representative's replicated sums overwrite the other tp ranks' (one broadcast).
  void finish(float* grads);

  // Per step, for this rank: collectives it joins (groups of two or more) and bytes it feeds.
  std::int64_t collectives() const { return static_cast<std::int64_t>(jobs_.size()); }
  double bytes() const;
  std::int64_t communicators() const { return communicators_; }

 private:
  struct Job {
    std::int64_t index = 0;        // in the global order, groups of one left out (the sim's)
    std::int64_t lowest_unit = 0;  // of the pieces this rank feeds (device-wise: its range)
    Communicator comm;
    std::vector<PackRun> runs;
    std::vector<float> buffer;
    Request request;
  };
  AggregationMode mode_;
  Communicator tp_comm_;
  std::vector<PackRun> replicated_;  // this rank's replicated tensors (tp > 1)
  std::vector<float> replicated_buffer_;
  std::vector<Job> jobs_;
  std::size_t next_ = 0;  // first job not posted yet
  std::int64_t communicators_ = 0;
  TraceRecorder* trace_ = nullptr;
};

}  // namespace eth
