// Two of the three kernel sets the stage computation is instantiated with: the fast fp32 CPU
// kernels (training) and the naive reference kernels in double (the whole-model finite-difference
// test); the third, bf16 mixed precision, is kernel_set_bf16.h. Each is a struct of function
// pointers and element types; the stage code calls K::name(...), so every set runs the very same
// forward/backward/recompute sequence. Not a dispatch layer.
//
// Element types (StageCompute's buffers): Act (activations and their gradients), Param (the
// weights the kernels read), Grad (parameter gradients), Stat (layer-norm mean/rstd, lse,
// losses) and Acc (a tp rank's partial sums, all-reduced over the tp group). These two sets use
// one type for all five. Besides the kernels a set provides its memory (train/memory.h: the
// arena type, zero / copy / upload / download / dropout_mask_fill), its attention type
// (attention_unfused.h here), the head's loss added to a scalar in its memory
// (crossentropy_forward_add, vocab_ce_finish_add) and, for the training sets, the optimizer's
// entries (adamw_update, sum_squares, convert_to_bf16). train/kernel_set_concept.h states all
// of it as the concept KernelSet.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/bf16/convert.h"
#include "kernels/cpu/optimizer.h"
#include "kernels/cpu/crossentropy.h"
#include "kernels/cpu/encoder.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/pointwise.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/swiglu.h"
#include "kernels/cpu/vocab_parallel.h"
#include "kernels/reference/attention.h"
#include "kernels/reference/crossentropy.h"
#include "kernels/reference/encoder.h"
#include "kernels/reference/layernorm.h"
#include "kernels/reference/matmul.h"
#include "kernels/reference/pointwise.h"
#include "kernels/reference/rmsnorm.h"
#include "kernels/reference/rope.h"
#include "kernels/reference/swiglu.h"
#include "kernels/reference/vocab_parallel.h"
#include "train/attention_unfused.h"
#include "train/memory.h"

