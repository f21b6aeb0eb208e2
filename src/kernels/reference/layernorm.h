// Naive layer norm over the last dimension, templated on the scalar so tests run it in double.
// The obviously-correct twin of cpu/layernorm.h; never used for training.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/constants.h"

namespace eth::ref {

// out = (inp - mean) * rstd * weight + bias, per row; saves mean and rstd for backward.
//   out (N,C), mean (N), rstd (N), inp (N,C), weight (C), bias (C)
template <typename Real>
void layernorm_forward(Real* out, Real* mean, Real* rstd, const Real* inp, const Real* weight,
                       const Real* bias, std::int64_t N, std::int64_t C) {
  for (std::int64_t n = 0; n < N; ++n) {
    const Real* x = inp + n * C;
    Real m = 0;
    for (std::int64_t c = 0; c < C; ++c) m += x[c];
    m /= static_cast<Real>(C);
    Real v = 0;
    for (std::int64_t c = 0; c < C; ++c) v += (x[c] - m) * (x[c] - m);
    v /= static_cast<Real>(C);
    const Real s = Real(1) / std::sqrt(v + static_cast<Real>(kLayerNormEps));
    for (std::int64_t c = 0; c < C; ++c) out[n * C + c] = (x[c] - m) * s * weight[c] + bias[c];
    mean[n] = m;
    rstd[n] = s;
  }
}

// dinp += (the input is the residual stream), dweight += and dbias += (parameters).
//   dinp (N,C), dweight (C), dbias (C), dout (N,C), inp (N,C), weight (C), mean (N), rstd (N)
template <typename Real>
void layernorm_backward(Real* dinp, Real* dweight, Real* dbias, const Real* dout, const Real* inp,
                        const Real* weight, const Real* mean, const Real* rstd, std::int64_t N,
                        std::int64_t C) {
  for (std::int64_t n = 0; n < N; ++n) {
    const Real* x = inp + n * C;
    const Real* dy = dout + n * C;
    // With xhat = (x - mean) * rstd and g = dy * weight:
    // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).
    Real mean_g = 0, mean_gx = 0;
    for (std::int64_t c = 0; c < C; ++c) {
      const Real xhat = (x[c] - mean[n]) * rstd[n];
      const Real g = dy[c] * weight[c];
      mean_g += g;
      mean_gx += g * xhat;
      dbias[c] += dy[c];
      dweight[c] += dy[c] * xhat;
    }
    mean_g /= static_cast<Real>(C);
    mean_gx /= static_cast<Real>(C);
    for (std::int64_t c = 0; c < C; ++c) {
      const Real xhat = (x[c] - mean[n]) * rstd[n];
      const Real g = dy[c] * weight[c];
      dinp[n * C + c] += rstd[n] * (g - mean_g - xhat * mean_gx);
    }
  }
}

}  // namespace eth::ref
