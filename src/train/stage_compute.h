// Forward and backward of a contiguous unit range over one micro-batch: the code every stage of
// every plan runs (the single-process trainer is the range of all units). Unit 0 embeds tokens,
// blocks are pre-norm decoder blocks, the head computes the cross-entropy of the targets. The
// architecture is the ModelSpec's, fixed per stage: GPT-2's (layer norm, learned positions, GELU,
// biases) or the Llama family's (RMSNorm saving only rstd; no position table but rotary
// positions applied in place to q and k after the qkv product, so the saved qkv is the rotated
// one and backward rotates dqkv back before the qkv product's backward; grouped-query attention;
// the SwiGLU MLP down(silu(gate x) * up x) saving gate, up and their product; no biases; an
// untied LM head), each feature chosen on its own. Tensors are addressed by role
// (model_state.h): a role the model lacks is a null pointer.
// Operator-level recompute: the saved tensors of the operator classes in a RecomputeSet live in
// a shared workspace instead of the micro-batch's slot and are recomputed in backward by the
// same kernels from the same inputs, so gradients are bitwise identical with and without it.
// Tensor parallelism (tp > 1, DESIGN.md section 8, Megatron's layout): a rank holds its heads of
// qkv and proj, its rows of fc and fcproj, and its vocabulary rows of wte and the LM head
// (ParamLayout); it all-reduces over the tp group (TpGroup) after each row-parallel product
// (attention and MLP output, the embedding lookup) and after each column-parallel input gradient
// (qkv, fc, LM head), and computes the cross-entropy with a max and a sum all-reduce, never the
// full logits. Recomputing an operator recomputes the shard; only the full-unit recompute of a
// block (the attention output all-reduce, to rebuild the second layer norm's input) and of the
// head (the loss statistics, to rebuild lse) communicate again. Not the schedule (which
// micro-batch when) and not the communicator.
//
// How to use:
//   StageCompute<CpuKernels> sc(model, cfg);            // allocates slots + workspace once
//   state.zero_grads();
//   for each micro-batch mb: sc.forward(0, state.params(), mb, x_in, x_out);
//                            sc.backward(0, state.params(), state.grads(), mb, dx_out, dx_in);
//   loss = sc.take_loss();                              // once per step
// The backend seam: K is a kernel set (train/kernel_set_concept.h) that also owns the memory
// (every buffer comes from one K::Arena and is touched only through K's zero / copy / upload /
// download) and the attention (K::Attention: the unfused chain for the CPU sets, the fused
// kernels saving only lse for GpuKernels). The pointers passed in (params, grads, x_in, ...) are
// in K's memory; MicroBatch's tokens and targets are host arrays, uploaded by the stage.
// Precision: K fixes the element types (train/kernel_set.h, kernel_set_bf16.h): StageCompute<
// CpuBf16Kernels> reads the bf16 compute copy (state.params_bf16()), keeps bf16 activations and
// boundary tensors, and accumulates fp32 gradients; train/precision_stage.h picks one at run time.
// Dimensions: B micro-batch samples, T sequence, C hidden, NH heads, NKV key/value heads, F ffn,
// V vocabulary, N = B * T tokens; under tp a rank holds NH/tp heads, NKV/tp key/value heads
// (its qkv rows are one range: kv-group-interleaved, kernels/reference/rope.h), F/tp of the MLP
// (of gate and up, and of down's rows) and its tp_rows of V.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "model/arithmetic.h"
#include "model/model_spec.h"
#include "model/recompute.h"
#include "train/arena.h"
#include "train/model_state.h"
#include "train/tp_group.h"

