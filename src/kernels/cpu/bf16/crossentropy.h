// bf16-input softmax cross-entropy: the logits are stored in bf16 (the LM head's output), every
// max, exponential and sum is fp32, the per-token losses and log-sum-exp are fp32, and the
// gradient is rounded once into bf16 (it feeds the LM head's bf16 backward GEMMs). Same
// contract as cpu/crossentropy.h, including dlogits over the logits in place; defined in
// cpu/crossentropy.cpp as the same templates as the fp32 kernels (cpu/storage.h).
#pragma once

#include <cstdint>

#include "kernels/bf16.h"

namespace eth::cpu::bf16 {

// losses[n] = logsumexp(logits[n]) - logits[n, targets[n]]; lse saved; *loss = scale * sum of
// losses, summed in token order in double (thread-count independent).
//   loss (scalar), losses (N) fp32, lse (N) fp32, logits (N,V), targets (N) in [0,V)
void crossentropy_forward(double* loss, float* losses, float* lse, const Bf16* logits,
                          const std::int32_t* targets, double scale, std::int64_t N,
                          std::int64_t V);

// dlogits = scale * (softmax(logits) - onehot(targets)) (=); dlogits may alias logits.
//   dlogits (N,V), logits (N,V), lse (N) fp32, targets (N)
void crossentropy_backward(Bf16* dlogits, const Bf16* logits, const float* lse,
                           const std::int32_t* targets, double scale, std::int64_t N,
                           std::int64_t V);

}  // namespace eth::cpu::bf16
