// bf16 element-wise kernels; the fp32 formulas of cpu/pointwise.cpp between a widening load and
// a rounding store.
#include "kernels/cpu/bf16/pointwise.h"

#include "core/error.h"
#include "kernels/constants.h"
#include "kernels/cpu/vec_math.h"

namespace eth::cpu::bf16 {

void gelu_forward(Bf16* out, const Bf16* inp, std::int64_t N) {
  const auto k0 = static_cast<float>(kGeluSqrt2OverPi), k1 = static_cast<float>(kGeluCubic);
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < N; ++i) {
    const float x = float_from_bf16(inp[i]);
    const float u = k0 * (x + k1 * x * x * x);
    out[i] = bf16_from_float(x * sigmoid_approx(2.0f * u));
  }
}

void gelu_backward(Bf16* dinp, const Bf16* dout, const Bf16* inp, std::int64_t N) {
  const auto k0 = static_cast<float>(kGeluSqrt2OverPi), k1 = static_cast<float>(kGeluCubic);
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < N; ++i) {
    const float x = float_from_bf16(inp[i]);
    const float u = k0 * (x + k1 * x * x * x);
    const float s = sigmoid_approx(2.0f * u);
    // d/dx [x s(2u)] = s + 2 x s (1 - s) u', u' = k0 (1 + 3 k1 x^2)
    const float grad = s + 2.0f * x * s * (1.0f - s) * k0 * (1.0f + 3.0f * k1 * x * x);
    dinp[i] = bf16_from_float(float_from_bf16(dout[i]) * grad);
  }
}

void residual_forward(Bf16* out, const Bf16* res, const Bf16* branch, std::int64_t N) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < N; ++i) {
    out[i] = bf16_from_float(float_from_bf16(res[i]) + float_from_bf16(branch[i]));
  }
}

void residual_backward(Bf16* dres, Bf16* dbranch, const Bf16* dout, std::int64_t N) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < N; ++i) {
    dres[i] = bf16_from_float(float_from_bf16(dres[i]) + float_from_bf16(dout[i]));
    dbranch[i] = dout[i];
  }
}

void dropout_forward(Bf16* out, const Bf16* inp, const std::uint8_t* mask, float p,
                     std::int64_t N) {
  ETH_CHECK(p >= 0.0f && p < 1.0f, "dropout probability must be in [0, 1)");
  const float scale = 1.0f / (1.0f - p);
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < N; ++i) {
    out[i] = mask[i] ? bf16_from_float(float_from_bf16(inp[i]) * scale) : Bf16{0};
  }
}

void dropout_backward(Bf16* dinp, const Bf16* dout, const std::uint8_t* mask, float p,
                      std::int64_t N) {
  dropout_forward(dinp, dout, mask, p, N);
}

}  // namespace eth::cpu::bf16
