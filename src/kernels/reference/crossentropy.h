// Naive softmax cross-entropy over the vocabulary, templated on the scalar so tests run it in
// double. The obviously-correct twin of cpu/crossentropy.h; never used for training.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/error.h"

namespace eth::ref {

// losses[n] = logsumexp(logits[n,:]) - logits[n, targets[n]]; lse[n] = logsumexp (saved for
// backward); *loss = scale * sum_n losses[n]. The trainer passes scale = 1 / (global batch * T),
// so micro-batch losses add up to the mean over the global batch.
//   loss (scalar), losses (N), lse (N), logits (N,V), targets (N) in [0,V)
template <typename Real>
void crossentropy_forward(double* loss, Real* losses, Real* lse, const Real* logits,
                          const std::int32_t* targets, double scale, std::int64_t N,
                          std::int64_t V) {
  double total = 0;
  for (std::int64_t n = 0; n < N; ++n) {
    const Real* z = logits + n * V;
    ETH_CHECK(targets[n] >= 0 && targets[n] < V, "crossentropy: target out of range");
    Real mx = z[0];
    for (std::int64_t v = 1; v < V; ++v) mx = z[v] > mx ? z[v] : mx;
    Real sum = 0;
    for (std::int64_t v = 0; v < V; ++v) sum += std::exp(z[v] - mx);
    lse[n] = mx + std::log(sum);
    losses[n] = lse[n] - z[targets[n]];
    total += static_cast<double>(losses[n]);
  }
  *loss = scale * total;
}

// dlogits = scale * (softmax(logits) - onehot(targets)) (=): the gradient of *loss.
//   dlogits (N,V), logits (N,V), lse (N), targets (N)
template <typename Real>
void crossentropy_backward(Real* dlogits, const Real* logits, const Real* lse,
                           const std::int32_t* targets, double scale, std::int64_t N,
                           std::int64_t V) {
  const Real s = static_cast<Real>(scale);
  for (std::int64_t n = 0; n < N; ++n) {
    for (std::int64_t v = 0; v < V; ++v) {
      const Real p = std::exp(logits[n * V + v] - lse[n]);
      dlogits[n * V + v] = s * (p - (v == targets[n] ? Real(1) : Real(0)));
    }
  }
}

}  // namespace eth::ref
