// bf16 causal attention. As in cpu/attention.cpp, the products run per (batch, head) over row
// blocks of the lower triangle (rows [r0, r1) need columns [0, r1) only); every operand is a
// strided view of qkv, P or out, described by its leading dimension.
#include "kernels/cpu/bf16/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/bf16/gemm.h"
#include "kernels/cpu/vec_math.h"

namespace eth::cpu::bf16 {
namespace {

constexpr std::int64_t kRowBlock = 64;

std::int64_t head_size(std::int64_t C, std::int64_t NH) {
  ETH_CHECK(NH > 0 && C % NH == 0, "attention: C must be a multiple of NH");
  return C / NH;
}

void check_layout(const QkvLayout& L, std::int64_t hs, std::int64_t NH) {
  // Every head's three column ranges must lie inside a row.
  ETH_CHECK(L.row > 0 && L.head >= 0 && L.k >= 0 && L.v >= 0 &&
                (NH - 1) * L.head + std::max(L.k, L.v) + hs <= L.row,
            "attention: qkv layout does not fit its row");
}

// Zeroes the strict upper triangle of a T x T matrix.
void zero_upper(Bf16* m, std::int64_t T) {
  for (std::int64_t t = 0; t + 1 < T; ++t) {
    std::fill(m + t * T + t + 1, m + (t + 1) * T, Bf16{0});
  }
}

// The fp32 score tile of one row block, per thread: grown once to kRowBlock x T, then reused.
float* score_tile(std::int64_t T) {
  thread_local std::vector<float> tile;
  const auto n = static_cast<std::size_t>(kRowBlock * T);
  if (tile.size() < n) tile.resize(n);
  return tile.data();
}

}  // namespace

QkvLayout QkvLayout::blocked(std::int64_t C, std::int64_t NH) {
  return QkvLayout{3 * C, head_size(C, NH), C, 2 * C};
}

QkvLayout QkvLayout::head_interleaved(std::int64_t C, std::int64_t NH) {
  const std::int64_t hs = head_size(C, NH);
  return QkvLayout{3 * C, 3 * hs, hs, 2 * hs};
}

void attention_probs_forward(Bf16* P, const Bf16* qkv, const QkvLayout& L, std::int64_t B,
                             std::int64_t T, std::int64_t C, std::int64_t NH) {
  const std::int64_t hs = head_size(C, NH), ld = L.row;
  check_layout(L, hs, NH);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel for schedule(static)
  for (std::int64_t bh = 0; bh < B * NH; ++bh) {
    const std::int64_t b = bh / NH, h = bh % NH;
    const Bf16* q = qkv + b * T * ld + h * L.head;
    const Bf16* k = q + L.k;
    Bf16* p = P + bh * T * T;
    float* tile = score_tile(T);
    for (std::int64_t r0 = 0; r0 < T; r0 += kRowBlock) {
      const std::int64_t r1 = std::min(T, r0 + kRowBlock);
      // tile[0:r1-r0, 0:r1] = Q[r0:r1] K[0:r1]^T / sqrt(hs), in fp32
      gemm(Trans::No, Trans::Yes, r1 - r0, r1, hs, scale, q + r0 * ld, ld, k, ld, 0.0f, tile, r1);
      for (std::int64_t t = r0; t < r1; ++t) {
        const float* s = tile + (t - r0) * r1;
        Bf16* row = p + t * T;
        float mx = s[0];
#pragma omp simd reduction(max : mx)
        for (std::int64_t t2 = 0; t2 <= t; ++t2) mx = s[t2] > mx ? s[t2] : mx;
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (std::int64_t t2 = 0; t2 <= t; ++t2) sum += exp_approx(s[t2] - mx);
        const float inv = 1.0f / sum;
#pragma omp simd
        for (std::int64_t t2 = 0; t2 <= t; ++t2) {
          row[t2] = bf16_from_float(exp_approx(s[t2] - mx) * inv);
        }
        std::fill(row + t + 1, row + T, Bf16{0});
      }
    }
  }
}

void attention_softmax_backward(Bf16* dscores, const Bf16* dP, const Bf16* P, std::int64_t B,
                                std::int64_t NH, std::int64_t T) {
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < B * NH * T; ++r) {
    const std::int64_t t = r % T;
    const Bf16* dp = dP + r * T;
    const Bf16* p = P + r * T;
    Bf16* ds = dscores + r * T;
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (std::int64_t t2 = 0; t2 <= t; ++t2) dot += float_from_bf16(dp[t2]) * float_from_bf16(p[t2]);
#pragma omp simd
    for (std::int64_t t2 = 0; t2 <= t; ++t2) {
      ds[t2] = bf16_from_float(float_from_bf16(p[t2]) * (float_from_bf16(dp[t2]) - dot));
    }
    std::fill(ds + t + 1, ds + T, Bf16{0});
  }
}

