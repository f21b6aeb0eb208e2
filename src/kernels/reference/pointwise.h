// Naive element-wise kernels (GELU, residual add, dropout with a given mask), templated on the
// scalar so tests run them in double. The obviously-correct twins of cpu/pointwise.h.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/constants.h"

namespace eth::ref {

// out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
//   out (N), inp (N)
template <typename Real>
void gelu_forward(Real* out, const Real* inp, std::int64_t N) {
  const Real k0 = static_cast<Real>(kGeluSqrt2OverPi), k1 = static_cast<Real>(kGeluCubic);
  for (std::int64_t i = 0; i < N; ++i) {
    const Real x = inp[i];
    out[i] = Real(0.5) * x * (Real(1) + std::tanh(k0 * (x + k1 * x * x * x)));
  }
}

// dinp = dout * gelu'(inp) (=)
//   dinp (N), dout (N), inp (N)
template <typename Real>
void gelu_backward(Real* dinp, const Real* dout, const Real* inp, std::int64_t N) {
  const Real k0 = static_cast<Real>(kGeluSqrt2OverPi), k1 = static_cast<Real>(kGeluCubic);
  for (std::int64_t i = 0; i < N; ++i) {
    const Real x = inp[i];
    const Real th = std::tanh(k0 * (x + k1 * x * x * x));
    const Real sech2 = Real(1) - th * th;
    const Real grad =
        Real(0.5) * (Real(1) + th) + Real(0.5) * x * sech2 * k0 * (Real(1) + Real(3) * k1 * x * x);
    dinp[i] = dout[i] * grad;
  }
}

// out = res + branch
//   out (N), res (N), branch (N)
template <typename Real>
void residual_forward(Real* out, const Real* res, const Real* branch, std::int64_t N) {
  for (std::int64_t i = 0; i < N; ++i) out[i] = res[i] + branch[i];
}

// dres += dout (the residual stream accumulates); dbranch = dout (an ordinary activation).
//   dres (N), dbranch (N), dout (N)
template <typename Real>
void residual_backward(Real* dres, Real* dbranch, const Real* dout, std::int64_t N) {
  for (std::int64_t i = 0; i < N; ++i) {
    dres[i] += dout[i];
    dbranch[i] = dout[i];
  }
}

// out = inp * mask / (1 - p) (inverted dropout; the mask comes from dropout_mask_fill).
//   out (N), inp (N), mask (N) bytes 0/1
template <typename Real>
void dropout_forward(Real* out, const Real* inp, const std::uint8_t* mask, float p,
                     std::int64_t N) {
  const Real scale = Real(1) / (Real(1) - static_cast<Real>(p));
  for (std::int64_t i = 0; i < N; ++i) out[i] = mask[i] ? inp[i] * scale : Real(0);
}

// dinp = dout * mask / (1 - p) (=)
//   dinp (N), dout (N), mask (N)
template <typename Real>
void dropout_backward(Real* dinp, const Real* dout, const std::uint8_t* mask, float p,
                      std::int64_t N) {
  dropout_forward(dinp, dout, mask, p, N);
}

}  // namespace eth::ref
