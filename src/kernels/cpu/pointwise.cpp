// Element-wise kernels. GELU is evaluated as x * sigmoid(2u), u = sqrt(2/pi)(x + 0.044715 x^3)
// (0.5 (1 + tanh u) = sigmoid(2u)), with the vectorizable exp of vec_math.h.
#include "kernels/cpu/pointwise.h"

#include "core/error.h"
#include "kernels/constants.h"
#include "kernels/cpu/vec_math.h"

namespace eth::cpu {

void gelu_forward(float* out, const float* inp, std::int64_t N) {
  const auto k0 = static_cast<float>(kGeluSqrt2OverPi), k1 = static_cast<float>(kGeluCubic);
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < N; ++i) {
    const float x = inp[i];
    const float u = k0 * (x + k1 * x * x * x);
    out[i] = x * sigmoid_approx(2.0f * u);
  }
}

void gelu_backward(float* dinp, const float* dout, const float* inp, std::int64_t N) {
  const auto k0 = static_cast<float>(kGeluSqrt2OverPi), k1 = static_cast<float>(kGeluCubic);
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < N; ++i) {
    const float x = inp[i];
    const float u = k0 * (x + k1 * x * x * x);
    const float s = sigmoid_approx(2.0f * u);
    // d/dx [x s(2u)] = s + 2 x s (1 - s) u', u' = k0 (1 + 3 k1 x^2)
    const float grad = s + 2.0f * x * s * (1.0f - s) * k0 * (1.0f + 3.0f * k1 * x * x);
    dinp[i] = dout[i] * grad;
  }
}

void residual_forward(float* out, const float* res, const float* branch, std::int64_t N) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < N; ++i) out[i] = res[i] + branch[i];
}

void residual_backward(float* dres, float* dbranch, const float* dout, std::int64_t N) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < N; ++i) {
    dres[i] += dout[i];
    dbranch[i] = dout[i];
  }
}

void dropout_forward(float* out, const float* inp, const std::uint8_t* mask, float p,
                     std::int64_t N) {
  ETH_CHECK(p >= 0.0f && p < 1.0f, "dropout probability must be in [0, 1)");
  const float scale = 1.0f / (1.0f - p);
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < N; ++i) out[i] = mask[i] ? inp[i] * scale : 0.0f;
}

void dropout_backward(float* dinp, const float* dout, const std::uint8_t* mask, float p,
                      std::int64_t N) {
  dropout_forward(dinp, dout, mask, p, N);
}

}  // namespace eth::cpu
