// Softmax cross-entropy: one row per token, max / exp-sum / log-sum-exp in float with the
// vectorizable exp of vec_math.h.
#include "kernels/cpu/crossentropy.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "kernels/cpu/vec_math.h"

namespace eth::cpu {
namespace {

void check_targets(const std::int32_t* targets, std::int64_t N, std::int64_t V) {
  for (std::int64_t n = 0; n < N; ++n) {
    ETH_CHECK(targets[n] >= 0 && targets[n] < V, "crossentropy: target out of range");
  }
}

}  // namespace

void crossentropy_forward(double* loss, float* losses, float* lse, const float* logits,
                          const std::int32_t* targets, double scale, std::int64_t N,
                          std::int64_t V) {
  check_targets(targets, N, V);
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < N; ++n) {
    const float* z = logits + n * V;
    float mx = z[0];
    // Written as a select, not std::max: GCC vectorizes this form.
#pragma omp simd reduction(max : mx)
    for (std::int64_t v = 0; v < V; ++v) mx = z[v] > mx ? z[v] : mx;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (std::int64_t v = 0; v < V; ++v) sum += exp_approx(z[v] - mx);
    lse[n] = mx + std::log(sum);
    losses[n] = lse[n] - z[targets[n]];
  }
  double total = 0.0;
  for (std::int64_t n = 0; n < N; ++n) total += static_cast<double>(losses[n]);
  *loss = scale * total;
}

void crossentropy_backward(float* dlogits, const float* logits, const float* lse,
                           const std::int32_t* targets, double scale, std::int64_t N,
                           std::int64_t V) {
  check_targets(targets, N, V);
  const auto s = static_cast<float>(scale);
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < N; ++n) {
    const float* z = logits + n * V;
    float* d = dlogits + n * V;
    const float l = lse[n];
#pragma omp simd
    for (std::int64_t v = 0; v < V; ++v) d[v] = s * exp_approx(z[v] - l);
    d[targets[n]] -= s;
  }
}

}  // namespace eth::cpu