namespace eth {

// *loss += the loss a host kernel `forward` writes (its `double* loss` first argument): the CPU
// sets' head loss accumulated in plain memory, added in the order a trainer summing the
// micro-batches' losses on the host adds them, so the sums are bitwise those of before.
template <typename F, typename... Args>
void add_host_loss(double* loss, F forward, Args... args) {
  double l = 0;
  forward(&l, args...);
  *loss += l;
}

// The tp entries shared by the single-type sets: a partial sum is the activation buffer itself
// (Acc is Act), so the row-parallel product and the column-parallel input gradient are the
// ordinary kernels and storing the group's sum is nothing to do.
template <typename R>
struct SameTypePartials {
  // out = the group's sum (already in place when out == sum).
  static void store_partial(R* out, const R* sum, std::int64_t n) {
    if (out != sum) std::copy(sum, sum + n, out);
  }
};

struct CpuKernels : SameTypePartials<float>, HostMemory {
  using Real = float;
  using Act = float;
  using Param = float;
  using Grad = float;
  using Stat = float;
  using Acc = float;
  using Memory = HostMemory;
  using Attention = UnfusedAttention<CpuKernels>;
  static constexpr auto encoder_forward = &cpu::encoder_forward;
  static constexpr auto encoder_backward = &cpu::encoder_backward;
  static constexpr auto layernorm_forward = &cpu::layernorm_forward;
  static constexpr auto layernorm_backward = &cpu::layernorm_backward;
  static constexpr auto matmul_nt_forward = &cpu::matmul_nt_forward;
  static constexpr auto matmul_nt_backward = &cpu::matmul_nt_backward;
  static constexpr auto matmul_nn_forward = &cpu::matmul_nn_forward;
  static constexpr auto matmul_nn_backward = &cpu::matmul_nn_backward;
  // Weight gradients cut into row chunks stored apart (placed gradient layouts).
  static constexpr auto matmul_nt_backward_rows = &cpu::matmul_nt_backward_rows;
  static constexpr auto matmul_nn_backward_rows = &cpu::matmul_nn_backward_rows;
  // P = softmax of the scaled causal scores (scores, then softmax in place). The attention
  // kernels take the query heads NH and the key/value heads NKV (grouped-query attention;
  // NKV == NH is multi-head).
  static void attention_probs_forward(float* P, const float* qkv, std::int64_t B, std::int64_t T,
                                      std::int64_t C, std::int64_t NH, std::int64_t NKV) {
    cpu::attention_scores_forward(P, qkv, B, T, C, NH, NKV);
    cpu::attention_softmax_forward(P, P, B, NH, T);
  }
  static constexpr auto attention_scores_backward = &cpu::attention_scores_backward;
  static constexpr auto attention_softmax_backward = &cpu::attention_softmax_backward;
  static constexpr auto attention_av_forward = &cpu::attention_av_forward;
  static constexpr auto attention_av_backward = &cpu::attention_av_backward;
  static constexpr auto gelu_forward = &cpu::gelu_forward;
  static constexpr auto gelu_backward = &cpu::gelu_backward;
  static constexpr auto residual_forward = &cpu::residual_forward;
  static constexpr auto residual_backward = &cpu::residual_backward;
  static constexpr auto dropout_forward = &cpu::dropout_forward;
  static constexpr auto dropout_backward = &cpu::dropout_backward;
  // The Llama family's (kernels/README.md): RMSNorm, rotary positions, SwiGLU.
  static constexpr auto rmsnorm_forward = &cpu::rmsnorm_forward;
  static constexpr auto rmsnorm_backward = &cpu::rmsnorm_backward;
  static constexpr auto rope_forward = &cpu::rope_forward;
  static constexpr auto rope_backward = &cpu::rope_backward;
  static constexpr auto swiglu_forward = &cpu::swiglu_forward;
  static constexpr auto swiglu_backward = &cpu::swiglu_backward;
  static void crossentropy_forward_add(double* loss, float* losses, float* lse,
                                       const float* logits, const std::int32_t* targets,
                                       double scale, std::int64_t N, std::int64_t V) {
    add_host_loss(loss, &cpu::crossentropy_forward, losses, lse, logits, targets, scale, N, V);
  }
  static constexpr auto crossentropy_backward = &cpu::crossentropy_backward;
  // tp > 1 stages: partial sums and the vocabulary-parallel embedding and loss.
  static constexpr auto matmul_nn_forward_partial = &cpu::matmul_nn_forward;
  static constexpr auto matmul_nt_backward_partial = &cpu::matmul_nt_backward;
  static constexpr auto matmul_nt_backward_partial_rows = &cpu::matmul_nt_backward_rows;
  static constexpr auto vocab_embedding_forward = &cpu::vocab_embedding_forward;
  static constexpr auto vocab_embedding_backward = &cpu::vocab_embedding_backward;
  // out = lookup + wpe (out may be the lookup itself).
  static void position_forward(float* out, const float* lookup, const float* wpe, std::int64_t B,
                               std::int64_t T, std::int64_t C) {
    store_partial(out, lookup, B * T * C);
    cpu::position_forward(out, wpe, B, T, C);
  }
  static constexpr auto position_backward = &cpu::position_backward;
  static constexpr auto vocab_ce_max = &cpu::vocab_ce_max;
  static constexpr auto vocab_ce_sums = &cpu::vocab_ce_sums;
  static void vocab_ce_finish_add(double* loss, float* losses, float* lse, const float* mx,
                                  const float* stats, double scale, std::int64_t N) {
    add_host_loss(loss, &cpu::vocab_ce_finish, losses, lse, mx, stats, scale, N);
  }
  static constexpr auto vocab_ce_backward = &cpu::vocab_ce_backward;

