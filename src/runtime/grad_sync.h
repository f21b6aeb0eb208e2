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
// In place: with the rank's placed layout (runtime/grad_layout.h, plan_layout) every collective
// of every mode, and every broadcast, is one contiguous range of the gradient buffer, reduced
// where the backward wrote it: no copies (bytes_copied() == 0). Any other layout (say the
// unit-major one) still works: a collective that is not one range is packed into a buffer and
// unpacked after, and bytes_copied() counts what that moves.
//
// The order and the set of collectives are the program's (schedule/plan_schedules.h): the
// executor hands over the ReduceGradients actions of its stage's program (set_order), posts
// ready ones early during the last backward (start_ready) and each one at the latest at its own
// action (start_through); a collective the program does not reduce is never posted.
//
// How to use (every rank of the world, in the same order):
//   GradSync sync(plan, AggregationMode::Block, world, state.layout());  // creates the groups
//   sync.set_order(program_blocks);  // optional: the program's ReduceGradients this rank joins
//   ... backward of every micro-batch ...
//   sync.start(state.grads());   // queues every collective of the order not yet queued
//   sync.finish(state.grads());  // waits (and unpacks what was packed)
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "comm/allreduce_queue.h"
#include "comm/communicator.h"
#include "plan/blocks.h"
#include "plan/plan.h"
#include "runtime/device_memory_policy.h"
#include "runtime/grad_layout.h"
#include "runtime/trace_recorder.h"
#include "train/model_state.h"

namespace eth {

class GradSync {
 public:
  // Collective over `world`: creates one communicator per distinct holder group this rank is
  // in, in the global collective order. `layout` is this rank's (plan.device_ids()[rank]);
  // `tp_comm` its stage replica's tp group (null at tp 1), over which finish() broadcasts the
  // replicated tensors' sums from tp rank 0. `memory` is where the gradient buffer lives (the
  // model state's device): the packing buffers and the padding go there too, and `world` then
  // carries buffers of that memory.
  GradSync(const Plan& plan, AggregationMode mode, const Communicator& world,
           const ParamLayout& layout, const Communicator& tp_comm = Communicator(),
           const RuntimeMemory& memory = runtime_memory(ComputeDevice::Cpu));

  AggregationMode mode() const { return mode_; }
  // eth train --trace: records each collective's post and wait (null: off).
  void set_trace(TraceRecorder* trace) { trace_ = trace; }
  // Whether this rank joins collective `index` (the global order, groups of one left out).
  bool joins(std::int64_t index) const;
  // The collectives to run each step and their order: indices as joins() takes them, each one
  // this rank joins, ascending (the schedule validator's rule), as the rank's program lists its
  // ReduceGradients. Default: every collective the rank joins.
  void set_order(const std::vector<std::int64_t>& indices);
  // Queues, in the order (set_order), every not yet queued collective whose units this rank has
  // finished: those whose lowest unit held here is >= `lowest_done_unit` (backward runs from
  // the last unit down, so a block is final once the last micro-batch's backward has passed its
  // lowest unit). Stops at the first collective not ready, so every rank keeps the one order.
  // Then posts queued pieces while the window (CommOptions::window_bytes) has room and retires
  // completed ones. Call it as the last backward passes each unit to overlap aggregation with
  // the rest of it. `grads` is the buffer the sums land in (in place) for the whole step.
  void start_ready(float* grads, std::int64_t lowest_done_unit);
  // Tests the pieces in flight and posts queued ones the window has room for; never blocks.
  // True while pieces remain. Emulation calls it while an op sleeps out its stretch, as a
  // device's collective engine keeps going while the device computes.
  bool progress() { return !queue_.progress(); }
  // Queues every remaining collective (all gradients final).
  void start(float* grads);
  // Queues, in the order, every remaining collective up to and including `index` (a
  // ReduceGradients action: the latest its collective may be posted; all gradients final).
  void start_through(float* grads, std::int64_t index);
  // The collectives queued in the last (or the running) step, in the order they were queued.
  const std::vector<std::int64_t>& queued_log() const { return log_; }
  // Waits for the queued collectives, posting the rest through the window (unpacking packed
  // ones into `grads`); then, under tp, the representative's replicated sums overwrite the
  // other tp ranks' (one broadcast per segment).
  void finish(float* grads);
  // The most bytes of collective pieces this rank had in flight at once (<= the window, or one
  // chunk when the window is smaller): what the MPI temporaries of the window peaked at.
  std::size_t peak_bytes_in_flight() const { return queue_.peak_bytes_in_flight(); }

  // Per step, for this rank: collectives it joins (groups of two or more) and bytes it feeds.
  std::int64_t collectives() const { return static_cast<std::int64_t>(jobs_.size()); }
  double bytes() const;
  std::int64_t communicators() const { return communicators_; }
  // Bytes this rank copies or fills per step outside the collectives: packing, padding and
  // unpacking of collectives and broadcasts that are not one range of the layout, and the zero
  // padding of an in-place device-wise buffer. 0 for block- and tensor-wise with plan_layout.
  double bytes_copied() const;
  // Bytes of the packing buffers this rank allocated (collectives and broadcasts not in
  // place); 0 where every one is a range of the layout.
  double buffer_bytes() const;

 private:
  // One collective (or broadcast): its runs of the gradient buffer, reduced in place when they
  // are one run, else packed into `buffer`.
  struct Job {
    std::int64_t index = 0;        // in the global order, groups of one left out (the sim's)
    std::int64_t lowest_unit = 0;  // of the pieces this rank feeds (device-wise: its range)
    Communicator comm;
    std::vector<PackRun> runs;
    const RuntimeMemory* memory = nullptr;  // of the gradients and `buffer`
    RuntimeBuffer buffer;  // empty when in place
    std::vector<PackRun> gaps;  // in place device-wise: padding zeroed before the collective
    std::size_t queued = 0;  // its index in queue_ this step
    bool in_place() const { return runs.size() == 1 && runs.front().offset >= 0; }
    std::int64_t elements() const;
    std::span<float> data(float* grads);  // packs first unless in place
    void unpack(float* grads) const;      // after the collective, unless in place
  };
  static Job make_job(std::vector<PackRun> runs, const RuntimeMemory& memory);
  void queue_next(float* grads);  // queues order_[next_] and moves on

  AggregationMode mode_;
  const RuntimeMemory* memory_;
  Communicator tp_comm_;
  std::vector<Job> broadcasts_;  // replicated pieces, from tp rank 0 (tp > 1)
  std::vector<Job> jobs_;
  std::vector<std::size_t> order_;  // positions in jobs_ this step runs, in the program's order
  std::size_t next_ = 0;  // first entry of order_ not queued yet
  std::vector<std::int64_t> log_;  // indices queued this step
  AllreduceQueue queue_;  // posts the jobs' pieces, at most window_bytes in flight
  std::int64_t communicators_ = 0;
  TraceRecorder* trace_ = nullptr;
};

}  // namespace eth
