// Vocabulary-parallel lookup and loss, written like cpu/encoder.cpp and cpu/crossentropy.cpp
// (the same vectorizable exp, the same channel blocking for gradient sums), one template per
// kernel for the fp32 and the bf16 storage types (cpu/storage.h: the fp32 instantiation is the
// fp32 kernel bit for bit).
#include "kernels/cpu/vocab_parallel.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "kernels/cpu/bf16/vocab_parallel.h"
#include "kernels/cpu/storage.h"
#include "kernels/cpu/vec_math.h"

namespace eth::cpu {
namespace {

constexpr std::int64_t kChannelBlock = 64;

template <typename W>
void embedding_forward(float* out, const std::int32_t* tokens, const W* wte_rows, std::int64_t v0,
                       std::int64_t Vr, std::int64_t N, std::int64_t C, std::int64_t V) {
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
    const W* w = wte_rows + row * C;
#pragma omp simd
    for (std::int64_t c = 0; c < C; ++c) o[c] = widen(w[c]);
  }
}

template <typename A>
void embedding_backward(float* dwte_rows, const A* dout, const std::int32_t* tokens,
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
      const A* d = dout + n * C;
#pragma omp simd
      for (std::int64_t c = c0; c < c1; ++c) we[c] += widen(d[c]);
    }
  }
}

// out = lookup + wpe, rounded to O once; out may alias lookup when O is float.
template <typename O, typename W>
void add_positions(O* out, const float* lookup, const W* wpe, std::int64_t B, std::int64_t T,
                   std::int64_t C) {
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < B * T; ++n) {
    const W* p = wpe + (n % T) * C;
    const float* in = lookup + n * C;
    O* o = out + n * C;
#pragma omp simd
    for (std::int64_t c = 0; c < C; ++c) o[c] = narrow<O>(in[c] + widen(p[c]));
  }
}

template <typename A>
void positions_backward(float* dwpe, const A* dout, std::int64_t B, std::int64_t T,
                        std::int64_t C) {
  const std::int64_t blocks = (C + kChannelBlock - 1) / kChannelBlock;
#pragma omp parallel for schedule(static)
  for (std::int64_t blk = 0; blk < blocks; ++blk) {
    const std::int64_t c0 = blk * kChannelBlock, c1 = std::min(C, c0 + kChannelBlock);
    for (std::int64_t n = 0; n < B * T; ++n) {
      float* wp = dwpe + (n % T) * C;
      const A* d = dout + n * C;
#pragma omp simd
      for (std::int64_t c = c0; c < c1; ++c) wp[c] += widen(d[c]);
    }
  }
}

template <typename A>
void ce_max(float* mx, const A* logits, std::int64_t N, std::int64_t Vr) {
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < N; ++n) {
    const A* z = logits + n * Vr;
    float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
    for (std::int64_t v = 0; v < Vr; ++v) m = widen(z[v]) > m ? widen(z[v]) : m;
    mx[n] = m;
  }
}

template <typename A>
void ce_sums(float* stats, const A* logits, const float* mx, const std::int32_t* targets,
             std::int64_t v0, std::int64_t N, std::int64_t Vr) {
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < N; ++n) {
    const A* z = logits + n * Vr;
    const float m = mx[n];
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (std::int64_t v = 0; v < Vr; ++v) sum += exp_approx(widen(z[v]) - m);
    const std::int64_t tgt = static_cast<std::int64_t>(targets[n]) - v0;
    stats[2 * n] = sum;
    stats[2 * n + 1] = tgt >= 0 && tgt < Vr ? widen(z[tgt]) : 0.0f;
  }
}

