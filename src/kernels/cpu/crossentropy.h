// Fast fp32 softmax cross-entropy over the vocabulary (OpenMP over tokens). Same contract as
// reference/crossentropy.h. Forward saves only the per-token log-sum-exp; backward recomputes
// the probabilities from the logits and may write the gradient over them (no (N,V) probs).
#pragma once

#include <cstdint>

namespace eth::cpu {

// losses[n] = logsumexp(logits[n]) - logits[n, targets[n]]; lse saved; *loss = scale * sum of
// losses, summed in token order in double (thread-count independent).
//   loss (scalar), losses (N), lse (N), logits (N,V), targets (N) in [0,V)
void crossentropy_forward(double* loss, float* losses, float* lse, const float* logits,
                          const std::int32_t* targets, double scale, std::int64_t N,
                          std::int64_t V);

// dlogits = scale * (softmax(logits) - onehot(targets)) (=); dlogits may alias logits.
//   dlogits (N,V), logits (N,V), lse (N), targets (N)
void crossentropy_backward(float* dlogits, const float* logits, const float* lse,
                           const std::int32_t* targets, double scale, std::int64_t N,
                           std::int64_t V);

}  // namespace eth::cpu
