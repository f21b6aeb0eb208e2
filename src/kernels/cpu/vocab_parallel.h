// Fast fp32 vocabulary-parallel embedding and cross-entropy (OpenMP over tokens or channel
// blocks): a tensor-parallel rank's part of the lookup and of the loss over its vocabulary rows
// [v0, v0 + Vr). Same contracts as reference/vocab_parallel.h; the caller all-reduces between
// the steps (runtime: one sum after the lookup, one max and one sum in the loss). Every output
// element is owned by one thread and summed in a fixed order: thread-count independent.
#pragma once

#include <cstdint>

namespace eth::cpu {

// out[n,:] = wte_rows[tokens[n] - v0,:] for tokens in [v0, v0 + Vr), else 0 (=).
//   out (N,C), tokens (N) in [0,V), wte_rows (Vr,C)
void vocab_embedding_forward(float* out, const std::int32_t* tokens, const float* wte_rows,
                             std::int64_t v0, std::int64_t Vr, std::int64_t N, std::int64_t C,
                             std::int64_t V);

// dwte_rows[tokens[n] - v0,:] += dout[n,:] for tokens in [v0, v0 + Vr); tokens in order (+=).
//   dwte_rows (Vr,C), dout (N,C), tokens (N)
void vocab_embedding_backward(float* dwte_rows, const float* dout, const std::int32_t* tokens,
                              std::int64_t v0, std::int64_t Vr, std::int64_t N, std::int64_t C);

// out[b,t,:] += wpe[t,:].   out (B,T,C), wpe (>=T,C)
void position_forward(float* out, const float* wpe, std::int64_t B, std::int64_t T, std::int64_t C);

// dwpe[t,:] += dout[b,t,:], samples in order (+=).   dwpe (>=T,C), dout (B,T,C)
void position_backward(float* dwpe, const float* dout, std::int64_t B, std::int64_t T,
                       std::int64_t C);

// mx[n] = max over the rank's columns (=), -inf for an empty shard.   mx (N), logits (N,Vr)
void vocab_ce_max(float* mx, const float* logits, std::int64_t N, std::int64_t Vr);

// stats[n,0] = sum_v exp(logits[n,v] - mx[n]); stats[n,1] = the target's logit here or 0 (=).
//   stats (N,2), logits (N,Vr), mx (N), targets (N)
void vocab_ce_sums(float* stats, const float* logits, const float* mx, const std::int32_t* targets,
                   std::int64_t v0, std::int64_t N, std::int64_t Vr);

// lse = mx + log(stats[.,0]), losses = lse - stats[.,1], *loss = scale * sum (double, in order).
//   loss (scalar), losses (N), lse (N), mx (N), stats (N,2)
void vocab_ce_finish(double* loss, float* losses, float* lse, const float* mx, const float* stats,
                     double scale, std::int64_t N);

// dlogits = scale * (exp(logits - lse) - onehot(targets - v0)) (=); may alias logits.
//   dlogits (N,Vr), logits (N,Vr), lse (N), targets (N)
void vocab_ce_backward(float* dlogits, const float* logits, const float* lse,
                       const std::int32_t* targets, std::int64_t v0, double scale, std::int64_t N,
                       std::int64_t Vr);

}  // namespace eth::cpu
