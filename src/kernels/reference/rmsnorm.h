// Naive RMSNorm over the last dimension, templated on the scalar so tests run it in double. The
// obviously-correct twin of cpu/rmsnorm.h; never used for training.
#pragma once

#include <cmath>
#include <cstdint>

namespace eth::ref {

// rstd = 1 / sqrt(mean_c(inp^2) + eps); out = inp * rstd * weight, per row; saves rstd.
//   out (N,C), rstd (N), inp (N,C), weight (C)
template <typename Real>
void rmsnorm_forward(Real* out, Real* rstd, const Real* inp, const Real* weight, float eps,
                     std::int64_t N, std::int64_t C) {
  for (std::int64_t n = 0; n < N; ++n) {
    const Real* x = inp + n * C;
    Real ms = 0;
    for (std::int64_t c = 0; c < C; ++c) ms += x[c] * x[c];
    ms /= static_cast<Real>(C);
    const Real s = Real(1) / std::sqrt(ms + static_cast<Real>(eps));
    for (std::int64_t c = 0; c < C; ++c) out[n * C + c] = x[c] * s * weight[c];
    rstd[n] = s;
  }
}

// dinp += (the input is the residual stream, as layernorm_backward), dweight += (a parameter).
//   dinp (N,C), dweight (C), dout (N,C), inp (N,C), weight (C), rstd (N)
template <typename Real>
void rmsnorm_backward(Real* dinp, Real* dweight, const Real* dout, const Real* inp,
                      const Real* weight, const Real* rstd, std::int64_t N, std::int64_t C) {
  for (std::int64_t n = 0; n < N; ++n) {
    const Real* x = inp + n * C;
    const Real* dy = dout + n * C;
    // With xhat = x * rstd and g = dy * weight: dx = rstd * (g - xhat * mean(g * xhat)); the
    // mean term is d rstd / dx, since rstd depends on every x of the row.
    Real mean_gx = 0;
    for (std::int64_t c = 0; c < C; ++c) {
      const Real xhat = x[c] * rstd[n];
      mean_gx += dy[c] * weight[c] * xhat;
      dweight[c] += dy[c] * xhat;
    }
    mean_gx /= static_cast<Real>(C);
    for (std::int64_t c = 0; c < C; ++c) {
      const Real xhat = x[c] * rstd[n];
      dinp[n * C + c] += rstd[n] * (dy[c] * weight[c] - xhat * mean_gx);
    }
  }
}

}  // namespace eth::ref
