// The mixed-precision kernel set, in the style of kernel_set.h: bf16 activations and weight
// copies, fp32 parameter gradients, statistics, master weights and AdamW moments
// (kernels/README.md, "Precision"). StageCompute<CpuBf16Kernels> runs the same kernel sequence
// as the fp32 set over these element types:
//   - Act (bf16): saved activations, workspace gradients, x_in/x_out and dx_in/dx_out;
//   - Param (bf16): the compute copy of the fp32 masters (ModelState::params_bf16);
//   - Grad (fp32): parameter gradients, accumulated over micro-batches and all-reduced in fp32;
//   - Stat (fp32): layer-norm mean and rstd, cross-entropy lse and losses;
//   - Acc (fp32): a tp rank's partial sums (row-parallel products, column-parallel input
//     gradients, the vocabulary-parallel lookup), all-reduced over the tp group in fp32 and
//     rounded once by store_partial: a tp stage rounds where one process rounds.
#pragma once

#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/cpu/bf16/attention.h"
#include "kernels/cpu/bf16/convert.h"
#include "kernels/cpu/bf16/crossentropy.h"
#include "kernels/cpu/bf16/encoder.h"
#include "kernels/cpu/bf16/layernorm.h"
#include "kernels/cpu/bf16/matmul.h"
#include "kernels/cpu/bf16/optimizer.h"
#include "kernels/cpu/bf16/pointwise.h"
#include "kernels/cpu/bf16/rmsnorm.h"
#include "kernels/cpu/bf16/rope.h"
#include "kernels/cpu/bf16/swiglu.h"
#include "kernels/cpu/bf16/vocab_parallel.h"
#include "kernels/cpu/optimizer.h"
#include "kernels/cpu/vocab_parallel.h"
#include "train/attention_unfused.h"
#include "train/kernel_set.h"
#include "train/memory.h"

namespace eth {

struct CpuBf16Kernels : HostMemory {
  using Act = Bf16;    // every activation and activation gradient
  using Param = Bf16;  // the weights the kernels read: the compute copy of the fp32 masters
  using Grad = float;  // parameter gradients: accumulated over micro-batches, reduced in fp32
  using Stat = float;  // layer-norm mean and rstd, cross-entropy lse and losses
  using Acc = float;   // tp partial sums: all-reduced in fp32, rounded once
  using Memory = HostMemory;
  using Attention = UnfusedAttention<CpuBf16Kernels>;  // P kept, in bf16

  // Where a head's q, k, v sit in the qkv matmul's output. It must be the fp32 kernels' layout
  // (cpu/attention.h), or the two precisions would be two different models of one checkpoint;
  // test_kernels (Bf16KernelSet) checks that. Head-interleaved ([q_h; k_h; v_h] per head; under
  // grouped-query attention, per kv head its query heads, k, v), the layout tensor parallelism
  // needs (#10): a tp rank's heads are one column range.
  static cpu::bf16::QkvLayout qkv_layout(std::int64_t C, std::int64_t NH, std::int64_t NKV) {
    return cpu::bf16::QkvLayout::head_interleaved(C, NH, NKV);
  }

  static constexpr auto encoder_forward = &cpu::bf16::encoder_forward;
  static constexpr auto encoder_backward = &cpu::bf16::encoder_backward;
  static constexpr auto layernorm_forward = &cpu::bf16::layernorm_forward;
  static constexpr auto layernorm_backward = &cpu::bf16::layernorm_backward;
  static constexpr auto matmul_nt_forward = &cpu::bf16::matmul_nt_forward;
  static constexpr auto matmul_nt_backward = &cpu::bf16::matmul_nt_backward;
  static constexpr auto matmul_nn_forward = &cpu::bf16::matmul_nn_forward;
  static constexpr auto matmul_nn_backward = &cpu::bf16::matmul_nn_backward;
  static constexpr auto matmul_nt_backward_rows = &cpu::bf16::matmul_nt_backward_rows;
  static constexpr auto matmul_nn_backward_rows = &cpu::bf16::matmul_nn_backward_rows;

