// bf16 layer norm. The structure of cpu/layernorm.cpp (rows for dinp, then channel blocks for
// the parameter gradients, so no two threads add into one element); every value is widened to
// fp32 when read and rounded when a bf16 output is stored.
#include "kernels/cpu/bf16/layernorm.h"

#include <algorithm>
#include <cmath>

#include "kernels/constants.h"

namespace eth::cpu::bf16 {
namespace {
constexpr std::int64_t kChannelBlock = 64;
}  // namespace

void layernorm_forward(Bf16* out, float* mean, float* rstd, const Bf16* inp, const Bf16* weight,
                       const Bf16* bias, std::int64_t N, std::int64_t C) {
  const float inv_c = 1.0f / static_cast<float>(C);
  const auto eps = static_cast<float>(kLayerNormEps);
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < N; ++n) {
    const Bf16* x = inp + n * C;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (std::int64_t c = 0; c < C; ++c) sum += float_from_bf16(x[c]);
    const float m = sum * inv_c;
    float var = 0.0f;
#pragma omp simd reduction(+ : var)
    for (std::int64_t c = 0; c < C; ++c) {
      const float d = float_from_bf16(x[c]) - m;
      var += d * d;
    }
    const float s = 1.0f / std::sqrt(var * inv_c + eps);
    Bf16* o = out + n * C;
#pragma omp simd
    for (std::int64_t c = 0; c < C; ++c) {
      o[c] = bf16_from_float((float_from_bf16(x[c]) - m) * s * float_from_bf16(weight[c]) +
                             float_from_bf16(bias[c]));
    }
    mean[n] = m;
    rstd[n] = s;
  }
}

void layernorm_backward(Bf16* dinp, float* dweight, float* dbias, const Bf16* dout,
                        const Bf16* inp, const Bf16* weight, const float* mean, const float* rstd,
                        std::int64_t N, std::int64_t C) {
  const float inv_c = 1.0f / static_cast<float>(C);
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < N; ++n) {
    const Bf16* x = inp + n * C;
    const Bf16* dy = dout + n * C;
    const float m = mean[n], s = rstd[n];
    // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * weight.
    float sum_g = 0.0f, sum_gx = 0.0f;
#pragma omp simd reduction(+ : sum_g, sum_gx)
    for (std::int64_t c = 0; c < C; ++c) {
      const float g = float_from_bf16(dy[c]) * float_from_bf16(weight[c]);
      sum_g += g;
      sum_gx += g * (float_from_bf16(x[c]) - m) * s;
    }
    const float mg = sum_g * inv_c, mgx = sum_gx * inv_c;
    Bf16* dx = dinp + n * C;
#pragma omp simd
    for (std::int64_t c = 0; c < C; ++c) {
      const float g = float_from_bf16(dy[c]) * float_from_bf16(weight[c]);
      const float xhat = (float_from_bf16(x[c]) - m) * s;
      dx[c] = bf16_from_float(float_from_bf16(dx[c]) + s * (g - mg - xhat * mgx));
    }
  }
  const std::int64_t blocks = (C + kChannelBlock - 1) / kChannelBlock;
#pragma omp parallel for schedule(static)
  for (std::int64_t blk = 0; blk < blocks; ++blk) {
    const std::int64_t c0 = blk * kChannelBlock, c1 = std::min(C, c0 + kChannelBlock);
    for (std::int64_t n = 0; n < N; ++n) {
      const Bf16* x = inp + n * C;
      const Bf16* dy = dout + n * C;
      const float m = mean[n], s = rstd[n];
#pragma omp simd
      for (std::int64_t c = c0; c < c1; ++c) {
        const float d = float_from_bf16(dy[c]);
        dbias[c] += d;
        dweight[c] += d * (float_from_bf16(x[c]) - m) * s;
      }
    }
  }
}

}  // namespace eth::cpu::bf16
