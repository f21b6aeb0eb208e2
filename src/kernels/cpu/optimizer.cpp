// AdamW (fp32, and fused with the bf16 copy: one template) and the sum of squares. See
// optimizer.h and bf16/optimizer.h.
#include "kernels/cpu/optimizer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/bf16/optimizer.h"

namespace eth::cpu {

namespace {
constexpr std::int64_t kBlock = 4096;  // elements per partial sum and per OpenMP chunk
constexpr std::int64_t kLanes = 8;     // running sums per block (one AVX-512 vector of doubles)

// AdamW on fp32 masters and moments; with kCopy, also the bf16 compute copy of the new weights.
template <bool kCopy>
void adamw(float* p, Bf16* copy, float* m, float* v, const float* grads, std::int64_t n,
           const AdamWScalars& s) {
  const float b1 = s.beta1, b2 = s.beta2, eps = s.eps, lr = s.lr, decay = s.decay;
  const float c1 = 1.0f - b1, c2 = 1.0f - b2, bc1 = s.bias_corr1, bc2 = s.bias_corr2;
  const float gs = s.grad_scale;
  const std::int64_t blocks = (n + kBlock - 1) / kBlock;
  // Chunks of whole blocks handed out dynamically: on a shared machine a thread that loses its
  // core does not hold the others at the barrier. Element-wise, so any split gives the same bits.
#pragma omp parallel for schedule(dynamic, 16) if (blocks > 16)
  for (std::int64_t blk = 0; blk < blocks; ++blk) {
    const std::int64_t lo = blk * kBlock, hi = std::min(n, lo + kBlock);
#pragma omp simd
    for (std::int64_t i = lo; i < hi; ++i) {
      const float g = grads[i] * gs;
      const float mi = b1 * m[i] + c1 * g;
      const float vi = b2 * v[i] + c2 * g * g;
      m[i] = mi;
      v[i] = vi;
      const float mhat = mi / bc1, vhat = vi / bc2;
      const float pi = p[i] - (lr * mhat / (std::sqrt(vhat) + eps) + decay * p[i]);
      p[i] = pi;
      if constexpr (kCopy) copy[i] = bf16_from_float(pi);
    }
  }
}

}  // namespace

void adamw_update(float* p, float* m, float* v, const float* grads, std::int64_t n,
                  const AdamWScalars& s) {
  adamw<false>(p, nullptr, m, v, grads, n, s);
}

void bf16::adamw_update(float* p, Bf16* p_bf16, float* m, float* v, const float* grads,
                        std::int64_t n, const AdamWScalars& s) {
  adamw<true>(p, p_bf16, m, v, grads, n, s);
}

double sum_squares(const float* x, std::int64_t n) {
  const std::int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(static_cast<std::size_t>(blocks));
#pragma omp parallel for schedule(dynamic, 16) if (blocks > 16)
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t lo = b * kBlock, hi = std::min(n, lo + kBlock);
    // Eight running sums, element lo + 8k + j into sum j, combined in a fixed order: the lanes
    // are explicit, so the bits do not depend on how (or whether) the compiler vectorizes, nor
    // on the buffer's alignment (each plan's unit spans start at different addresses).
    double acc[kLanes] = {};
    std::int64_t i = lo;
    for (; i + kLanes <= hi; i += kLanes) {
#pragma omp simd
      for (std::int64_t j = 0; j < kLanes; ++j) {
        acc[j] += static_cast<double>(x[i + j]) * static_cast<double>(x[i + j]);
      }
    }
    for (std::int64_t j = 0; i < hi; ++i, ++j) {
      acc[j] += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    }
    partial[static_cast<std::size_t>(b)] =
        ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  }
  double total = 0;
  for (double p : partial) total += p;
  return total;
}

}  // namespace eth::cpu
