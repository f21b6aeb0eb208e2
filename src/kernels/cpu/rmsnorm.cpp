// RMSNorm forward and backward, fp32 and bf16 storage (one template; cpu/storage.h), in the
// shape of layernorm.cpp: backward runs rows for dinp, then channel blocks for dweight (each
// summing rows in order), so no two threads add into one element and the bits do not depend on
// the thread count. rstd and every sum are fp32.
#include "kernels/cpu/rmsnorm.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/bf16/rmsnorm.h"
#include "kernels/cpu/storage.h"

namespace eth::cpu {
namespace {

constexpr std::int64_t kChannelBlock = 64;

// A: activations, P: the weight (float or Bf16).
template <typename A, typename P>
void forward(A* out, float* rstd, const A* inp, const P* weight, float eps, std::int64_t N,
             std::int64_t C) {
  const float inv_c = 1.0f / static_cast<float>(C);
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < N; ++n) {
    const A* x = inp + n * C;
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (std::int64_t c = 0; c < C; ++c) ss += widen(x[c]) * widen(x[c]);
    const float s = 1.0f / std::sqrt(ss * inv_c + eps);
    A* o = out + n * C;
#pragma omp simd
    for (std::int64_t c = 0; c < C; ++c) o[c] = narrow<A>(widen(x[c]) * s * widen(weight[c]));
    rstd[n] = s;
  }
}

template <typename A, typename P>
void backward(A* dinp, float* dweight, const A* dout, const A* inp, const P* weight,
              const float* rstd, std::int64_t N, std::int64_t C) {
  const float inv_c = 1.0f / static_cast<float>(C);
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < N; ++n) {
    const A* x = inp + n * C;
    const A* dy = dout + n * C;
    const float s = rstd[n];
    // dx = rstd * (g - xhat * mean(g * xhat)), g = dy * weight, xhat = x * rstd.
    float sum_gx = 0.0f;
#pragma omp simd reduction(+ : sum_gx)
    for (std::int64_t c = 0; c < C; ++c) sum_gx += widen(dy[c]) * widen(weight[c]) * widen(x[c]);
    const float k = sum_gx * s * s * inv_c;  // mean(g * xhat) * rstd
    A* dx = dinp + n * C;
    // dinp += (the residual stream): the sum is formed in fp32 and rounded once.
#pragma omp simd
    for (std::int64_t c = 0; c < C; ++c) {
      dx[c] = narrow<A>(widen(dx[c]) + s * (widen(dy[c]) * widen(weight[c]) - widen(x[c]) * k));
    }
  }
  const std::int64_t blocks = (C + kChannelBlock - 1) / kChannelBlock;
#pragma omp parallel for schedule(static)
  for (std::int64_t blk = 0; blk < blocks; ++blk) {
    const std::int64_t c0 = blk * kChannelBlock, c1 = std::min(C, c0 + kChannelBlock);
    for (std::int64_t n = 0; n < N; ++n) {
      const A* x = inp + n * C;
      const A* dy = dout + n * C;
      const float s = rstd[n];
#pragma omp simd
      for (std::int64_t c = c0; c < c1; ++c) dweight[c] += widen(dy[c]) * (widen(x[c]) * s);
    }
  }
}

}  // namespace

void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, float eps,
                     std::int64_t N, std::int64_t C) {
  forward(out, rstd, inp, weight, eps, N, C);
}

void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                      const float* weight, const float* rstd, std::int64_t N, std::int64_t C) {
  backward(dinp, dweight, dout, inp, weight, rstd, N, C);
}

void bf16::rmsnorm_forward(Bf16* out, float* rstd, const Bf16* inp, const Bf16* weight, float eps,
                           std::int64_t N, std::int64_t C) {
  forward(out, rstd, inp, weight, eps, N, C);
}

void bf16::rmsnorm_backward(Bf16* dinp, float* dweight, const Bf16* dout, const Bf16* inp,
                            const Bf16* weight, const float* rstd, std::int64_t N, std::int64_t C) {
  backward(dinp, dweight, dout, inp, weight, rstd, N, C);
}

}  // namespace eth::cpu
