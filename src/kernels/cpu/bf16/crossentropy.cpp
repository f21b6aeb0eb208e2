// bf16-input cross-entropy: the fp32 algorithm of cpu/crossentropy.cpp on widened logits.
#include "kernels/cpu/bf16/crossentropy.h"

#include <cmath>

#include "core/error.h"
#include "kernels/cpu/vec_math.h"

namespace eth::cpu::bf16 {
namespace {

void check_targets(const std::int32_t* targets, std::int64_t N, std::int64_t V) {
  for (std::int64_t n = 0; n < N; ++n) {
    ETH_CHECK(targets[n] >= 0 && targets[n] < V, "crossentropy: target out of range");
  }
}

}  // namespace

void crossentropy_forward(double* loss, float* losses, float* lse, const Bf16* logits,
                          const std::int32_t* targets, double scale, std::int64_t N,
                          std::int64_t V) {
  check_targets(targets, N, V);
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < N; ++n) {
    const Bf16* z = logits + n * V;
    float mx = float_from_bf16(z[0]);
#pragma omp simd reduction(max : mx)
    for (std::int64_t v = 0; v < V; ++v) {
      const float x = float_from_bf16(z[v]);
      mx = x > mx ? x : mx;
    }
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (std::int64_t v = 0; v < V; ++v) sum += exp_approx(float_from_bf16(z[v]) - mx);
    lse[n] = mx + std::log(sum);
    losses[n] = lse[n] - float_from_bf16(z[targets[n]]);
  }
  double total = 0.0;
  for (std::int64_t n = 0; n < N; ++n) total += static_cast<double>(losses[n]);
  *loss = scale * total;
}

void crossentropy_backward(Bf16* dlogits, const Bf16* logits, const float* lse,
                           const std::int32_t* targets, double scale, std::int64_t N,
                           std::int64_t V) {
  check_targets(targets, N, V);
  const auto s = static_cast<float>(scale);
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < N; ++n) {
    const Bf16* z = logits + n * V;
    Bf16* d = dlogits + n * V;
    const float l = lse[n];
    const std::int64_t target = targets[n];
    // The target's entry is read before the loop may overwrite it (dlogits may alias logits).
    const float p_target = exp_approx(float_from_bf16(z[target]) - l);
#pragma omp simd
    for (std::int64_t v = 0; v < V; ++v) d[v] = bf16_from_float(s * exp_approx(float_from_bf16(z[v]) - l));
    d[target] = bf16_from_float(s * p_target - s);
  }
}

}  // namespace eth::cpu::bf16
