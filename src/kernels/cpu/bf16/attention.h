// bf16 causal attention with grouped key/value heads (NH query heads share NKV kv heads; NKV = 0
// or NH: multi-head): bf16 storage of qkv, P, Pd and their gradients, products through
// bf16::gemm with fp32 accumulation, softmax and its backward in fp32. Same contracts as
// cpu/attention.h except:
//   - where a head's q, k and v sit in qkv is explicit (QkvLayout), so one kernel serves the
//     [q | k | v] layout and the grouped (head-interleaved) one of tensor parallelism, and a tp
//     rank's shard (its NH local query heads, NKV local kv heads, C = NH * hs local columns);
//   - scores and softmax are one kernel, attention_probs_forward: the scores of a 64-row block
//     stay in fp32 in a per-thread tile and only P is stored, rounded once. (Rounding the
//     scores to bf16 before the softmax would cost |s| 2^-8 of absolute error in every
//     exponent.) The operator class attn_softmax always recomputes both together anyway.
// The (B,NH,T,T) inputs P, Pd and dscores must be 0 above the diagonal, as these kernels and
// dropout leave them. OpenMP over (batch, head), or (batch, kv head) where a kv head's gradient
// sums over its query heads (the first GEMM stores, the others add into the fp32 sum, which is
// rounded once); each GEMM runs on its own thread, so results do not depend on the thread count.
#pragma once

#include <cstdint>

#include "kernels/bf16.h"

namespace eth::cpu::bf16 {

// Where query head h and kv head g start in a token's row of qkv, with G = NH / NKV query heads
// per kv head: q at (h / G) * head + (h % G) * q_step, k at g * kv + k, v at g * kv + v, where
// kv = kv_head, or head when kv_head is 0; rows are `row` elements apart, hs = C / NH columns
// each. Multi-head (G = 1): q at h * head, k at h * head + k, v at h * head + v.
struct QkvLayout {
  std::int64_t row = 0;
  std::int64_t head = 0;
  std::int64_t k = 0;
  std::int64_t v = 0;
  std::int64_t q_step = 0;   // between the query heads of one kv head (G > 1)
  std::int64_t kv_head = 0;  // between kv heads; 0: head

  // [q | k | v]: q (C wide) then k and v (NKV hs each), head h at columns [h*hs, (h+1)*hs) of q.
  static QkvLayout blocked(std::int64_t C, std::int64_t NH, std::int64_t NKV = 0);
  // Grouped per kv head g: its G query heads, k_g, v_g (reference/attention.h); with G = 1,
  // head h's q, k, v at columns h*3hs + {0, hs, 2hs}. The heads of a tensor-parallel rank are
  // one contiguous column range of the qkv matmul's output.
  static QkvLayout head_interleaved(std::int64_t C, std::int64_t NH, std::int64_t NKV = 0);
};

// P = row softmax of Q K^T / sqrt(hs) over t2 <= t, 0 above the diagonal.
//   P (B,NH,T,T), qkv (B,T,C+2*NKV*hs) laid out as `L`
void attention_probs_forward(Bf16* P, const Bf16* qkv, const QkvLayout& L, std::int64_t B,
                             std::int64_t T, std::int64_t C, std::int64_t NH,
                             std::int64_t NKV = 0);

// dscores = P * (dP - <dP, P>) per row (=), in fp32, 0 above the diagonal; may alias dP.
//   dscores (B,NH,T,T), dP (B,NH,T,T), P (B,NH,T,T)
void attention_softmax_backward(Bf16* dscores, const Bf16* dP, const Bf16* P, std::int64_t B,
                                std::int64_t NH, std::int64_t T);

// q and k parts of dqkv (=): dQ = dS K / sqrt(hs), dK = dS^T Q / sqrt(hs); v part untouched.
//   dqkv (B,T,C+2*NKV*hs), dscores (B,NH,T,T), qkv (B,T,C+2*NKV*hs), both laid out as `L`
void attention_scores_backward(Bf16* dqkv, const Bf16* dscores, const Bf16* qkv,
                               const QkvLayout& L, std::int64_t B, std::int64_t T, std::int64_t C,
                               std::int64_t NH, std::int64_t NKV = 0);

// out = Pd V per head; head h at columns [h*hs, (h+1)*hs) of out.
//   out (B,T,C), Pd (B,NH,T,T), qkv (B,T,C+2*NKV*hs) laid out as `L`
void attention_av_forward(Bf16* out, const Bf16* Pd, const Bf16* qkv, const QkvLayout& L,
                          std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH,
                          std::int64_t NKV = 0);

// dPd = dout V^T, 0 above the diagonal (=); v part of dqkv = Pd^T dout (=); q, k untouched.
//   dPd (B,NH,T,T), dqkv (B,T,C+2*NKV*hs), dout (B,T,C), Pd (B,NH,T,T), qkv (B,T,C+2*NKV*hs)
void attention_av_backward(Bf16* dPd, Bf16* dqkv, const Bf16* dout, const Bf16* Pd,
                           const Bf16* qkv, const QkvLayout& L, std::int64_t B, std::int64_t T,
                           std::int64_t C, std::int64_t NH, std::int64_t NKV = 0);

}  // namespace eth::cpu::bf16
