// Helpers of the bf16 kernel tests: bf16-representable random inputs and the bf16 tolerance.
//
// How the tolerance is derived. Inputs are rounded to bf16 first and the same values feed the
// double reference, so input rounding is not part of the error. What remains is
//   (1) the fp32 arithmetic inside the kernel: products of two bf16 values are exact in fp32,
//       sums of K terms carry the fp32 rounding of a length-K reduction, which the fp32 kernel
//       tests bound by tol32 = 4 sqrt(K) eps_float = 8 sqrt(K) 2^-24 (kernel_check.h), relative
//       to |want| + rms(want) (a sum's error scales with its terms, not with its value);
//   (2) one rounding of the result to bf16 when the output is bf16: at most half an ulp,
//       2^-8 |value| (8 bits of precision, round to nearest even).
// So a bf16 output must satisfy
//   |got - want| <= 2^-8 |want| + (1 + 2^-8) tol32 (|want| + rms(want)),
// and an fp32 output (parameter gradients, losses, layer-norm statistics) the fp32 bound alone.
// A kernel that accumulated in bf16, or rounded an intermediate to bf16, would be off by about
// sqrt(K) 2^-9 rms(want) and fail for any K > 4.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernel_check.h"
#include "kernels/bf16.h"

namespace eth::test {

using VecB = std::vector<Bf16>;

inline constexpr double kBf16Roundoff = 1.0 / 256.0;  // 2^-8

// Uniform values in [lo, hi), rounded to bf16 (as doubles, exactly).
inline Vec random_bf16_vec(std::mt19937_64& gen, std::size_t n, double lo = -1.0,
                           double hi = 1.0) {
  Vec v = random_vec(gen, n, lo, hi);
  for (auto& x : v) x = static_cast<double>(round_to_bf16(static_cast<float>(x)));
  return v;
}

// Exact for bf16-representable values (random_bf16_vec); rounds otherwise.
inline VecB to_bf16(const Vec& v) {
  VecB out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = bf16_from_float(static_cast<float>(v[i]));
  return out;
}

inline VecF bf16_to_float(const VecB& v) {
  VecF out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = float_from_bf16(v[i]);
  return out;
}

inline Vec bf16_to_double(const VecB& v) { return to_double(bf16_to_float(v)); }

inline VecB nan_bf16(std::size_t n) { return VecB(n, Bf16{0x7FC0}); }

// A bf16 output against its double reference; tol32 bounds the kernel's fp32 arithmetic
// (reduction_tol(K) for a reduction of length K).
inline void expect_bf16_close(const std::string& name, const VecB& got, const Vec& want,
                              double tol32) {
  const double fp32 = (1.0 + kBf16Roundoff) * tol32;
  expect_close(name, bf16_to_float(got), want, fp32 * rms(want), kBf16Roundoff + fp32);
}

// An fp32 output of a bf16 kernel: the fp32 bound of kernel_check.h.
inline void expect_fp32_close(const std::string& name, const VecF& got, const Vec& want,
                              double tol32) {
  expect_close(name, got, want, tol32 * rms(want), tol32);
}

}  // namespace eth::test
