// Fast fp32 causal attention with grouped key/value heads, one operator class per function
// (scores, softmax, P x V; dropout of P is in pointwise.h) so each saved tensor can be dropped
// and recomputed. Same contracts and qkv layout as reference/attention.h (NH query heads, NKV
// kv heads; qkv rows C + 2 NKV hs wide, grouped per kv head; NKV = 0 or NH: multi-head, GPT's
// head-interleaved layout), plus: the (B,NH,T,T) inputs P, Pd and dscores must be 0 above the
// diagonal, as attention_softmax_forward / _backward and dropout leave them.
// Per (batch, head) the products are sgemm calls on lower-triangular row blocks, OpenMP over
// (batch, head) or, where a kv head sums over its query heads, (batch, kv head); inside the
// parallel region each sgemm runs on its own thread, so results do not depend on the thread
// count.
#pragma once

#include <cstdint>

namespace eth::cpu {

// scores = Q K^T / sqrt(hs) for t2 <= t, else 0.
//   scores (B,NH,T,T), qkv (B,T,C+2*NKV*hs)
void attention_scores_forward(float* scores, const float* qkv, std::int64_t B, std::int64_t T,
                              std::int64_t C, std::int64_t NH,
                              std::int64_t NKV = 0);

// q and k parts of dqkv (=): dQ = dS K / sqrt(hs), dK = dS^T Q / sqrt(hs); v part untouched.
//   dqkv (B,T,C+2*NKV*hs), dscores (B,NH,T,T), qkv (B,T,C+2*NKV*hs)
void attention_scores_backward(float* dqkv, const float* dscores, const float* qkv,
                               std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH,
                              std::int64_t NKV = 0);

// Row-wise causal softmax; P may alias scores (in place).
//   P (B,NH,T,T), scores (B,NH,T,T)
void attention_softmax_forward(float* P, const float* scores, std::int64_t B, std::int64_t NH,
                               std::int64_t T);

// dscores = P * (dP - <dP, P>) (=), 0 above the diagonal; dscores may alias dP.
//   dscores (B,NH,T,T), dP (B,NH,T,T), P (B,NH,T,T)
void attention_softmax_backward(float* dscores, const float* dP, const float* P, std::int64_t B,
                                std::int64_t NH, std::int64_t T);

// out = Pd V per head.
//   out (B,T,C), Pd (B,NH,T,T), qkv (B,T,C+2*NKV*hs)
void attention_av_forward(float* out, const float* Pd, const float* qkv, std::int64_t B,
                          std::int64_t T, std::int64_t C, std::int64_t NH,
                              std::int64_t NKV = 0);

// dPd = dout V^T, 0 above the diagonal (=); v part of dqkv = Pd^T dout (=); q, k untouched.
//   dPd (B,NH,T,T), dqkv (B,T,C+2*NKV*hs), dout (B,T,C), Pd (B,NH,T,T), qkv (B,T,C+2*NKV*hs)
void attention_av_backward(float* dPd, float* dqkv, const float* dout, const float* Pd,
                           const float* qkv, std::int64_t B, std::int64_t T, std::int64_t C,
                           std::int64_t NH, std::int64_t NKV = 0);

}  // namespace eth::cpu
