// Rotary positions (cpu/rope.cpp): the double reference against the rotation written directly as
// complex numbers, and the fp32 and bf16 kernels against the reference, both directions, on 6
// query heads sharing 2 key/value heads.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <random>

#include "bf16_check.h"
#include "kernel_check.h"
#include "kernels/cpu/bf16/rope.h"
#include "kernels/cpu/rope.h"
#include "kernels/reference/rope.h"

namespace eth::test::rope_test {
namespace {

// 6 query heads share 2 key/value heads of size 16; T = 37 positions.
constexpr std::int64_t B = 2, T = 37, N = B * T;
constexpr std::int64_t NH = 6, NKV = 2, HD = 16, W = (NH + 2 * NKV) * HD;
constexpr float kTheta = 10000.0f;
constexpr auto sz = [](std::int64_t n) { return static_cast<std::size_t>(n); };

// The rotation written directly: the pair (x_i, x_{i+hd/2}) of every q and k head as the
// complex number x_i + i x_{i+hd/2}, times e^{i t w_i} with w_i = exp(-(2i/hd) ln theta). The
// heads are found by position in the row: column block k of hd is, within its group of
// NH/NKV + 2 blocks, a query head, the key head (both rotated) or the value head (not).
Vec rotate_complex(const Vec& x, double sign) {
  Vec out = x;
  const std::int64_t group = NH / NKV + 2, half = HD / 2;
  for (std::int64_t n = 0; n < N; ++n) {
    const double t = static_cast<double>(n % T);
    for (std::int64_t k = 0; k < W / HD; ++k) {
      if (k % group == group - 1) continue;  // the value head
      for (std::int64_t i = 0; i < half; ++i) {
        const double w = std::exp(-2.0 * static_cast<double>(i) / HD * std::log(double(kTheta)));
        const std::size_t a = sz(n * W + k * HD + i), b = a + sz(half);
        const std::complex<double> z =
            std::complex<double>(x[a], x[b]) * std::polar(1.0, sign * t * w);
        out[a] = z.real();
        out[b] = z.imag();
      }
    }
  }
  return out;
}

TEST(LlamaKernels, RopeReferenceIsTheComplexRotation) {
  std::mt19937_64 gen(42);
  const Vec x = random_vec(gen, sz(N * W));
  for (double sign : {1.0, -1.0}) {
    Vec got = x;
    if (sign > 0) {
      ref::rope_forward(got.data(), B, T, NH, NKV, HD, kTheta);
    } else {
      ref::rope_backward(got.data(), B, T, NH, NKV, HD, kTheta);
    }
    const Vec want = rotate_complex(x, sign);
    double worst = 0;
    for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
    EXPECT_LE(worst, 1e-12) << (sign > 0 ? "forward" : "backward");
  }
  // Multi-head (NKV == NH): GPT's head-interleaved layout, q_h and k_h rotated, v_h not.
  Vec mha = random_vec(gen, sz(3 * HD));
  const Vec before = mha;
  ref::rope_forward(mha.data(), 1, 1, 1, 1, HD, kTheta);  // t = 0: the identity
  EXPECT_EQ(mha, before);
  mha.assign(sz(2 * 3 * HD), 1.0);
  ref::rope_forward(mha.data(), 1, 2, 1, 1, HD, kTheta);  // t = 1, the second row
  const double c0 = std::cos(1.0), s0 = std::sin(1.0);    // w_0 = 1
  EXPECT_NEAR(mha[sz(3 * HD + 0)], c0 - s0, 1e-15);       // q_0
  EXPECT_NEAR(mha[sz(3 * HD + HD / 2)], c0 + s0, 1e-15);  // q_{hd/2}
  EXPECT_NEAR(mha[sz(3 * HD + HD)], c0 - s0, 1e-15);      // k_0
  EXPECT_EQ(mha[sz(3 * HD + 2 * HD)], 1.0);               // v untouched
}

TEST(LlamaKernels, RopeFp32AndBf16) {
  std::mt19937_64 gen(43);
  // Long enough (t up to 36 at theta 1e4: every angle from 0 to 36 rad) and one short theta.
  for (float theta : {kTheta, 50.0f}) {
    SCOPED_TRACE(theta);
    const Vec x = random_bf16_vec(gen, sz(N * W), -2, 2);
    for (int dir = 0; dir < 2; ++dir) {
      Vec want = x;
      VecF gotf = to_float(x);
      VecB gotb = to_bf16(x);
      if (dir == 0) {
        ref::rope_forward(want.data(), B, T, NH, NKV, HD, theta);
        cpu::rope_forward(gotf.data(), B, T, NH, NKV, HD, theta);
        cpu::bf16::rope_forward(gotb.data(), B, T, NH, NKV, HD, theta);
      } else {
        ref::rope_backward(want.data(), B, T, NH, NKV, HD, theta);
        cpu::rope_backward(gotf.data(), B, T, NH, NKV, HD, theta);
        cpu::bf16::rope_backward(gotb.data(), B, T, NH, NKV, HD, theta);
      }
      // cos and sin rounded to float, two products and a sum: a few eps of the pair's size.
      expect_close(dir ? "drope fp32" : "rope fp32", gotf, want, 4 * kFloatEps * rms(want),
                   4 * kFloatEps);
      expect_bf16_close(dir ? "drope bf16" : "rope bf16", gotb, want, 4 * kFloatEps);
    }
  }
}

}  // namespace
}  // namespace eth::test::rope_test