template <typename A>
void ce_backward(A* dlogits, const A* logits, const float* lse, const std::int32_t* targets,
                 std::int64_t v0, double scale, std::int64_t N, std::int64_t Vr) {
  const auto s = static_cast<float>(scale);
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < N; ++n) {
    const A* z = logits + n * Vr;
    A* d = dlogits + n * Vr;
    const float l = lse[n];
    const std::int64_t tgt = static_cast<std::int64_t>(targets[n]) - v0;
    const bool mine = tgt >= 0 && tgt < Vr;
    // Read before the row is overwritten (dlogits may alias logits); the target's entry is
    // rounded once, as s p - s (crossentropy_backward's form).
    const float p_target = mine ? exp_approx(widen(z[tgt]) - l) : 0.0f;
#pragma omp simd
    for (std::int64_t v = 0; v < Vr; ++v) d[v] = narrow<A>(s * exp_approx(widen(z[v]) - l));
    if (mine) d[tgt] = narrow<A>(s * p_target - s);
  }
}

}  // namespace

void vocab_embedding_forward(float* out, const std::int32_t* tokens, const float* wte_rows,
                             std::int64_t v0, std::int64_t Vr, std::int64_t N, std::int64_t C,
                             std::int64_t V) {
  embedding_forward(out, tokens, wte_rows, v0, Vr, N, C, V);
}

void vocab_embedding_backward(float* dwte_rows, const float* dout, const std::int32_t* tokens,
                              std::int64_t v0, std::int64_t Vr, std::int64_t N, std::int64_t C) {
  embedding_backward(dwte_rows, dout, tokens, v0, Vr, N, C);
}

void position_forward(float* out, const float* wpe, std::int64_t B, std::int64_t T,
                      std::int64_t C) {
  add_positions(out, out, wpe, B, T, C);
}

void position_backward(float* dwpe, const float* dout, std::int64_t B, std::int64_t T,
                       std::int64_t C) {
  positions_backward(dwpe, dout, B, T, C);
}

void vocab_ce_max(float* mx, const float* logits, std::int64_t N, std::int64_t Vr) {
  ce_max(mx, logits, N, Vr);
}

void vocab_ce_sums(float* stats, const float* logits, const float* mx, const std::int32_t* targets,
                   std::int64_t v0, std::int64_t N, std::int64_t Vr) {
  ce_sums(stats, logits, mx, targets, v0, N, Vr);
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
  ce_backward(dlogits, logits, lse, targets, v0, scale, N, Vr);
}

void bf16::vocab_embedding_forward(float* out, const std::int32_t* tokens, const Bf16* wte_rows,
                                   std::int64_t v0, std::int64_t Vr, std::int64_t N,
                                   std::int64_t C, std::int64_t V) {
  embedding_forward(out, tokens, wte_rows, v0, Vr, N, C, V);
}

void bf16::vocab_embedding_backward(float* dwte_rows, const Bf16* dout,
                                    const std::int32_t* tokens, std::int64_t v0, std::int64_t Vr,
                                    std::int64_t N, std::int64_t C) {
  embedding_backward(dwte_rows, dout, tokens, v0, Vr, N, C);
}

void bf16::position_forward(Bf16* out, const float* lookup, const Bf16* wpe, std::int64_t B,
                            std::int64_t T, std::int64_t C) {
  add_positions(out, lookup, wpe, B, T, C);
}

void bf16::position_backward(float* dwpe, const Bf16* dout, std::int64_t B, std::int64_t T,
                             std::int64_t C) {
  positions_backward(dwpe, dout, B, T, C);
}

void bf16::vocab_ce_max(float* mx, const Bf16* logits, std::int64_t N, std::int64_t Vr) {
  ce_max(mx, logits, N, Vr);
}

void bf16::vocab_ce_sums(float* stats, const Bf16* logits, const float* mx,
                         const std::int32_t* targets, std::int64_t v0, std::int64_t N,
                         std::int64_t Vr) {
  ce_sums(stats, logits, mx, targets, v0, N, Vr);
}

void bf16::vocab_ce_backward(Bf16* dlogits, const Bf16* logits, const float* lse,
                             const std::int32_t* targets, std::int64_t v0, double scale,
                             std::int64_t N, std::int64_t Vr) {
  ce_backward(dlogits, logits, lse, targets, v0, scale, N, Vr);
}

}  // namespace eth::cpu
