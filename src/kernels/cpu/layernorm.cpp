// Layer norm forward and backward. Backward runs two parallel passes so that no two threads
// ever add into the same element: rows for dinp, then channel blocks for dweight and dbias
// (each summing rows in order), which keeps results identical for any thread count.
#include "kernels/cpu/layernorm.h"

#include <algorithm>
#include <cmath>

#include "kernels/constants.h"

namespace eth::cpu {
namespace {
constexpr std::int64_t kChannelBlock = 64;
}  // namespace

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, std::int64_t N, std::int64_t C) {
  const float inv_c = 1.0f / static_cast<float>(C);
  const auto eps = static_cast<float>(kLayerNormEps);
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < N; ++n) {
    const float* x = inp + n * C;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (std::int64_t c = 0; c < C; ++c) sum += x[c];
    const float m = sum * inv_c;
    float var = 0.0f;
#pragma omp simd reduction(+ : var)
    for (std::int64_t c = 0; c < C; ++c) var += (x[c] - m) * (x[c] - m);
    const float s = 1.0f / std::sqrt(var * inv_c + eps);
    float* o = out + n * C;
#pragma omp simd
    for (std::int64_t c = 0; c < C; ++c) o[c] = (x[c] - m) * s * weight[c] + bias[c];
    mean[n] = m;
    rstd[n] = s;
  }
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean,
                        const float* rstd, std::int64_t N, std::int64_t C) {
  const float inv_c = 1.0f / static_cast<float>(C);
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < N; ++n) {
    const float* x = inp + n * C;
    const float* dy = dout + n * C;
    const float m = mean[n], s = rstd[n];
    // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * weight.
    float sum_g = 0.0f, sum_gx = 0.0f;
#pragma omp simd reduction(+ : sum_g, sum_gx)
    for (std::int64_t c = 0; c < C; ++c) {
      const float g = dy[c] * weight[c];
      sum_g += g;
      sum_gx += g * (x[c] - m) * s;
    }
    const float mg = sum_g * inv_c, mgx = sum_gx * inv_c;
    float* dx = dinp + n * C;
#pragma omp simd
    for (std::int64_t c = 0; c < C; ++c) {
      dx[c] += s * (dy[c] * weight[c] - mg - (x[c] - m) * s * mgx);
    }
  }
  const std::int64_t blocks = (C + kChannelBlock - 1) / kChannelBlock;
#pragma omp parallel for schedule(static)
  for (std::int64_t blk = 0; blk < blocks; ++blk) {
    const std::int64_t c0 = blk * kChannelBlock, c1 = std::min(C, c0 + kChannelBlock);
    for (std::int64_t n = 0; n < N; ++n) {
      const float* x = inp + n * C;
      const float* dy = dout + n * C;
      const float m = mean[n], s = rstd[n];
#pragma omp simd
      for (std::int64_t c = c0; c < c1; ++c) {
        dbias[c] += dy[c];
        dweight[c] += dy[c] * (x[c] - m) * s;
      }
    }
  }
}

}  // namespace eth::cpu
