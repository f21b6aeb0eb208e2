// Element-wise kernels, fp32 and bf16 storage (one template each; cpu/storage.h). GELU is
// evaluated as x * sigmoid(2u), u = sqrt(2/pi)(x + 0.044715 x^3) (0.5 (1 + tanh u) =
// sigmoid(2u)), with the vectorizable exp of vec_math.h.
#include "kernels/cpu/pointwise.h"

#include "core/error.h"
#include "kernels/constants.h"
#include "kernels/cpu/bf16/pointwise.h"
#include "kernels/cpu/storage.h"
#include "kernels/cpu/vec_math.h"

namespace eth::cpu {
namespace {

template <typename A>
void gelu_fwd(A* out, const A* inp, std::int64_t N) {
  const auto k0 = static_cast<float>(kGeluSqrt2OverPi), k1 = static_cast<float>(kGeluCubic);
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < N; ++i) {
    const float x = widen(inp[i]);
    const float u = k0 * (x + k1 * x * x * x);
    out[i] = narrow<A>(x * sigmoid_approx(2.0f * u));
  }
}

template <typename A>
void gelu_bwd(A* dinp, const A* dout, const A* inp, std::int64_t N) {
  const auto k0 = static_cast<float>(kGeluSqrt2OverPi), k1 = static_cast<float>(kGeluCubic);
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < N; ++i) {
    const float x = widen(inp[i]);
    const float u = k0 * (x + k1 * x * x * x);
    const float s = sigmoid_approx(2.0f * u);
    // d/dx [x s(2u)] = s + 2 x s (1 - s) u', u' = k0 (1 + 3 k1 x^2)
    const float grad = s + 2.0f * x * s * (1.0f - s) * k0 * (1.0f + 3.0f * k1 * x * x);
    dinp[i] = narrow<A>(widen(dout[i]) * grad);
  }
}

template <typename A>
void residual_fwd(A* out, const A* res, const A* branch, std::int64_t N) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < N; ++i) out[i] = narrow<A>(widen(res[i]) + widen(branch[i]));
}

template <typename A>
void residual_bwd(A* dres, A* dbranch, const A* dout, std::int64_t N) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < N; ++i) {
    dres[i] = narrow<A>(widen(dres[i]) + widen(dout[i]));
    dbranch[i] = dout[i];
  }
}

template <typename A>
void dropout(A* out, const A* inp, const std::uint8_t* mask, float p, std::int64_t N) {
  ETH_CHECK(p >= 0.0f && p < 1.0f, "dropout probability must be in [0, 1)");
  const float scale = 1.0f / (1.0f - p);
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < N; ++i) out[i] = mask[i] ? narrow<A>(widen(inp[i]) * scale) : A{};
}

}  // namespace

void gelu_forward(float* out, const float* inp, std::int64_t N) { gelu_fwd(out, inp, N); }

void gelu_backward(float* dinp, const float* dout, const float* inp, std::int64_t N) {
  gelu_bwd(dinp, dout, inp, N);
}

void residual_forward(float* out, const float* res, const float* branch, std::int64_t N) {
  residual_fwd(out, res, branch, N);
}

void residual_backward(float* dres, float* dbranch, const float* dout, std::int64_t N) {
  residual_bwd(dres, dbranch, dout, N);
}

void dropout_forward(float* out, const float* inp, const std::uint8_t* mask, float p,
                     std::int64_t N) {
  dropout(out, inp, mask, p, N);
}

void dropout_backward(float* dinp, const float* dout, const std::uint8_t* mask, float p,
                      std::int64_t N) {
  dropout(dinp, dout, mask, p, N);
}

void bf16::gelu_forward(Bf16* out, const Bf16* inp, std::int64_t N) { gelu_fwd(out, inp, N); }

void bf16::gelu_backward(Bf16* dinp, const Bf16* dout, const Bf16* inp, std::int64_t N) {
  gelu_bwd(dinp, dout, inp, N);
}

void bf16::residual_forward(Bf16* out, const Bf16* res, const Bf16* branch, std::int64_t N) {
  residual_fwd(out, res, branch, N);
}

void bf16::residual_backward(Bf16* dres, Bf16* dbranch, const Bf16* dout, std::int64_t N) {
  residual_bwd(dres, dbranch, dout, N);
}

void bf16::dropout_forward(Bf16* out, const Bf16* inp, const std::uint8_t* mask, float p,
                           std::int64_t N) {
  dropout(out, inp, mask, p, N);
}

void bf16::dropout_backward(Bf16* dinp, const Bf16* dout, const std::uint8_t* mask, float p,
                            std::int64_t N) {
  dropout(dinp, dout, mask, p, N);
}

}  // namespace eth::cpu
