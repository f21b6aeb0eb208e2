// Fused AdamW + bf16 copy. The element formula must stay the one of cpu/optimizer.cpp (a test
// compares the two bit for bit), so it is written here in the same operation order.
#include "kernels/cpu/bf16/optimizer.h"

#include <algorithm>
#include <cmath>

namespace eth::cpu::bf16 {
namespace {
constexpr std::int64_t kBlock = 4096;  // elements per OpenMP chunk, as in cpu/optimizer.cpp
}  // namespace

void adamw_update(float* p, Bf16* p_bf16, float* m, float* v, const float* grads, std::int64_t n,
                  const AdamWScalars& s) {
  const float b1 = s.beta1, b2 = s.beta2, eps = s.eps, lr = s.lr, decay = s.decay;
  const float c1 = 1.0f - b1, c2 = 1.0f - b2, bc1 = s.bias_corr1, bc2 = s.bias_corr2;
  const float gs = s.grad_scale;
  const std::int64_t blocks = (n + kBlock - 1) / kBlock;
  // Dynamic chunks for the same reason as cpu::adamw_update: a thread that loses its core on a
  // shared machine does not hold the others up; element-wise, so any split gives the same bits.
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
      p_bf16[i] = bf16_from_float(pi);
    }
  }
}

}  // namespace eth::cpu::bf16
