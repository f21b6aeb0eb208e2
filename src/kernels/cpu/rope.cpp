// Rotary position embedding, fp32 and bf16 storage (one template; cpu/storage.h). OpenMP over
// positions t: a thread forms the hd/2 cos and sin of its position once (double angle, rounded
// to float) and applies them to that position's row in every sequence of the batch; the pairs
// of a head are rotated in a vectorized loop. Every element is owned by one thread.
#include "kernels/cpu/rope.h"

#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/bf16/rope.h"
#include "kernels/cpu/storage.h"

namespace eth::cpu {
namespace {

// A per-thread scratch of n values, grown once and reused (kernels take no caller buffers for
// these O(hd) tables).
template <typename T, int Tag>
T* scratch(std::size_t n) {
  thread_local std::vector<T> v;
  if (v.size() < n) v.resize(n);
  return v.data();
}

template <typename A>
void rotate(A* qkv, std::int64_t B, std::int64_t T, std::int64_t NH, std::int64_t NKV,
            std::int64_t hd, float theta, double sign) {
  ETH_CHECK(NKV > 0 && NH % NKV == 0, "rope: NKV must divide NH");
  ETH_CHECK(hd > 0 && hd % 2 == 0, "rope: the head size must be even");
  const std::int64_t G = NH / NKV, half = hd / 2, row = (NH + 2 * NKV) * hd;
  // w_i = theta^(-2i/hd), the very expression of the reference, so the angles agree exactly.
  double* freq = scratch<double, 0>(static_cast<std::size_t>(half));
  for (std::int64_t i = 0; i < half; ++i) {
    freq[i] = std::pow(static_cast<double>(theta),
                       -2.0 * static_cast<double>(i) / static_cast<double>(hd));
  }
#pragma omp parallel for schedule(static)
  for (std::int64_t t = 0; t < T; ++t) {
    float* cs = scratch<float, 1>(static_cast<std::size_t>(hd));
    float* sn = cs + half;
    for (std::int64_t i = 0; i < half; ++i) {
      const double a = static_cast<double>(t) * freq[i];
      cs[i] = static_cast<float>(std::cos(a));
      sn[i] = static_cast<float>(sign * std::sin(a));
    }
    for (std::int64_t b = 0; b < B; ++b) {
      A* r = qkv + (b * T + t) * row;
      for (std::int64_t g = 0; g < NKV; ++g) {
        for (std::int64_t j = 0; j <= G; ++j) {  // G query heads, then k; v is left alone
          A* x = r + (g * (G + 2) + j) * hd;
          A* y = x + half;
#pragma omp simd
          for (std::int64_t i = 0; i < half; ++i) {
            const float a = widen(x[i]), c = widen(y[i]);
            x[i] = narrow<A>(a * cs[i] - c * sn[i]);
            y[i] = narrow<A>(c * cs[i] + a * sn[i]);
          }
        }
      }
    }
  }
}

}  // namespace

void rope_forward(float* qkv, std::int64_t B, std::int64_t T, std::int64_t NH, std::int64_t NKV,
                  std::int64_t hd, float theta) {
  rotate(qkv, B, T, NH, NKV, hd, theta, 1.0);
}

void rope_backward(float* dqkv, std::int64_t B, std::int64_t T, std::int64_t NH, std::int64_t NKV,
                   std::int64_t hd, float theta) {
  rotate(dqkv, B, T, NH, NKV, hd, theta, -1.0);
}

void bf16::rope_forward(Bf16* qkv, std::int64_t B, std::int64_t T, std::int64_t NH,
                        std::int64_t NKV, std::int64_t hd, float theta) {
  rotate(qkv, B, T, NH, NKV, hd, theta, 1.0);
}

void bf16::rope_backward(Bf16* dqkv, std::int64_t B, std::int64_t T, std::int64_t NH,
                         std::int64_t NKV, std::int64_t hd, float theta) {
  rotate(dqkv, B, T, NH, NKV, hd, theta, -1.0);
}

}  // namespace eth::cpu
