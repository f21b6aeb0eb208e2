// exp and the GELU sigmoid in a form GCC vectorizes inside `#pragma omp simd` loops (glibc's
// expf is a scalar call there). Internal linkage on purpose: the kernels are compiled with
// -march=native and each translation unit keeps its own copy, so no ODR clash with callers
// built with other flags. Accuracy: relative error below 2^-23 over [-87, 88] (tests/kernels).
#pragma once

#include <bit>
#include <cstdint>

namespace eth::cpu {
namespace {

// e^x for x in [-87, 88]; 0 below -87 (e^-87 ~ 1.6e-38, negligible beside the 1 that softmax
// rows and sigmoids always contain); inputs above 88 are clamped (callers never pass them:
// softmax arguments are <= 0, the sigmoid's are clamped).
inline float exp_approx(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;      // 9 significant bits: n * kLn2Hi is exact
  constexpr float kLn2Lo = -2.12194440e-4f;   // ln 2 - kLn2Hi
  const bool underflow = x < -87.0f;
  x = x > 88.0f ? 88.0f : x;
  x = x < -87.0f ? -87.0f : x;
  // n = round(x log2 e), via truncation of a positive number (x log2 e >= -125.6).
  const std::int32_t n = static_cast<std::int32_t>(x * kLog2e + 128.5f) - 128;
  const float fn = static_cast<float>(n);
  const float r = (x - fn * kLn2Hi) - fn * kLn2Lo;  // |r| <= ln2/2
  // Taylor series of e^r to degree 7: remainder < 0.35^8/8! ~ 5e-9, below float's half ulp.
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const float scale = std::bit_cast<float>(static_cast<std::uint32_t>(n + 127) << 23);
  return underflow ? 0.0f : p * scale;
}

// 1 / (1 + e^-z), safe for any finite z.
inline float sigmoid_approx(float z) {
  z = z < -80.0f ? -80.0f : z;
  return 1.0f / (1.0f + exp_approx(-z));
}

}  // namespace
}  // namespace eth::cpu
