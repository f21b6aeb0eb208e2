// bf16 causal attention. As in cpu/attention.cpp, the products run per (batch, head) over row
// blocks of the lower triangle (rows [r0, r1) need columns [0, r1) only); every operand is a
// strided view of qkv, P or out, described by its leading dimension. Under grouped-query
// attention (G > 1 query heads per kv head) dK and dV sum the G heads' products in a per-thread
// fp32 tile and round once; with G = 1 the calls are exactly those of multi-head attention.
#include "kernels/cpu/bf16/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/attention_blocks.h"
#include "kernels/cpu/bf16/gemm.h"
#include "kernels/cpu/threads.h"
#include "kernels/cpu/vec_math.h"

namespace eth::cpu::bf16 {
namespace {

using attention_detail::for_kv_row_blocks;
using attention_detail::kRowBlock;

std::int64_t head_size(std::int64_t C, std::int64_t NH) {
  ETH_CHECK(NH > 0 && C % NH == 0, "attention: C must be a multiple of NH");
  return C / NH;
}

// The query and kv heads of a call and where they sit (QkvLayout's formulas).
struct Heads {
  std::int64_t hs, NH, NKV, G;
  const QkvLayout& L;
  Heads(const QkvLayout& l, std::int64_t C, std::int64_t nh, std::int64_t nkv) : L(l) {
    hs = head_size(C, nh);
    NH = nh;
    NKV = nkv == 0 ? nh : nkv;
    ETH_CHECK(NKV > 0 && NH % NKV == 0, "attention: NKV must divide NH");
    G = NH / NKV;
    const std::int64_t kv = L.kv_head != 0 ? L.kv_head : L.head;
    // Every head's column ranges must lie inside a row.
    ETH_CHECK(L.row > 0 && L.head >= 0 && L.k >= 0 && L.v >= 0 && L.q_step >= 0 && kv >= 0 &&
                  (NKV - 1) * L.head + (G - 1) * L.q_step + hs <= L.row &&
                  (NKV - 1) * kv + std::max(L.k, L.v) + hs <= L.row,
              "attention: qkv layout does not fit its row");
  }
  std::int64_t q(std::int64_t h) const { return h / G * L.head + h % G * L.q_step; }
  std::int64_t k(std::int64_t g) const { return g * (L.kv_head != 0 ? L.kv_head : L.head) + L.k; }
  std::int64_t v(std::int64_t g) const { return g * (L.kv_head != 0 ? L.kv_head : L.head) + L.v; }
};

// The fp32 score tile of one row block, per thread: grown once to kRowBlock x T, then reused.
float* score_tile(std::int64_t T) {
  thread_local std::vector<float> tile;
  const auto n = static_cast<std::size_t>(kRowBlock * T);
  if (tile.size() < n) tile.resize(n);
  return tile.data();
}

// The fp32 sum of a kv head's gradient rows over its query heads, per thread (kRowBlock x hs).
float* kv_tile(std::int64_t hs) {
  thread_local std::vector<float> tile;
  const auto n = static_cast<std::size_t>(kRowBlock * hs);
  if (tile.size() < n) tile.resize(n);
  return tile.data();
}

// dst rows (ld apart) = the (rows, hs) fp32 tile, rounded once.
void store_tile(Bf16* dst, std::int64_t ld, const float* tile, std::int64_t rows,
                std::int64_t hs) {
  for (std::int64_t r = 0; r < rows; ++r) {
#pragma omp simd
    for (std::int64_t i = 0; i < hs; ++i) dst[r * ld + i] = bf16_from_float(tile[r * hs + i]);
  }
}

}  // namespace

QkvLayout QkvLayout::blocked(std::int64_t C, std::int64_t NH, std::int64_t NKV) {
  const std::int64_t hs = head_size(C, NH);
  if (NKV == 0) NKV = NH;
  ETH_CHECK(NKV > 0 && NH % NKV == 0, "attention: NKV must divide NH");
  const std::int64_t G = NH / NKV;
  return QkvLayout{C + 2 * NKV * hs, G * hs, C, C + NKV * hs, hs, hs};
}

QkvLayout QkvLayout::head_interleaved(std::int64_t C, std::int64_t NH, std::int64_t NKV) {
  const std::int64_t hs = head_size(C, NH);
  if (NKV == 0) NKV = NH;
  ETH_CHECK(NKV > 0 && NH % NKV == 0, "attention: NKV must divide NH");
  const std::int64_t G = NH / NKV;
  return QkvLayout{C + 2 * NKV * hs, (G + 2) * hs, G * hs, (G + 1) * hs, hs, 0};
}

void attention_probs_forward(Bf16* P, const Bf16* qkv, const QkvLayout& L, std::int64_t B,
                             std::int64_t T, std::int64_t C, std::int64_t NH, std::int64_t NKV) {
  const Heads H(L, C, NH, NKV);
  const std::int64_t hs = H.hs, ld = L.row;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel for schedule(static)
  for (std::int64_t bh = 0; bh < B * NH; ++bh) {
    const std::int64_t b = bh / NH, h = bh % NH;
    const Bf16* q = qkv + b * T * ld + H.q(h);
    const Bf16* k = qkv + b * T * ld + H.k(h / H.G);
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
                               std::int64_t NH, std::int64_t NKV) {
  const Heads H(L, C, NH, NKV);
  const std::int64_t hs = H.hs, ld = L.row, G = H.G;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  for_kv_row_blocks(B, H.NKV, T, [&](std::int64_t b, std::int64_t g, std::int64_t r0) {
    const std::int64_t r1 = std::min(T, r0 + kRowBlock);
    const Bf16* k = qkv + b * T * ld + H.k(g);
    Bf16* dk = dqkv + b * T * ld + H.k(g);
    float* acc = G > 1 ? kv_tile(hs) : nullptr;
    for (std::int64_t j = 0; j < G; ++j) {
      const std::int64_t h = g * G + j;
      const Bf16* q = qkv + b * T * ld + H.q(h);
      Bf16* dq = dqkv + b * T * ld + H.q(h);
      const Bf16* ds = dscores + (b * NH + h) * T * T;
      // dQ[r0:r1] = dS[r0:r1, 0:r1] K[0:r1] / sqrt(hs)
      gemm(Trans::No, Trans::No, r1 - r0, hs, r1, scale, ds + r0 * T, T, k, ld, nullptr,
           dq + r0 * ld, ld);
      // dK[r0:r1] = dS[r0:T, r0:r1]^T Q[r0:T] / sqrt(hs), summed over the group in fp32
      if (G == 1) {
        gemm(Trans::Yes, Trans::No, r1 - r0, hs, T - r0, scale, ds + r0 * T + r0, T, q + r0 * ld,
             ld, nullptr, dk + r0 * ld, ld);
      } else {
        gemm(Trans::Yes, Trans::No, r1 - r0, hs, T - r0, scale, ds + r0 * T + r0, T, q + r0 * ld,
             ld, j == 0 ? 0.0f : 1.0f, acc, hs);
      }
    }
    if (G > 1) store_tile(dk + r0 * ld, ld, acc, r1 - r0, hs);
  });
}

void attention_av_forward(Bf16* out, const Bf16* Pd, const Bf16* qkv, const QkvLayout& L,
                          std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH,
                          std::int64_t NKV) {
  const Heads H(L, C, NH, NKV);
  const std::int64_t hs = H.hs, ld = L.row;
#pragma omp parallel for schedule(static)
  for (std::int64_t bh = 0; bh < B * NH; ++bh) {
    const std::int64_t b = bh / NH, h = bh % NH;
    const Bf16* v = qkv + b * T * ld + H.v(h / H.G);
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
                           std::int64_t C, std::int64_t NH, std::int64_t NKV) {
  const Heads H(L, C, NH, NKV);
  const std::int64_t hs = H.hs, ld = L.row, G = H.G;
  for_kv_row_blocks(B, H.NKV, T, [&](std::int64_t b, std::int64_t g, std::int64_t r0) {
    const std::int64_t r1 = std::min(T, r0 + kRowBlock);
    const Bf16* v = qkv + b * T * ld + H.v(g);
    Bf16* dv = dqkv + b * T * ld + H.v(g);
    float* acc = G > 1 ? kv_tile(hs) : nullptr;
    for (std::int64_t j = 0; j < G; ++j) {
      const std::int64_t h = g * G + j;
      const Bf16* p = Pd + (b * NH + h) * T * T;
      const Bf16* dy = dout + b * T * C + h * hs;
      Bf16* dp = dPd + (b * NH + h) * T * T;
      // dPd[r0:r1, 0:r1] = dout[r0:r1] V[0:r1]^T, 0 above the diagonal
      gemm(Trans::No, Trans::Yes, r1 - r0, r1, hs, 1.0f, dy + r0 * C, C, v, ld, nullptr,
           dp + r0 * T, T);
      for (std::int64_t t = r0; t < r1; ++t) {
        std::fill(dp + t * T + t + 1, dp + (t + 1) * T, Bf16{0});
      }
      // dV[r0:r1] = Pd[r0:T, r0:r1]^T dout[r0:T], summed over the group in fp32
      if (G == 1) {
        gemm(Trans::Yes, Trans::No, r1 - r0, hs, T - r0, 1.0f, p + r0 * T + r0, T, dy + r0 * C, C,
             nullptr, dv + r0 * ld, ld);
      } else {
        gemm(Trans::Yes, Trans::No, r1 - r0, hs, T - r0, 1.0f, p + r0 * T + r0, T, dy + r0 * C, C,
             j == 0 ? 0.0f : 1.0f, acc, hs);
      }
    }
    if (G > 1) store_tile(dv + r0 * ld, ld, acc, r1 - r0, hs);
  });
}

}  // namespace eth::cpu::bf16