  // The optimizer: fp32 parameters are what the kernels read (`compute` is `master` itself).
  static void adamw_update(float* master, float* /*compute*/, float* m, float* v,
                           const float* grads, std::int64_t n, const cpu::AdamWScalars& s) {
    cpu::adamw_update(master, m, v, grads, n, s);
  }
  static constexpr auto sum_squares = &cpu::sum_squares;
  static void convert_to_bf16(Bf16* out, const float* in, std::int64_t n) {
    cpu::bf16::convert_to_bf16(out, in, n);
  }
};

template <typename R>
struct RefKernels : SameTypePartials<R>, HostMemory {
  using Real = R;
  using Act = R;
  using Param = R;
  using Grad = R;
  using Stat = R;
  using Acc = R;
  using Memory = HostMemory;
  using Attention = UnfusedAttention<RefKernels<R>>;
  static constexpr auto encoder_forward = &ref::encoder_forward<R>;
  static constexpr auto encoder_backward = &ref::encoder_backward<R>;
  static constexpr auto layernorm_forward = &ref::layernorm_forward<R>;
  static constexpr auto layernorm_backward = &ref::layernorm_backward<R>;
  static constexpr auto matmul_nt_forward = &ref::matmul_nt_forward<R>;
  static constexpr auto matmul_nt_backward = &ref::matmul_nt_backward<R>;
  static constexpr auto matmul_nn_forward = &ref::matmul_nn_forward<R>;
  static constexpr auto matmul_nn_backward = &ref::matmul_nn_backward<R>;
  static constexpr auto matmul_nt_backward_rows = &ref::matmul_nt_backward_rows<R>;
  static constexpr auto matmul_nn_backward_rows = &ref::matmul_nn_backward_rows<R>;
  static void attention_probs_forward(R* P, const R* qkv, std::int64_t B, std::int64_t T,
                                      std::int64_t C, std::int64_t NH, std::int64_t NKV) {
    ref::attention_scores_forward<R>(P, qkv, B, T, C, NH, NKV);
    ref::attention_softmax_forward<R>(P, P, B, NH, T);
  }
  static constexpr auto attention_scores_backward = &ref::attention_scores_backward<R>;
  static constexpr auto attention_softmax_backward = &ref::attention_softmax_backward<R>;
  static constexpr auto attention_av_forward = &ref::attention_av_forward<R>;
  static constexpr auto attention_av_backward = &ref::attention_av_backward<R>;
  static constexpr auto gelu_forward = &ref::gelu_forward<R>;
  static constexpr auto gelu_backward = &ref::gelu_backward<R>;
  static constexpr auto residual_forward = &ref::residual_forward<R>;
  static constexpr auto residual_backward = &ref::residual_backward<R>;
  static constexpr auto dropout_forward = &ref::dropout_forward<R>;
  static constexpr auto dropout_backward = &ref::dropout_backward<R>;
  static constexpr auto rmsnorm_forward = &ref::rmsnorm_forward<R>;
  static constexpr auto rmsnorm_backward = &ref::rmsnorm_backward<R>;
  static constexpr auto rope_forward = &ref::rope_forward<R>;
  static constexpr auto rope_backward = &ref::rope_backward<R>;
  static constexpr auto swiglu_forward = &ref::swiglu_forward<R>;
  static constexpr auto swiglu_backward = &ref::swiglu_backward<R>;
  static void crossentropy_forward_add(double* loss, R* losses, R* lse, const R* logits,
                                       const std::int32_t* targets, double scale, std::int64_t N,
                                       std::int64_t V) {
    add_host_loss(loss, &ref::crossentropy_forward<R>, losses, lse, logits, targets, scale, N, V);
  }
  static constexpr auto crossentropy_backward = &ref::crossentropy_backward<R>;
  static constexpr auto matmul_nn_forward_partial = &ref::matmul_nn_forward<R>;
  static constexpr auto matmul_nt_backward_partial = &ref::matmul_nt_backward<R>;
  static constexpr auto matmul_nt_backward_partial_rows = &ref::matmul_nt_backward_rows<R>;
  static constexpr auto vocab_embedding_forward = &ref::vocab_embedding_forward<R>;
  static constexpr auto vocab_embedding_backward = &ref::vocab_embedding_backward<R>;
  static void position_forward(R* out, const R* lookup, const R* wpe, std::int64_t B,
                               std::int64_t T, std::int64_t C) {
    SameTypePartials<R>::store_partial(out, lookup, B * T * C);
    ref::position_forward<R>(out, wpe, B, T, C);
  }
  static constexpr auto position_backward = &ref::position_backward<R>;
  static constexpr auto vocab_ce_max = &ref::vocab_ce_max<R>;
  static constexpr auto vocab_ce_sums = &ref::vocab_ce_sums<R>;
  static void vocab_ce_finish_add(double* loss, R* losses, R* lse, const R* mx, const R* stats,
                                  double scale, std::int64_t N) {
    add_host_loss(loss, &ref::vocab_ce_finish<R>, losses, lse, mx, stats, scale, N);
  }
  static constexpr auto vocab_ce_backward = &ref::vocab_ce_backward<R>;
};

}  // namespace eth
