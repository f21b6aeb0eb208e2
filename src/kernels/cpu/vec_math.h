// exp, log, sin/cos and the GELU sigmoid in a form GCC vectorizes inside `#pragma omp simd`
// loops (glibc's expf, logf and sincosf are scalar calls there). Internal linkage on purpose:
// the kernels are compiled with -march=native and each translation unit keeps its own copy, so
// no ODR clash with callers built with other flags. Accuracy (tests/kernels): exp's relative
// error below 2^-23 over [-87, 88]; log and sin/cos within 2 float eps on their domains.
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

// ln x for normal positive finite x (callers pass uniforms in [2^-24, 1]). x = m 2^e with m in
// [sqrt(1/2), sqrt(2)); ln m = 2 atanh(s), s = (m - 1)/(m + 1), |s| <= 0.1716, by its series to
// s^9: remainder below 2 s^11 / 11 ~ 1e-9, under float's half ulp of ln m.
inline float log_approx(float x) {
  constexpr float kLn2Hi = 0.693359375f;     // 9 significant bits: e * kLn2Hi is exact
  constexpr float kLn2Lo = -2.12194440e-4f;  // ln 2 - kLn2Hi
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
  std::int32_t e = static_cast<std::int32_t>(bits >> 23) - 127;
  float m = std::bit_cast<float>((bits & 0x007FFFFFu) | 0x3F800000u);  // [1, 2)
  const bool high = m > 1.41421356f;
  m = high ? 0.5f * m : m;
  e = high ? e + 1 : e;
  const float s = (m - 1.0f) / (m + 1.0f);
  const float s2 = s * s;
  float p = 1.0f / 9.0f;
  p = p * s2 + 1.0f / 7.0f;
  p = p * s2 + 1.0f / 5.0f;
  p = p * s2 + 1.0f / 3.0f;
  p = p * s2 + 1.0f;
  const float fe = static_cast<float>(e);
  return (fe * kLn2Hi + 2.0f * s * p) + fe * kLn2Lo;
}

// cos and sin of 2 pi u for u in [0, 1) with at most 24 fractional bits (so 4u and its
// reduction are exact): quadrant q = round(4u), x = (4u - q) pi/2 in [-pi/4, pi/4], Taylor
// series to x^9 / x^10 (remainders below 2e-9), then the quadrant's rotation.
inline void sincos_2pi_approx(float u, float* c_out, float* s_out) {
  const float t = 4.0f * u;
  const std::int32_t q = static_cast<std::int32_t>(t + 0.5f);  // t >= 0: truncation rounds
  const float x = (t - static_cast<float>(q)) * 1.57079632679489662f;
  const float x2 = x * x;
  float sp = -1.0f / 362880.0f;  // sin x = x (1 - x^2/6 + x^4/120 - ...), alternating
  sp = sp * x2 + 1.0f / 5040.0f;
  sp = sp * x2 - 1.0f / 120.0f;
  sp = sp * x2 + 1.0f / 6.0f;
  sp = sp * x2 - 1.0f;
  const float sn = -x * sp;
  float cp = -1.0f / 3628800.0f;
  cp = cp * x2 + 1.0f / 40320.0f;
  cp = cp * x2 - 1.0f / 720.0f;
  cp = cp * x2 + 1.0f / 24.0f;
  cp = cp * x2 - 0.5f;
  const float cs = cp * x2 + 1.0f;
  const std::int32_t quad = q & 3;
  // theta = q pi/2 + x: rotate (cos x, sin x) by q quarter turns.
  const float c1 = quad == 0 ? cs : quad == 1 ? -sn : quad == 2 ? -cs : sn;
  const float s1 = quad == 0 ? sn : quad == 1 ? cs : quad == 2 ? -sn : -cs;
  *c_out = c1;
  *s_out = s1;
}

}  // namespace
}  // namespace eth::cpu
