// What a kernel set provides, as C++20 concepts: StageCompute<K> static_asserts KernelSet<K>,
// the optimizer and the model state TrainingKernelSet<K>, so a set missing an entry (or with an
// entry of the wrong signature) is one error naming the requirement, not a cascade from deep in
// the stage code. The sets: CpuKernels, RefKernels<R> (kernel_set.h), CpuBf16Kernels
// (kernel_set_bf16.h), GpuKernels<Api> (gpu_kernels.h).
//
// A set provides
//   - element types Act, Param, Grad, Stat, Acc (kernel_set.h);
//   - memory (memory.h): Arena (constructible from bytes, take<T>(n)), host_visible, and zero /
//     copy / upload / download / synchronize / dropout_mask_fill;
//   - Attention, constructible from AttentionDims, with Saved, place(placer),
//     place_workspace(carver), forward, recompute and backward (attention_unfused.h,
//     attention_fused.h), and the kernels its own attention type needs
//     (UnfusedAttentionKernels, FusedAttentionKernels: checked by those types);
//   - every kernel the stage calls, with its signature (the requires-expressions below: outputs
//     first, then inputs, then dims, kernels/README.md);
//   - training sets also the optimizer's entries: adamw_update, sum_squares, convert_to_bf16.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/cpu/optimizer.h"
#include "kernels/grad_rows.h"
#include "kernels/rng.h"
#include "model/recompute.h"
#include "train/carver.h"