void attention_scores_backward(Bf16* dqkv, const Bf16* dscores, const Bf16* qkv,
                               const QkvLayout& L, std::int64_t B, std::int64_t T, std::int64_t C,
                               std::int64_t NH) {
  const std::int64_t hs = head_size(C, NH), ld = L.row;
  check_layout(L, hs, NH);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel for schedule(static)
  for (std::int64_t bh = 0; bh < B * NH; ++bh) {
    const std::int64_t b = bh / NH, h = bh % NH;
    const Bf16* q = qkv + b * T * ld + h * L.head;
    const Bf16* k = q + L.k;
    Bf16* dq = dqkv + b * T * ld + h * L.head;
    Bf16* dk = dq + L.k;
    const Bf16* ds = dscores + bh * T * T;
    for (std::int64_t r0 = 0; r0 < T; r0 += kRowBlock) {
      const std::int64_t r1 = std::min(T, r0 + kRowBlock);
      // dQ[r0:r1] = dS[r0:r1, 0:r1] K[0:r1] / sqrt(hs)
      gemm(Trans::No, Trans::No, r1 - r0, hs, r1, scale, ds + r0 * T, T, k, ld, nullptr,
           dq + r0 * ld, ld);
      // dK[r0:r1] = dS[r0:T, r0:r1]^T Q[r0:T] / sqrt(hs)
      gemm(Trans::Yes, Trans::No, r1 - r0, hs, T - r0, scale, ds + r0 * T + r0, T, q + r0 * ld,
           ld, nullptr, dk + r0 * ld, ld);
    }
  }
}

void attention_av_forward(Bf16* out, const Bf16* Pd, const Bf16* qkv, const QkvLayout& L,
                          std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH) {
  const std::int64_t hs = head_size(C, NH), ld = L.row;
  check_layout(L, hs, NH);
#pragma omp parallel for schedule(static)
  for (std::int64_t bh = 0; bh < B * NH; ++bh) {
    const std::int64_t b = bh / NH, h = bh % NH;
    const Bf16* v = qkv + b * T * ld + h * L.head + L.v;
    const Bf16* p = Pd + bh * T * T;
    Bf16* o = out + b * T * C + h * hs;
    for (std::int64_t r0 = 0; r0 < T; r0 += kRowBlock) {
      const std::int64_t r1 = std::min(T, r0 + kRowBlock);
      // out[r0:r1] = Pd[r0:r1, 0:r1] V[0:r1]
      gemm(Trans::No, Trans::No, r1 - r0, hs, r1, 1.0f, p + r0 * T, T, v, ld, nullptr,
           o + r0 * C, C);
    }
  }
}

void attention_av_backward(Bf16* dPd, Bf16* dqkv, const Bf16* dout, const Bf16* Pd,
                           const Bf16* qkv, const QkvLayout& L, std::int64_t B, std::int64_t T,
                           std::int64_t C, std::int64_t NH) {
  const std::int64_t hs = head_size(C, NH), ld = L.row;
  check_layout(L, hs, NH);
#pragma omp parallel for schedule(static)
  for (std::int64_t bh = 0; bh < B * NH; ++bh) {
    const std::int64_t b = bh / NH, h = bh % NH;
    const Bf16* v = qkv + b * T * ld + h * L.head + L.v;
    const Bf16* p = Pd + bh * T * T;
    const Bf16* dy = dout + b * T * C + h * hs;
    Bf16* dp = dPd + bh * T * T;
    Bf16* dv = dqkv + b * T * ld + h * L.head + L.v;
    for (std::int64_t r0 = 0; r0 < T; r0 += kRowBlock) {
      const std::int64_t r1 = std::min(T, r0 + kRowBlock);
      // dPd[r0:r1, 0:r1] = dout[r0:r1] V[0:r1]^T
      gemm(Trans::No, Trans::Yes, r1 - r0, r1, hs, 1.0f, dy + r0 * C, C, v, ld, nullptr,
           dp + r0 * T, T);
      // dV[r0:r1] = Pd[r0:T, r0:r1]^T dout[r0:T]
      gemm(Trans::Yes, Trans::No, r1 - r0, hs, T - r0, 1.0f, p + r0 * T + r0, T, dy + r0 * C, C,
           nullptr, dv + r0 * ld, ld);
    }
    zero_upper(dp, T);
  }
}

}  // namespace eth::cpu::bf16
