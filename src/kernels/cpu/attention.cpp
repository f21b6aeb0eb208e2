// Causal attention kernels. The products run per (batch, head) as sgemm calls over row blocks
// of the lower triangle: rows [r0, r1) of a T x T matrix only need columns [0, r1), which skips
// most of the masked half (62% of the full product at T = 256 with 64-row blocks). Head h's
// q, k, v sit at columns h*3hs + {0, hs, 2hs} of each token's 3C row (head-interleaved).
#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/vec_math.h"

namespace eth::cpu {
namespace {

constexpr std::int64_t kRowBlock = 64;

std::int64_t head_size(std::int64_t C, std::int64_t NH) {
  ETH_CHECK(NH > 0 && C % NH == 0, "attention: C must be a multiple of NH");
  return C / NH;
}

// Zeroes the strict upper triangle of a T x T matrix.
void zero_upper(float* m, std::int64_t T) {
  for (std::int64_t t = 0; t + 1 < T; ++t) std::fill(m + t * T + t + 1, m + (t + 1) * T, 0.0f);
}

}  // namespace

void attention_scores_forward(float* scores, const float* qkv, std::int64_t B, std::int64_t T,
                              std::int64_t C, std::int64_t NH) {
  const std::int64_t hs = head_size(C, NH), ld = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel for schedule(static)
  for (std::int64_t bh = 0; bh < B * NH; ++bh) {
    const std::int64_t b = bh / NH, h = bh % NH;
    const float* q = qkv + b * T * ld + h * 3 * hs;
    const float* k = q + hs;
    float* s = scores + bh * T * T;
    for (std::int64_t r0 = 0; r0 < T; r0 += kRowBlock) {
      const std::int64_t r1 = std::min(T, r0 + kRowBlock);
      sgemm(Trans::No, Trans::Yes, r1 - r0, r1, hs, scale, q + r0 * ld, ld, k, ld, 0.0f,
            s + r0 * T, T);
    }
    zero_upper(s, T);
  }
}

void attention_scores_backward(float* dqkv, const float* dscores, const float* qkv,
                               std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH) {
  const std::int64_t hs = head_size(C, NH), ld = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel for schedule(static)
  for (std::int64_t bh = 0; bh < B * NH; ++bh) {
    const std::int64_t b = bh / NH, h = bh % NH;
    const float* q = qkv + b * T * ld + h * 3 * hs;
    const float* k = q + hs;
    float* dq = dqkv + b * T * ld + h * 3 * hs;
    float* dk = dq + hs;
    const float* ds = dscores + bh * T * T;
    for (std::int64_t r0 = 0; r0 < T; r0 += kRowBlock) {
      const std::int64_t r1 = std::min(T, r0 + kRowBlock);
      // dQ[r0:r1] = dS[r0:r1, 0:r1] K[0:r1]
      sgemm(Trans::No, Trans::No, r1 - r0, hs, r1, scale, ds + r0 * T, T, k, ld, 0.0f,
            dq + r0 * ld, ld);
      // dK[r0:r1] = dS[r0:T, r0:r1]^T Q[r0:T]
      sgemm(Trans::Yes, Trans::No, r1 - r0, hs, T - r0, scale, ds + r0 * T + r0, T, q + r0 * ld,
            ld, 0.0f, dk + r0 * ld, ld);
    }
  }
}

void attention_softmax_forward(float* P, const float* scores, std::int64_t B, std::int64_t NH,
                               std::int64_t T) {
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < B * NH * T; ++r) {
    const std::int64_t t = r % T;
    const float* s = scores + r * T;
    float* p = P + r * T;
    float mx = s[0];
#pragma omp simd reduction(max : mx)
    for (std::int64_t t2 = 0; t2 <= t; ++t2) mx = s[t2] > mx ? s[t2] : mx;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (std::int64_t t2 = 0; t2 <= t; ++t2) {
      p[t2] = exp_approx(s[t2] - mx);
      sum += p[t2];
    }
    const float inv = 1.0f / sum;
#pragma omp simd
    for (std::int64_t t2 = 0; t2 <= t; ++t2) p[t2] *= inv;
    std::fill(p + t + 1, p + T, 0.0f);
  }
}

void attention_softmax_backward(float* dscores, const float* dP, const float* P, std::int64_t B,
                                std::int64_t NH, std::int64_t T) {
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < B * NH * T; ++r) {
    const std::int64_t t = r % T;
    const float* dp = dP + r * T;
    const float* p = P + r * T;
    float* ds = dscores + r * T;
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (std::int64_t t2 = 0; t2 <= t; ++t2) dot += dp[t2] * p[t2];
#pragma omp simd
    for (std::int64_t t2 = 0; t2 <= t; ++t2) ds[t2] = p[t2] * (dp[t2] - dot);
    std::fill(ds + t + 1, ds + T, 0.0f);
  }
}

void attention_av_forward(float* out, const float* Pd, const float* qkv, std::int64_t B,
                          std::int64_t T, std::int64_t C, std::int64_t NH) {
  const std::int64_t hs = head_size(C, NH), ld = 3 * C;
#pragma omp parallel for schedule(static)
  for (std::int64_t bh = 0; bh < B * NH; ++bh) {
    const std::int64_t b = bh / NH, h = bh % NH;
    const float* v = qkv + b * T * ld + h * 3 * hs + 2 * hs;
    const float* p = Pd + bh * T * T;
    float* o = out + b * T * C + h * hs;
    for (std::int64_t r0 = 0; r0 < T; r0 += kRowBlock) {
      const std::int64_t r1 = std::min(T, r0 + kRowBlock);
      // out[r0:r1] = Pd[r0:r1, 0:r1] V[0:r1]
      sgemm(Trans::No, Trans::No, r1 - r0, hs, r1, 1.0f, p + r0 * T, T, v, ld, 0.0f, o + r0 * C,
            C);
    }
  }
}

void attention_av_backward(float* dPd, float* dqkv, const float* dout, const float* Pd,
                           const float* qkv, std::int64_t B, std::int64_t T, std::int64_t C,
                           std::int64_t NH) {
  const std::int64_t hs = head_size(C, NH), ld = 3 * C;
#pragma omp parallel for schedule(static)
  for (std::int64_t bh = 0; bh < B * NH; ++bh) {
    const std::int64_t b = bh / NH, h = bh % NH;
    const float* v = qkv + b * T * ld + h * 3 * hs + 2 * hs;
    const float* p = Pd + bh * T * T;
    const float* dy = dout + b * T * C + h * hs;
    float* dp = dPd + bh * T * T;
    float* dv = dqkv + b * T * ld + h * 3 * hs + 2 * hs;
    for (std::int64_t r0 = 0; r0 < T; r0 += kRowBlock) {
      const std::int64_t r1 = std::min(T, r0 + kRowBlock);
      // dPd[r0:r1, 0:r1] = dout[r0:r1] V[0:r1]^T
      sgemm(Trans::No, Trans::Yes, r1 - r0, r1, hs, 1.0f, dy + r0 * C, C, v, ld, 0.0f,
            dp + r0 * T, T);
      // dV[r0:r1] = Pd[r0:T, r0:r1]^T dout[r0:T]
      sgemm(Trans::Yes, Trans::No, r1 - r0, hs, T - r0, 1.0f, p + r0 * T + r0, T, dy + r0 * C, C,
            0.0f, dv + r0 * ld, ld);
    }
    zero_upper(dp, T);
  }
}

}  // namespace eth::cpu
