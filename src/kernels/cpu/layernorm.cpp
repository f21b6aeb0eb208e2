// Layer norm forward and backward, fp32 and bf16 storage (one template; cpu/storage.h).
// Backward runs two parallel passes so that no two threads ever add into the same element:
// rows for dinp, then channel blocks for dweight and dbias (each summing rows in order), which
// keeps results identical for any thread count. Statistics and sums are always fp32.
#include "kernels/cpu/layernorm.h"

#include <algorithm>
#include <cmath>

#include "kernels/constants.h"
#include "kernels/cpu/bf16/layernorm.h"
#include "kernels/cpu/storage.h"

namespace eth::cpu {
namespace {

constexpr std::int64_t kChannelBlock = 64;

// A: activations, P: parameters (float or Bf16).
template <typename A, typename P>
void forward(A* out, float* mean, float* rstd, const A* inp, const P* weight, const P* bias,
             std::int64_t N, std::int64_t C) {
  const float inv_c = 1.0f / static_cast<float>(C);
  const auto eps = static_cast<float>(kLayerNormEps);
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < N; ++n) {
    const A* x = inp + n * C;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (std::int64_t c = 0; c < C; ++c) sum += widen(x[c]);
    const float m = sum * inv_c;
    float var = 0.0f;
#pragma omp simd reduction(+ : var)
    for (std::int64_t c = 0; c < C; ++c) var += (widen(x[c]) - m) * (widen(x[c]) - m);
    const float s = 1.0f / std::sqrt(var * inv_c + eps);
    A* o = out + n * C;
#pragma omp simd
    for (std::int64_t c = 0; c < C; ++c) {
      o[c] = narrow<A>((widen(x[c]) - m) * s * widen(weight[c]) + widen(bias[c]));
    }
    mean[n] = m;
    rstd[n] = s;
  }
}

template <typename A, typename P>
void backward(A* dinp, float* dweight, float* dbias, const A* dout, const A* inp,
              const P* weight, const float* mean, const float* rstd, std::int64_t N,
              std::int64_t C) {
  const float inv_c = 1.0f / static_cast<float>(C);
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < N; ++n) {
    const A* x = inp + n * C;
    const A* dy = dout + n * C;
    const float m = mean[n], s = rstd[n];
    // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * weight.
    float sum_g = 0.0f, sum_gx = 0.0f;
#pragma omp simd reduction(+ : sum_g, sum_gx)
    for (std::int64_t c = 0; c < C; ++c) {
      const float g = widen(dy[c]) * widen(weight[c]);
      sum_g += g;
      sum_gx += g * (widen(x[c]) - m) * s;
    }
    const float mg = sum_g * inv_c, mgx = sum_gx * inv_c;
    A* dx = dinp + n * C;
    // dinp += (the residual stream): the sum is formed in fp32 and rounded once.
#pragma omp simd
    for (std::int64_t c = 0; c < C; ++c) {
      dx[c] = narrow<A>(widen(dx[c]) +
                        s * (widen(dy[c]) * widen(weight[c]) - mg - (widen(x[c]) - m) * s * mgx));
    }
  }
  const std::int64_t blocks = (C + kChannelBlock - 1) / kChannelBlock;
#pragma omp parallel for schedule(static)
  for (std::int64_t blk = 0; blk < blocks; ++blk) {
    const std::int64_t c0 = blk * kChannelBlock, c1 = std::min(C, c0 + kChannelBlock);
    for (std::int64_t n = 0; n < N; ++n) {
      const A* x = inp + n * C;
      const A* dy = dout + n * C;
      const float m = mean[n], s = rstd[n];
#pragma omp simd
      for (std::int64_t c = c0; c < c1; ++c) {
        dbias[c] += widen(dy[c]);
        dweight[c] += widen(dy[c]) * (widen(x[c]) - m) * s;
      }
    }
  }
}

}  // namespace

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, std::int64_t N, std::int64_t C) {
  forward(out, mean, rstd, inp, weight, bias, N, C);
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean,
                        const float* rstd, std::int64_t N, std::int64_t C) {
  backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}

void bf16::layernorm_forward(Bf16* out, float* mean, float* rstd, const Bf16* inp,
                             const Bf16* weight, const Bf16* bias, std::int64_t N,
                             std::int64_t C) {
  forward(out, mean, rstd, inp, weight, bias, N, C);
}

void bf16::layernorm_backward(Bf16* dinp, float* dweight, float* dbias, const Bf16* dout,
                              const Bf16* inp, const Bf16* weight, const float* mean,
                              const float* rstd, std::int64_t N, std::int64_t C) {
  backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}

}  // namespace eth::cpu
