// The vectorizable approximations of cpu/vec_math.h (exp, log, sin and cos of 2 pi u) against
// the C library's functions in double, over the ranges the kernels and the random streams use.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "kernel_check.h"
#include "kernels/cpu/vec_math.h"

namespace eth::test::vec_math_test {
namespace {


TEST(CpuVsReference, ExpApprox) {
  // Relative error against exp in double over the whole range the kernels use.
  double worst = 0;
  for (double x = -87.0; x <= 88.0; x += 0.0137) {
    const auto xf = static_cast<float>(x);
    const double want = std::exp(static_cast<double>(xf));
    worst = std::max(worst, std::abs(cpu::exp_approx(xf) - want) / want);
  }
  EXPECT_LE(worst, 2 * kFloatEps);  // measured: 0.84 eps
  EXPECT_EQ(cpu::exp_approx(-100.0f), 0.0f);
  EXPECT_EQ(cpu::exp_approx(0.0f), 1.0f);
}

TEST(CpuVsReference, LogAndSinCosApprox) {
  // Over the Box-Muller inputs of normal_fill: u = k / 2^24. Absolute error of ln u (|ln u| up
  // to 16.6, so a relative bound would be meaningless near u = 1) and of cos, sin of 2 pi u.
  double worst_log = 0, worst_trig = 0;
  for (std::uint32_t k = 1; k <= (1u << 24); k += 997) {
    const float u = static_cast<float>(k) / 16777216.0f;
    const double want = std::log(static_cast<double>(u));
    worst_log = std::max(worst_log, std::abs(cpu::log_approx(u) - want) /
                                        std::max(1.0, std::abs(want)));
    const float v = static_cast<float>(k - 1) / 16777216.0f;
    float c = 0, s = 0;
    cpu::sincos_2pi_approx(v, &c, &s);
    const double th = 6.283185307179586 * static_cast<double>(v);
    worst_trig = std::max({worst_trig, std::abs(c - std::cos(th)), std::abs(s - std::sin(th))});
  }
  EXPECT_LE(worst_log, 2 * kFloatEps);
  EXPECT_LE(worst_trig, 2 * kFloatEps);
  EXPECT_EQ(cpu::log_approx(1.0f), 0.0f);
  float c = 0, s = 0;
  cpu::sincos_2pi_approx(0.25f, &c, &s);  // quarter turn: exactly (0, 1)
  EXPECT_EQ(c, 0.0f);
  EXPECT_EQ(s, 1.0f);
}

}  // namespace
}  // namespace eth::test::vec_math_test