  // Attention with the fp32 set's signatures (the layout is implied by qkv_layout).
  static void attention_probs_forward(Bf16* P, const Bf16* qkv, std::int64_t B, std::int64_t T,
                                      std::int64_t C, std::int64_t NH, std::int64_t NKV) {
    cpu::bf16::attention_probs_forward(P, qkv, qkv_layout(C, NH, NKV), B, T, C, NH, NKV);
  }
  static constexpr auto attention_softmax_backward = &cpu::bf16::attention_softmax_backward;
  static void attention_scores_backward(Bf16* dqkv, const Bf16* dscores, const Bf16* qkv,
                                        std::int64_t B, std::int64_t T, std::int64_t C,
                                        std::int64_t NH, std::int64_t NKV) {
    cpu::bf16::attention_scores_backward(dqkv, dscores, qkv, qkv_layout(C, NH, NKV), B, T, C, NH,
                                         NKV);
  }
  static void attention_av_forward(Bf16* out, const Bf16* Pd, const Bf16* qkv, std::int64_t B,
                                   std::int64_t T, std::int64_t C, std::int64_t NH,
                                   std::int64_t NKV) {
    cpu::bf16::attention_av_forward(out, Pd, qkv, qkv_layout(C, NH, NKV), B, T, C, NH, NKV);
  }
  static void attention_av_backward(Bf16* dPd, Bf16* dqkv, const Bf16* dout, const Bf16* Pd,
                                    const Bf16* qkv, std::int64_t B, std::int64_t T,
                                    std::int64_t C, std::int64_t NH, std::int64_t NKV) {
    cpu::bf16::attention_av_backward(dPd, dqkv, dout, Pd, qkv, qkv_layout(C, NH, NKV), B, T, C,
                                     NH, NKV);
  }

  static constexpr auto gelu_forward = &cpu::bf16::gelu_forward;
  static constexpr auto gelu_backward = &cpu::bf16::gelu_backward;
  static constexpr auto residual_forward = &cpu::bf16::residual_forward;
  static constexpr auto residual_backward = &cpu::bf16::residual_backward;
  static constexpr auto dropout_forward = &cpu::bf16::dropout_forward;
  static constexpr auto dropout_backward = &cpu::bf16::dropout_backward;
  // The Llama family's: RMSNorm (fp32 rstd and weight gradient), rotary positions, SwiGLU.
  static constexpr auto rmsnorm_forward = &cpu::bf16::rmsnorm_forward;
  static constexpr auto rmsnorm_backward = &cpu::bf16::rmsnorm_backward;
  static constexpr auto rope_forward = &cpu::bf16::rope_forward;
  static constexpr auto rope_backward = &cpu::bf16::rope_backward;
  static constexpr auto swiglu_forward = &cpu::bf16::swiglu_forward;
  static constexpr auto swiglu_backward = &cpu::bf16::swiglu_backward;
  static void crossentropy_forward_add(double* loss, float* losses, float* lse,
                                       const Bf16* logits, const std::int32_t* targets,
                                       double scale, std::int64_t N, std::int64_t V) {
    add_host_loss(loss, &cpu::bf16::crossentropy_forward, losses, lse, logits, targets, scale, N,
                  V);
  }
  static constexpr auto crossentropy_backward = &cpu::bf16::crossentropy_backward;

  // tp > 1 stages: fp32 partial sums, their one rounding, the vocabulary-parallel embedding
  // and loss.
  static constexpr auto matmul_nn_forward_partial = &cpu::bf16::matmul_nn_forward_partial;
  static constexpr auto matmul_nt_backward_partial = &cpu::bf16::matmul_nt_backward_partial;
  static constexpr auto matmul_nt_backward_partial_rows =
      &cpu::bf16::matmul_nt_backward_partial_rows;
  static void store_partial(Bf16* out, const float* sum, std::int64_t n) {
    cpu::bf16::convert_to_bf16(out, sum, n);
  }
  static constexpr auto vocab_embedding_forward = &cpu::bf16::vocab_embedding_forward;
  static constexpr auto vocab_embedding_backward = &cpu::bf16::vocab_embedding_backward;
  static constexpr auto position_forward = &cpu::bf16::position_forward;
  static constexpr auto position_backward = &cpu::bf16::position_backward;
  static constexpr auto vocab_ce_max = &cpu::bf16::vocab_ce_max;
  static constexpr auto vocab_ce_sums = &cpu::bf16::vocab_ce_sums;
  static void vocab_ce_finish_add(double* loss, float* losses, float* lse, const float* mx,
                                  const float* stats, double scale, std::int64_t N) {
    add_host_loss(loss, &cpu::vocab_ce_finish, losses, lse, mx, stats, scale, N);  // fp32 stats
  }
  static constexpr auto vocab_ce_backward = &cpu::bf16::vocab_ce_backward;

  // The optimizer's fused step: fp32 masters and moments, and the compute copy in one pass.
  static constexpr auto adamw_update = &cpu::bf16::adamw_update;
  static constexpr auto sum_squares = &cpu::sum_squares;  // fp32 gradients
  static void convert_to_bf16(Bf16* out, const float* in, std::int64_t n) {
    cpu::bf16::convert_to_bf16(out, in, n);
  }
};

}  // namespace eth
