// bf16 vocabulary-parallel embedding and cross-entropy: a tensor-parallel rank's share of the
// lookup and of the loss (cpu/vocab_parallel.h's contracts) on bf16 activations and the bf16
// compute copy of wte, with fp32 where the tp group all-reduces. The lookup's share is written
// in fp32 (the widened rows, exact) so the sum over the group is exact; position_forward adds the
// positions to that sum and rounds once, which is bf16::encoder_forward's result bit for bit. The
// loss statistics (row maxima, sums of exponentials, target logits, lse, losses) are fp32;
// vocab_ce_finish has no bf16 twin (it reads statistics only). Defined in cpu/vocab_parallel.cpp
// as the same templates as the fp32 kernels (cpu/storage.h).
#pragma once

#include <cstdint>

#include "kernels/bf16.h"

namespace eth::cpu::bf16 {

// out[n,:] = wte_rows[tokens[n] - v0,:] (widened, exact) for tokens in [v0, v0 + Vr), else 0.
//   out (N,C) fp32, tokens (N) in [0,V), wte_rows (Vr,C)
void vocab_embedding_forward(float* out, const std::int32_t* tokens, const Bf16* wte_rows,
                             std::int64_t v0, std::int64_t Vr, std::int64_t N, std::int64_t C,
                             std::int64_t V);

// dwte_rows[tokens[n] - v0,:] += dout[n,:] for tokens in [v0, v0 + Vr); tokens in order (+=).
//   dwte_rows (Vr,C) fp32, dout (N,C), tokens (N)
void vocab_embedding_backward(float* dwte_rows, const Bf16* dout, const std::int32_t* tokens,
                              std::int64_t v0, std::int64_t Vr, std::int64_t N, std::int64_t C);

// out[b,t,:] = round(lookup[b,t,:] + wpe[t,:]) (=): the positions added to the all-reduced
// lookup in fp32, rounded once.
//   out (B,T,C), lookup (B,T,C) fp32, wpe (>=T,C)
void position_forward(Bf16* out, const float* lookup, const Bf16* wpe, std::int64_t B,
                      std::int64_t T, std::int64_t C);

// dwpe[t,:] += dout[b,t,:], samples in order (+=).   dwpe (>=T,C) fp32, dout (B,T,C)
void position_backward(float* dwpe, const Bf16* dout, std::int64_t B, std::int64_t T,
                       std::int64_t C);

// mx[n] = max over the rank's columns (=), -inf for an empty shard.
//   mx (N) fp32, logits (N,Vr)
void vocab_ce_max(float* mx, const Bf16* logits, std::int64_t N, std::int64_t Vr);

// stats[n,0] = sum_v exp(logits[n,v] - mx[n]); stats[n,1] = the target's logit here or 0 (=).
//   stats (N,2) fp32, logits (N,Vr), mx (N) fp32, targets (N)
void vocab_ce_sums(float* stats, const Bf16* logits, const float* mx, const std::int32_t* targets,
                   std::int64_t v0, std::int64_t N, std::int64_t Vr);

// dlogits = round(scale * (exp(logits - lse) - onehot(targets - v0))) (=); may alias logits.
//   dlogits (N,Vr), logits (N,Vr), lse (N) fp32, targets (N)
void vocab_ce_backward(Bf16* dlogits, const Bf16* logits, const float* lse,
                       const std::int32_t* targets, std::int64_t v0, double scale, std::int64_t N,
                       std::int64_t Vr);

}  // namespace eth::cpu::bf16