namespace eth {

template <class K>
concept KernelElementTypes = requires {
  typename K::Act;
  typename K::Param;
  typename K::Grad;
  typename K::Stat;
  typename K::Acc;
};

template <class K>
concept KernelSetMemory =
    KernelElementTypes<K> && std::constructible_from<typename K::Arena, std::size_t> &&
    std::movable<typename K::Arena> &&
    requires(typename K::Arena& arena, typename K::Act* r, const typename K::Act* cr,
             typename K::Grad* g, double* d, const double* cd, std::int32_t* tok,
             const std::int32_t* ctok, std::uint8_t* mask, const RngStream& rs, float p,
             std::int64_t n) {
      { K::host_visible } -> std::convertible_to<bool>;
      { arena.template take<typename K::Act>(n) } -> std::same_as<typename K::Act*>;
      { arena.capacity() } -> std::convertible_to<std::size_t>;
      K::zero(r, n);
      K::zero(g, n);
      K::zero(d, n);
      K::copy(r, cr, n);
      K::upload(tok, ctok, n);
      K::download(d, cd, n);
      K::synchronize();
      K::dropout_mask_fill(mask, rs, p, n, n, n, n);
    };

template <class K>
concept KernelSetKernels =
    KernelElementTypes<K> &&
    requires(typename K::Act* r, const typename K::Act* cr, const typename K::Param* w,
             typename K::Grad* g, typename K::Stat* s, const typename K::Stat* cs,
             typename K::Acc* acc, const typename K::Acc* cacc, const std::int32_t* tok,
             const GradRows<typename K::Grad>* rows, const std::uint8_t* mask, double* loss,
             double scale, float p, std::int64_t n) {
      // embedding
      K::encoder_forward(r, tok, w, w, n, n, n, n);
      K::encoder_backward(g, g, cr, tok, n, n, n, n);
      // layer norm
      K::layernorm_forward(r, s, s, cr, w, w, n, n);
      K::layernorm_backward(r, g, g, cr, cr, w, cs, cs, n, n);
      // matmuls (weight gradients +=), whole or in the layout's row chunks
      K::matmul_nt_forward(r, cr, w, w, n, n, n);
      K::matmul_nt_backward(r, g, g, cr, cr, w, n, n, n);
      K::matmul_nn_forward(r, cr, w, w, n, n, n);
      K::matmul_nn_backward(r, g, g, cr, cr, w, n, n, n);
      K::matmul_nt_backward_rows(r, rows, n, cr, cr, w, n, n, n);
      K::matmul_nn_backward_rows(r, rows, n, g, cr, cr, w, n, n, n);
      // point-wise
      K::gelu_forward(r, cr, n);
      K::gelu_backward(r, cr, cr, n);
      K::residual_forward(r, cr, cr, n);
      K::residual_backward(r, r, cr, n);
      K::dropout_forward(r, cr, mask, p, n);
      K::dropout_backward(r, cr, mask, p, n);
      // the loss, added to a scalar in the set's memory
      K::crossentropy_forward_add(loss, s, s, cr, tok, scale, n, n);
      K::crossentropy_backward(r, cr, cs, tok, scale, n, n);
      // tensor parallelism: partial sums in Acc, the vocabulary-parallel embedding and loss
      K::matmul_nn_forward_partial(acc, cr, w, w, n, n, n);
      K::matmul_nt_backward_partial(acc, g, g, cr, cr, w, n, n, n);
      K::matmul_nt_backward_partial_rows(acc, rows, n, cr, cr, w, n, n, n);
      K::store_partial(r, cacc, n);
      K::vocab_embedding_forward(acc, tok, w, n, n, n, n, n);
      K::vocab_embedding_backward(g, cr, tok, n, n, n, n);
      K::position_forward(r, cacc, w, n, n, n);
      K::position_backward(g, cr, n, n, n);
      K::vocab_ce_max(s, cr, n, n);
      K::vocab_ce_sums(s, cr, cs, tok, n, n, n);
      K::vocab_ce_finish_add(loss, s, s, cs, cs, scale, n);
      K::vocab_ce_backward(r, cr, cs, tok, n, scale, n, n);
    };

template <class K>
concept KernelSetAttention = requires(typename K::Attention& at, const typename K::Attention& cat,
                                      const typename K::Attention::Saved& saved,
                                      typename K::Act* r, const typename K::Act* cr,
                                      SavedPlacer<Carver<typename K::Arena>>& placer,
                                      Carver<typename K::Arena>& carver, const RecomputeSet& rc,
                                      const AttentionCall& call) {
  requires std::constructible_from<typename K::Attention, const AttentionDims&>;
  { at.place(placer) } -> std::same_as<typename K::Attention::Saved>;
  at.place_workspace(carver);
  cat.forward(saved, r, cr, call);
  cat.recompute(saved, cr, rc, call);
  cat.backward(saved, r, cr, cr, call);
};

// The Llama family's kernels (the contract of kernels/README.md): RMSNorm, rotary positions,
// SwiGLU; every set has them.
template <class K>
concept LlamaKernels =
    KernelElementTypes<K> &&
    requires(typename K::Act* r, const typename K::Act* cr, const typename K::Param* w,
             typename K::Grad* g, typename K::Stat* s, const typename K::Stat* cs, float f,
             std::int64_t n) {
      K::rmsnorm_forward(r, s, cr, w, f, n, n);
      K::rmsnorm_backward(r, g, cr, cr, w, cs, n, n);
      K::rope_forward(r, n, n, n, n, n, f);
      K::rope_backward(r, n, n, n, n, n, f);
      K::swiglu_forward(r, cr, cr, n, n);
      K::swiglu_backward(r, r, cr, cr, cr, n, n);
    };

template <class K>
concept KernelSet = KernelElementTypes<K> && KernelSetMemory<K> && KernelSetKernels<K> &&
                    KernelSetAttention<K> && LlamaKernels<K>;

// The kernels UnfusedAttention<K> calls (the CPU sets').
template <class K>
concept UnfusedAttentionKernels =
    requires(typename K::Act* r, const typename K::Act* cr, std::int64_t n) {
      K::attention_probs_forward(r, cr, n, n, n, n, n);  // ..., C, NH, NKV
      K::attention_av_forward(r, cr, cr, n, n, n, n, n);
      K::attention_av_backward(r, r, cr, cr, cr, n, n, n, n, n);
      K::attention_softmax_backward(r, cr, cr, n, n, n);
      K::attention_scores_backward(r, cr, cr, n, n, n, n, n);
    };

// The kernels FusedAttention<K> calls (kernels/cuda/kernels.h's attention pair).
template <class K>
concept FusedAttentionKernels =
    requires(typename K::Act* r, const typename K::Act* cr, typename K::Stat* s,
             const typename K::Stat* cs, const typename K::AttnDropout& drop, std::int64_t n) {
      K::attention_forward(r, s, cr, drop, n, n, n, n, n);
      K::attention_backward(r, s, cr, cs, cr, drop, n, n, n, n, n);
    };

// A set the optimizer and the model state run on (fp32 masters, moments and gradients; the
// compute copy in Param): StateBackendOf<K> (state_backend.h).
template <class K>
concept TrainingKernelSet =
    KernelSet<K> && std::same_as<typename K::Grad, float> &&
    requires(float* f, const float* cf, typename K::Param* pc, Bf16* b, std::int64_t n,
             const cpu::AdamWScalars& sc) {
      K::adamw_update(f, pc, f, f, cf, n, sc);
      { K::sum_squares(cf, n) } -> std::convertible_to<double>;
      K::convert_to_bf16(b, cf, n);
      K::zero(f, n);
      K::upload(f, cf, n);
      K::download(f, cf, n);
    };

}  // namespace eth