namespace eth {

struct StageComputeConfig {
  std::int64_t first_unit = 0;  // inclusive
  std::int64_t last_unit = 0;   // inclusive
  std::int64_t max_micro_batch = 1;
  std::int64_t seq_len = 0;    // T, at most the model's seq_len (its position table)
  std::int64_t num_slots = 1;  // micro-batches whose activations may be held at once
  RecomputeSet recompute;      // applies to every unit of the range
  float dropout = 0;           // embedding, attention and residual dropout probability
  std::uint64_t seed = 0;      // dropout masks: keyed by (seed, step, sample, unit, operator)
  std::int64_t tp = 1;         // tensor-parallel degree of the stage (divides heads and ffn)
  std::int64_t tp_rank = 0;    // this rank's place in the tp group: heads, rows, vocabulary
  // The parameter and gradient layout of the range (its units, tp and tp rank; copied): the
  // distributed runtime's placed one (runtime/grad_layout.h). Null: the unit-major layout.
  const ParamLayout* layout = nullptr;
  // Tracing (eth train --trace): called before (false) and after (true) each block's recompute
  // in backward. Empty: not called.
  std::function<void(std::int64_t unit, bool done)> on_recompute;
};

struct MicroBatch {
  std::int64_t step = 0;                  // optimizer step (keys dropout masks)
  std::int64_t first_sample = 0;          // global index of this micro-batch's first sample
  std::int64_t size = 0;                  // B, 1..max_micro_batch
  const std::int32_t* tokens = nullptr;   // (B,T), needed when the range holds unit 0
  const std::int32_t* targets = nullptr;  // (B,T), needed when the range holds the head
  // The head's loss is loss_scale * (sum of token losses); the trainer passes
  // 1 / (global batch * T) so micro-batch losses and gradients add up to the global mean.
  double loss_scale = 1;
};

template <class K>
class StageCompute {
 public:
  using Kernels = K;
  using Act = typename K::Act;      // activations, their gradients, x_in/x_out, dx_in/dx_out
  using Param = typename K::Param;  // the weights the kernels read
  using Grad = typename K::Grad;    // parameter gradients

  // `tp_group` joins the tp ranks of the stage; required (of size cfg.tp) when cfg.tp > 1, and
  // it must outlive this object. Every tp rank runs the same calls in the same order.
  StageCompute(const ModelSpec& model, const StageComputeConfig& cfg,
               TpGroup* tp_group = nullptr);
  ~StageCompute();
  StageCompute(const StageCompute&) = delete;
  StageCompute& operator=(const StageCompute&) = delete;

  const StageComputeConfig& config() const { return cfg_; }
  const ParamLayout& layout() const { return layout_; }

  // Runs the range forward for `mb` and keeps what backward needs in slot `slot`.
  //   params: the range's parameter buffer (layout()), x_in (B,T,C) unless the range starts
  //   at unit 0, x_out (B,T,C) unless it ends with the head (then pass nullptr). Under tp,
  //   x_in and x_out are whole (every tp rank holds the same activations between units).
  // Adds the head's scaled loss to the stage's loss scalar (in K's memory; nothing without a
  // head), read by take_loss().
  void forward(int slot, const Param* params, const MicroBatch& mb, const Act* x_in, Act* x_out);
  // The sum of the head's scaled losses of the forwards since the last call (0 without a head),
  // added in forward order, and resets it: one read per step (on a device, one transfer). Every
  // tp rank has the same value, so callers count one rank's.
  double take_loss();
  // Backward of the micro-batch held in `slot` (the same `mb` as its forward).
  //   grads += (parameter gradients accumulate over micro-batches), dx_out (B,T,C) unless the
  //   range ends with the head, dx_in (B,T,C) written (=) unless the range starts at unit 0.
  // `unit_done(u)`, when given, runs as soon as unit u's parameter gradients of this micro-batch
  // are accumulated (units go from last to first): the runtime starts gradient all-reduces there.
  void backward(int slot, const Param* params, Grad* grads, const MicroBatch& mb, const Act* dx_out,
                Act* dx_in, const std::function<void(std::int64_t)>& unit_done = {});

  // Activation bytes of unit u per micro-batch of max_micro_batch samples, per operator class,
  // when nothing is recomputed (the profile's convention: held(rc) is what a recompute set
  // keeps). Measured from the buffers this class allocates, in K's element types.
  const ActivationBytes& activation_bytes(std::int64_t u) const;
  // Bytes one slot actually holds under the configured recompute set (exact buffer sizes,
  // alignment padding excluded); equals the sum over units of activation_bytes(u).held(rc).
  double held_bytes_per_slot() const { return slot_bytes_; }
  std::size_t arena_bytes_total() const { return arena_.capacity(); }
  // The arena bytes StageCompute(model, cfg) would map, from the same sizing pass, without
  // allocating anything (callers check memory before committing to a size).
  static std::size_t planned_arena_bytes(const ModelSpec& model, const StageComputeConfig& cfg);

  struct Impl;  // buffer tables and the per-kind code (stage_compute.cpp)

 private:
  ModelSpec model_;
  StageComputeConfig cfg_;
  TpGroup* tp_group_ = nullptr;
  ParamLayout layout_;
  typename K::Arena arena_;  // every buffer the memory model counts
  typename K::Arena io_;     // the loss scalars (and a device copy of the targets)
  double slot_bytes_ = 0;
  std::vector<ActivationBytes> bytes_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace eth
