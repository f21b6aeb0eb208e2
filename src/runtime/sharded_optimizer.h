// The optimizer state sharded across each gradient block's holders (issue 28; plan/sharding.h
// holds the shares). For every block-wise gradient block a rank holds, it keeps the fp32 masters
// and Adam moments of its shard only (ModelState with OptimizerShard), steps AdamW on that shard,
// and all-gathers the updated compute weights (fp32, or the bf16 compute copy) from the other
// holders. Block-wise aggregation reduce-scatters each block's gradient over its holders (a ring
// over point-to-point messages of any communicator backend) instead of all-reducing it;
// tensor- and device-wise aggregation still all-reduce (GradSync) and each holder reads its shard
// of the sums. The gradient norm adds each holder's shards, so each element counts once.
// Checkpoints stay plan-independent: gather_whole joins every holder's shards into whole tensors
// on rank 0, the single-process format; take_whole shards a whole state after a load.
// Tensor parallelism is not sharded yet: check_sharding_runnable refuses tp > 1 stages.
//
// How to use (every rank, after GradSync's groups):
//   ModelState state(model, layout, precision, OptimizerShard{shard_numel(plan, device)});
//   ShardedOptimizer opt(plan, mode, world, state.layout());   // collective: its ring groups
//   opt.init(state, seed);                                     // or take_whole after a load
//   per step: backward; mode block ? opt.reduce_scatter(grads) : GradSync all-reduce;
//             norm^2 = allreduce(opt.sum_squares(state)); opt.update(...); opt.all_gather(state)
#pragma once

#include <cstdint>
#include <string>
#include <optional>
#include <vector>

#include "comm/communicator.h"
#include "plan/blocks.h"
#include "plan/plan.h"
#include "runtime/grad_layout.h"
#include "train/model_state.h"
#include "train/optimizer.h"

namespace eth {

// Throws InputError("plan", source, "optimizer_sharding", ...) when the runtime cannot shard this
// plan (a stage of tp > 1); nothing when sharding is none.
void check_sharding_runnable(const Plan& plan, const std::string& source);

// Elements of the optimizer state `device` keeps: the sum of its shares of the blocks it holds
// (plan/sharding.h shard_elements, which the predictor charges).
std::int64_t shard_numel(const Plan& plan, std::int64_t device);

// A run of a rank's shard: `count` elements contiguous in the whole weights (param_offset, the
// fp32 params or the bf16 copy), the gradient buffer (grad_offset) and the shard buffers
// (shard_offset: Adam moments, bf16 masters), one decay flag.
struct ShardRun {
  std::int64_t param_offset = 0, grad_offset = 0, shard_offset = 0, count = 0;
  bool decay = false;
};

class ShardedOptimizer {
 public:
  // Collective over the holders of each block this rank holds (a group per block of two or
  // more holders, created in the global block order). `layout` is this rank's plan_layout for
  // `mode`; each block must be one range of its gradients and of its parameters (tp 1).
  ShardedOptimizer(const Plan& plan, AggregationMode mode, const Communicator& world,
                   const ParamLayout& layout);

  // Whether the gradient is reduce-scattered here (block-wise) rather than by GradSync.
  bool reduces_gradients() const { return mode_ == AggregationMode::Block; }
  // Block-wise: sums each block's gradient over its holders, leaving the sum of this rank's
  // shard in place (the other elements of the range hold partial sums afterwards).
  void reduce_scatter(float* grads);
  // The same for one block: `collective` numbers the blocks of two or more holders in the global
  // order (a ReduceGradients action's block). Nothing when this rank holds no such block.
  void reduce_scatter_block(float* grads, std::int64_t collective);
  bool joins(std::int64_t collective) const;
  // Sum of squares of this rank's shards of the reduced gradients, blocks in the global order.
  double sum_squares(const ModelState& state) const;
  // AdamW on the shard (the same arithmetic as adamw_update, element for element), then every
  // holder's updated compute weights to every holder.
  void update(ModelState& state, const AdamWConfig& cfg, double lr, std::int64_t step,
              double grad_scale);
  void all_gather(ModelState& state);

  // A fresh start: every element of the rank's units initialized as ModelState::init would,
  // the shard's masters taken from them, moments and gradients zeroed. Host-visible sets only.
  void init(ModelState& state, std::uint64_t seed) const;
  // The weights and the shard's masters and moments from `whole`: an unsharded state of the same
  // layout (loaded from a checkpoint).
  void take_whole(ModelState& state, const ModelState& whole) const;
  // Collective: the whole model on rank 0 (tp 1, every unit; with `moments` the Adam moments),
  // every holder sending its shards; compute copy refreshed. nullopt elsewhere.
  std::optional<ModelState> gather_whole(const ModelState& state, bool moments,
                                         Precision precision) const;

  const std::vector<ShardRun>& runs() const { return runs_; }
  // Bytes of the ring's receive buffer, block-wise only: the largest share of a block of two or
  // more holders this rank is in (largest_shard_of_groups, what the predictor charges).
  double buffer_bytes() const { return static_cast<double>(scratch_.size()) * sizeof(float); }

 private:
  struct Slot {
    std::int64_t index = 0;          // block index in the global block-wise order
    std::int64_t collective = -1;    // among blocks of two or more holders (-1: one holder)
    Communicator comm;               // the block's holders (null with one holder)
    int me = 0;                      // this rank's index among the holders
    std::vector<std::int64_t> counts, offsets;  // each holder's share, its first element
    std::int64_t grad_offset = 0, param_offset = 0;  // the block's first element here
    std::int64_t shard_offset = 0;  // this rank's shard in the shard buffers
    std::size_t run_begin = 0, run_end = 0;  // its ShardRuns in runs_
    std::int64_t elements() const { return offsets.back() + counts.back(); }
  };
  Plan plan_;
  AggregationMode mode_;
  Communicator world_;
  std::int64_t device_ = 0;
  std::vector<Slot> slots_;
  std::vector<ShardRun> runs_;  // this rank's shard, slot by slot
  std::vector<float> scratch_;
  void ring_reduce_scatter(Slot& slot, float* grads);
};

}  // namespace eth
