// Vocabulary-parallel lookup and loss, written like cpu/encoder.cpp and cpu/crossentropy.cpp
// (the same vectorizable exp, the same channel blocking for gradient sums).
#include "kernels/cpu/vocab_parallel.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "kernels/cpu/vec_math.h"

namespace eth::cpu {
namespace {

constexpr std::int64_t kChannelBlock = 64;

}  // namespace

void vocab_embedding_forward(float* out, const std::int32_t* tokens, const float* wte_rows,
                             std::int64_t v0, std::int64_t Vr, std::int64_t N, std::int64_t C,
                             std::int64_t V) {
  for (std::int64_t n = 0; n < N; ++n) {
    ETH_CHECK(tokens[n] >= 0 && tokens[n] < V, "vocab_embedding: token id out of range");
  }
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < N; ++n) {
    const std::int64_t row = static_cast<std::int64_t>(tokens[n]) - v0;
    float* o = out + n * C;
    if (row < 0 || row >= Vr) {
      std::fill(o, o + C, 0.0f);
      continue;
    }
    std::copy(wte_rows + row * C, wte_rows + (row + 1) * C, o);
  }
}

void vocab_embedding_backward(float* dwte_rows, const float* dout, const std::int32_t* tokens,
                              std::int64_t v0, std::int64_t Vr, std::int64_t N, std::int64_t C) {
  const std::int64_t blocks = (C + kChannelBlock - 1) / kChannelBlock;
  // Tokens may share a row, so threads split channels, never rows (as encoder_backward).
#pragma omp parallel for schedule(static)
  for (std::int64_t blk = 0; blk < blocks; ++blk) {
    const std::int64_t c0 = blk * kChannelBlock, c1 = std::min(C, c0 + kChannelBlock);
    for (std::int64_t n = 0; n < N; ++n) {
      const std::int64_t row = static_cast<std::int64_t>(tokens[n]) - v0;
      if (row < 0 || row >= Vr) continue;
      float* we = dwte_rows + row * C;
      const float* d = dout + n * C;
#pragma omp simd
      for (std::int64_t c = c0; c < c1; ++c) we[c] += d[c];
    }
  }
}

void position_forward(float* out, const float* wpe, std::int64_t B, std::int64_t T,
                      std::int64_t C) {
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < B * T; ++n) {
    const float* p = wpe + (n % T) * C;
    float* o = out + n * C;
#pragma omp simd
    for (std::int64_t c = 0; c < C; ++c) o[c] += p[c];
  }
}

void position_backward(float* dwpe, const float* dout, std::int64_t B, std::int64_t T,
                       std::int64_t C) {
  const std::int64_t blocks = (C + kChannelBlock - 1) / kChannelBlock;
#pragma omp parallel for schedule(static)
  for (std::int64_t blk = 0; blk < blocks; ++blk) {
    const std::int64_t c0 = blk * kChannelBlock, c1 = std::min(C, c0 + kChannelBlock);
    for (std::int64_t n = 0; n < B * T; ++n) {
      float* wp = dwpe + (n % T) * C;
      const float* d = dout + n * C;
#pragma omp simd
      for (std::int64_t c = c0; c < c1; ++c) wp[c] += d[c];
    }
  }
}

void vocab_ce_max(float* mx, const float* logits, std::int64_t N, std::int64_t Vr) {
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < N; ++n) {
    const float* z = logits + n * Vr;
    float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
    for (std::int64_t v = 0; v < Vr; ++v) m = z[v] > m ? z[v] : m;
    mx[n] = m;
  }
}

void vocab_ce_sums(float* stats, const float* logits, const float* mx, const std::int32_t* targets,
                   std::int64_t v0, std::int64_t N, std::int64_t Vr) {
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < N; ++n) {
    const float* z = logits + n * Vr;
    const float m = mx[n];
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (std::int64_t v = 0; v < Vr; ++v) sum += exp_approx(z[v] - m);
    const std::int64_t tgt = static_cast<std::int64_t>(targets[n]) - v0;
    stats[2 * n] = sum;
    stats[2 * n + 1] = tgt >= 0 && tgt < Vr ? z[tgt] : 0.0f;
  }
}

void vocab_ce_finish(double* loss, float* losses, float* lse, const float* mx, const float* stats,
                     double scale, std::int64_t N) {
  double total = 0.0;
  for (std::int64_t n = 0; n < N; ++n) {
    lse[n] = mx[n] + std::log(stats[2 * n]);
    losses[n] = lse[n] - stats[2 * n + 1];
    total += static_cast<double>(losses[n]);
  }
  *loss = scale * total;
}

void vocab_ce_backward(float* dlogits, const float* logits, const float* lse,
                       const std::int32_t* targets, std::int64_t v0, double scale, std::int64_t N,
                       std::int64_t Vr) {
  const auto s = static_cast<float>(scale);
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < N; ++n) {
    const float* z = logits + n * Vr;
    float* d = dlogits + n * Vr;
    const float l = lse[n];
#pragma omp simd
    for (std::int64_t v = 0; v < Vr; ++v) d[v] = s * exp_approx(z[v] - l);
    const std::int64_t tgt = static_cast<std::int64_t>(targets[n]) - v0;
    if (tgt >= 0 && tgt < Vr) d[tgt] -= s;
  }
}

}  // namespace eth::cpu
