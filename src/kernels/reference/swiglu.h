// Naive SwiGLU, templated on the scalar so tests run it in double. The obviously-correct twin of
// cpu/swiglu.h; never used for training.
#pragma once

#include <cmath>
#include <cstdint>

namespace eth::ref {

// out = silu(gate) * up, silu(x) = x / (1 + exp(-x)).
//   out (N,F), gate (N,F), up (N,F)
template <typename Real>
void swiglu_forward(Real* out, const Real* gate, const Real* up, std::int64_t N, std::int64_t F) {
  for (std::int64_t i = 0; i < N * F; ++i) {
    const Real x = gate[i];
    out[i] = x / (Real(1) + std::exp(-x)) * up[i];
  }
}

// dgate = dout * up * silu'(gate), dup = dout * silu(gate) (both =), with
// silu'(x) = s (1 + x (1 - s)), s = 1 / (1 + exp(-x)).
//   dgate (N,F), dup (N,F), dout (N,F), gate (N,F), up (N,F)
template <typename Real>
void swiglu_backward(Real* dgate, Real* dup, const Real* dout, const Real* gate, const Real* up,
                     std::int64_t N, std::int64_t F) {
  for (std::int64_t i = 0; i < N * F; ++i) {
    const Real x = gate[i];
    const Real s = Real(1) / (Real(1) + std::exp(-x));
    dgate[i] = dout[i] * up[i] * s * (Real(1) + x * (Real(1) - s));
    dup[i] = dout[i] * x * s;
  }
}

}  // namespace eth::ref
