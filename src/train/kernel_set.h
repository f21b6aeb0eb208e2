// Two of the three kernel sets the stage computation is instantiated with: the fast fp32 CPU
// kernels (training) and the naive reference kernels in double (the whole-model finite-difference
// test); the third, bf16 mixed precision, is kernel_set_bf16.h. Each is a struct of function
// pointers and element types; the stage code calls K::name(...), so every set runs the very same
// forward/backward/recompute sequence. Not a dispatch layer.
//
// Element types (StageCompute's buffers): Act (activations and their gradients), Param (the
// weights the kernels read), Grad (parameter gradients), Stat (layer-norm mean/rstd, lse,
// losses) and Acc (a tp rank's partial sums, all-reduced over the tp group). These two sets use
// one type for all five.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/crossentropy.h"
#include "kernels/cpu/encoder.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/pointwise.h"
#include "kernels/cpu/vocab_parallel.h"
#include "kernels/reference/attention.h"
#include "kernels/reference/crossentropy.h"
#include "kernels/reference/encoder.h"
#include "kernels/reference/layernorm.h"
#include "kernels/reference/matmul.h"
#include "kernels/reference/pointwise.h"
#include "kernels/reference/vocab_parallel.h"

namespace eth {

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

struct CpuKernels : SameTypePartials<float> {
  using Real = float;
  using Act = float;
  using Param = float;
  using Grad = float;
  using Stat = float;
  using Acc = float;
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
  // P = softmax of the scaled causal scores (scores, then softmax in place).
  static void attention_probs_forward(float* P, const float* qkv, std::int64_t B, std::int64_t T,
                                      std::int64_t C, std::int64_t NH) {
    cpu::attention_scores_forward(P, qkv, B, T, C, NH);
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
  static constexpr auto crossentropy_forward = &cpu::crossentropy_forward;
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
  static constexpr auto vocab_ce_finish = &cpu::vocab_ce_finish;
  static constexpr auto vocab_ce_backward = &cpu::vocab_ce_backward;
};

template <typename R>
struct RefKernels : SameTypePartials<R> {
  using Real = R;
  using Act = R;
  using Param = R;
  using Grad = R;
  using Stat = R;
  using Acc = R;
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
                                      std::int64_t C, std::int64_t NH) {
    ref::attention_scores_forward<R>(P, qkv, B, T, C, NH);
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
  static constexpr auto crossentropy_forward = &ref::crossentropy_forward<R>;
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
  static constexpr auto vocab_ce_finish = &ref::vocab_ce_finish<R>;
  static constexpr auto vocab_ce_backward = &ref::vocab_ce_backward<R>;
};

}  // namespace eth
