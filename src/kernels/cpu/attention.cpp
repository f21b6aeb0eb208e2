// Causal attention kernels. The products run per (batch, head) as sgemm calls over row blocks
// of the lower triangle: rows [r0, r1) of a T x T matrix only need columns [0, r1), which skips
// most of the masked half (62% of the full product at T = 256 with 64-row blocks). The qkv
// layout is reference/attention.h's: per kv head g, its G query heads, k_g, v_g. The products
// that sum over a kv head's G query heads (dK, dV) run in one task per (batch, kv head), the
// first with beta 0 and the others adding (beta 1), so each element has one owner and one
// order; with G = 1 the calls are exactly those of multi-head attention.
#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "kernels/cpu/attention_blocks.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/threads.h"
#include "kernels/cpu/vec_math.h"

namespace eth::cpu {
namespace {

using attention_detail::for_kv_row_blocks;
using attention_detail::kRowBlock;

// Where query head h and kv head g sit in a token's row of qkv, ld columns wide.
struct Gqa {
  std::int64_t hs, G, NKV, ld;
  Gqa(std::int64_t C, std::int64_t NH, std::int64_t nkv) {
    ETH_CHECK(NH > 0 && C % NH == 0, "attention: C must be a multiple of NH");
    NKV = nkv == 0 ? NH : nkv;
    ETH_CHECK(NKV > 0 && NH % NKV == 0, "attention: NKV must divide NH");
    hs = C / NH;
    G = NH / NKV;
    ld = C + 2 * NKV * hs;
  }
  std::int64_t q(std::int64_t h) const { return (h / G * (G + 2) + h % G) * hs; }
  std::int64_t k(std::int64_t g) const { return (g * (G + 2) + G) * hs; }
  std::int64_t v(std::int64_t g) const { return (g * (G + 2) + G + 1) * hs; }
};

// Zeroes the strict upper triangle of a T x T matrix.
void zero_upper(float* m, std::int64_t T) {
  for (std::int64_t t = 0; t + 1 < T; ++t) std::fill(m + t * T + t + 1, m + (t + 1) * T, 0.0f);
}

}  // namespace

void attention_scores_forward(float* scores, const float* qkv, std::int64_t B, std::int64_t T,
                              std::int64_t C, std::int64_t NH, std::int64_t NKV) {
  const Gqa L(C, NH, NKV);
  const std::int64_t hs = L.hs, ld = L.ld;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel for schedule(static)
  for (std::int64_t bh = 0; bh < B * NH; ++bh) {
    const std::int64_t b = bh / NH, h = bh % NH;
    const float* q = qkv + b * T * ld + L.q(h);
    const float* k = qkv + b * T * ld + L.k(h / L.G);
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
                               std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH,
                               std::int64_t NKV) {
  const Gqa L(C, NH, NKV);
  const std::int64_t hs = L.hs, ld = L.ld;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  for_kv_row_blocks(B, L.NKV, T, [&](std::int64_t b, std::int64_t g, std::int64_t r0) {
    const std::int64_t r1 = std::min(T, r0 + kRowBlock);
    const float* k = qkv + b * T * ld + L.k(g);
    float* dk = dqkv + b * T * ld + L.k(g);
    for (std::int64_t j = 0; j < L.G; ++j) {
      const std::int64_t h = g * L.G + j;
      const float* q = qkv + b * T * ld + L.q(h);
      float* dq = dqkv + b * T * ld + L.q(h);
      const float* ds = dscores + (b * NH + h) * T * T;
      // dQ[r0:r1] = dS[r0:r1, 0:r1] K[0:r1]
      sgemm(Trans::No, Trans::No, r1 - r0, hs, r1, scale, ds + r0 * T, T, k, ld, 0.0f,
            dq + r0 * ld, ld);
      // dK[r0:r1] (+)= dS[r0:T, r0:r1]^T Q[r0:T], summed over the group's query heads
      sgemm(Trans::Yes, Trans::No, r1 - r0, hs, T - r0, scale, ds + r0 * T + r0, T, q + r0 * ld,
            ld, j == 0 ? 0.0f : 1.0f, dk + r0 * ld, ld);
    }
  });
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
                          std::int64_t T, std::int64_t C, std::int64_t NH, std::int64_t NKV) {
  const Gqa L(C, NH, NKV);
  const std::int64_t hs = L.hs, ld = L.ld;
#pragma omp parallel for schedule(static)
  for (std::int64_t bh = 0; bh < B * NH; ++bh) {
    const std::int64_t b = bh / NH, h = bh % NH;
    const float* v = qkv + b * T * ld + L.v(h / L.G);
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
                           std::int64_t NH, std::int64_t NKV) {
  const Gqa L(C, NH, NKV);
  const std::int64_t hs = L.hs, ld = L.ld;
  for_kv_row_blocks(B, L.NKV, T, [&](std::int64_t b, std::int64_t g, std::int64_t r0) {
    const std::int64_t r1 = std::min(T, r0 + kRowBlock);
    const float* v = qkv + b * T * ld + L.v(g);
    float* dv = dqkv + b * T * ld + L.v(g);
    for (std::int64_t j = 0; j < L.G; ++j) {
      const std::int64_t bh = b * NH + g * L.G + j;
      const float* p = Pd + bh * T * T;
      const float* dy = dout + b * T * C + (g * L.G + j) * hs;
      float* dp = dPd + bh * T * T;
      // dPd[r0:r1, 0:r1] = dout[r0:r1] V[0:r1]^T, 0 above the diagonal
      sgemm(Trans::No, Trans::Yes, r1 - r0, r1, hs, 1.0f, dy + r0 * C, C, v, ld, 0.0f,
            dp + r0 * T, T);
      for (std::int64_t t = r0; t < r1; ++t) std::fill(dp + t * T + t + 1, dp + (t + 1) * T, 0.0f);
      // dV[r0:r1] (+)= Pd[r0:T, r0:r1]^T dout[r0:T], summed over the group's query heads
      sgemm(Trans::Yes, Trans::No, r1 - r0, hs, T - r0, 1.0f, p + r0 * T + r0, T, dy + r0 * C, C,
            j == 0 ? 0.0f : 1.0f, dv + r0 * ld, ld);
    }
  });
}

}  // namespace eth::cpu
