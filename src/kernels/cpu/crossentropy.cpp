// Softmax cross-entropy on fp32 or bf16 logits (one template each; cpu/storage.h): one row per
// token, max / exp-sum / log-sum-exp in fp32 with the vectorizable exp of vec_math.h.
#include "kernels/cpu/crossentropy.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "kernels/cpu/bf16/crossentropy.h"
#include "kernels/cpu/storage.h"
#include "kernels/cpu/vec_math.h"

namespace eth::cpu {
namespace {

void check_targets(const std::int32_t* targets, std::int64_t N, std::int64_t V) {
  for (std::int64_t n = 0; n < N; ++n) {
    ETH_CHECK(targets[n] >= 0 && targets[n] < V, "crossentropy: target out of range");
  }
}

template <typename A>
void forward(double* loss, float* losses, float* lse, const A* logits,
             const std::int32_t* targets, double scale, std::int64_t N, std::int64_t V) {
  check_targets(targets, N, V);
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < N; ++n) {
    const A* z = logits + n * V;
    float mx = widen(z[0]);
    // Written as a select, not std::max: GCC vectorizes this form.
#pragma omp simd reduction(max : mx)
    for (std::int64_t v = 0; v < V; ++v) mx = widen(z[v]) > mx ? widen(z[v]) : mx;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (std::int64_t v = 0; v < V; ++v) sum += exp_approx(widen(z[v]) - mx);
    lse[n] = mx + std::log(sum);
    losses[n] = lse[n] - widen(z[targets[n]]);
  }
  double total = 0.0;
  for (std::int64_t n = 0; n < N; ++n) total += static_cast<double>(losses[n]);
  *loss = scale * total;
}

template <typename A>
void backward(A* dlogits, const A* logits, const float* lse, const std::int32_t* targets,
              double scale, std::int64_t N, std::int64_t V) {
  check_targets(targets, N, V);
  const auto s = static_cast<float>(scale);
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < N; ++n) {
    const A* z = logits + n * V;
    A* d = dlogits + n * V;
    const float l = lse[n];
    const std::int64_t target = targets[n];
    // Read before the row is overwritten (dlogits may alias logits); the target's entry is
    // rounded once, as s p - s.
    const float p_target = exp_approx(widen(z[target]) - l);
#pragma omp simd
    for (std::int64_t v = 0; v < V; ++v) d[v] = narrow<A>(s * exp_approx(widen(z[v]) - l));
    d[target] = narrow<A>(s * p_target - s);
  }
}

}  // namespace

void crossentropy_forward(double* loss, float* losses, float* lse, const float* logits,
                          const std::int32_t* targets, double scale, std::int64_t N,
                          std::int64_t V) {
  forward(loss, losses, lse, logits, targets, scale, N, V);
}

void crossentropy_backward(float* dlogits, const float* logits, const float* lse,
                           const std::int32_t* targets, double scale, std::int64_t N,
                           std::int64_t V) {
  backward(dlogits, logits, lse, targets, scale, N, V);
}

void bf16::crossentropy_forward(double* loss, float* losses, float* lse, const Bf16* logits,
                                const std::int32_t* targets, double scale, std::int64_t N,
                                std::int64_t V) {
  forward(loss, losses, lse, logits, targets, scale, N, V);
}

void bf16::crossentropy_backward(Bf16* dlogits, const Bf16* logits, const float* lse,
                                 const std::int32_t* targets, double scale, std::int64_t N,
                                 std::int64_t V) {
  backward(dlogits, logits, lse, targets, scale, N, V);
}

}  // namespace eth::cpu
