// The optimizer's passes (cpu/optimizer.cpp): fp32 AdamW against its formula worked in double
// from the same fp32 state, the sum of squares against a long double sum, and the bf16 AdamW
// bit for bit the fp32 step with the compute copy its rounding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "bf16_check.h"
#include "kernel_check.h"
#include "kernels/cpu/bf16/optimizer.h"
#include "kernels/cpu/optimizer.h"

namespace eth::test::optimizer_test {
namespace {

constexpr auto sz = [](std::int64_t n) { return static_cast<std::size_t>(n); };

TEST(CpuOptimizer, AdamWIsItsFormulaInDouble) {
  // From the same fp32 state, the update worked in double. Each value the kernel forms in fp32 is
  // a few roundings of 2^-24 off, relative to the size of the terms it sums (which may cancel):
  // m's terms b1 m and (1 - b1) g, v's (all positive), and for p the weight itself and the step
  // those terms make. 8 eps of those scales bounds the kernel; a wrong coefficient, bias
  // correction or decay is off by orders more.
  std::mt19937_64 gen(51);
  const std::int64_t n = 3 * 4096 + 17;  // several OpenMP blocks and a partial one
  const VecF p0 = to_float(random_vec(gen, sz(n))), g = to_float(random_vec(gen, sz(n)));
  const VecF m0 = to_float(random_vec(gen, sz(n), -0.1, 0.1));
  const VecF v0 = to_float(random_vec(gen, sz(n), 0.0, 0.01));
  cpu::AdamWScalars s;
  s.lr = 1e-2f, s.beta1 = 0.9f, s.beta2 = 0.95f, s.eps = 1e-8f, s.decay = 1e-3f;
  s.bias_corr1 = 0.19f, s.bias_corr2 = 0.0975f, s.grad_scale = 0.5f;
  VecF p = p0, m = m0, v = v0;
  cpu::adamw_update(p.data(), m.data(), v.data(), g.data(), n, s);
  const double tol = 8 * kFloatEps;
  const double b1 = s.beta1, b2 = s.beta2, lr = s.lr, eps = s.eps;
  double worst_m = 0, worst_v = 0, worst_p = 0, moved = 0;
  for (std::size_t i = 0; i < sz(n); ++i) {
    const double gi = static_cast<double>(s.grad_scale) * g[i];
    const double mi = b1 * m0[i] + (1.0 - b1) * gi;
    const double m_scale = std::abs(b1 * m0[i]) + std::abs((1.0 - b1) * gi);
    const double vi = b2 * v0[i] + (1.0 - b2) * gi * gi;
    const double denom = std::sqrt(vi / s.bias_corr2) + eps;
    const double step = lr * (mi / s.bias_corr1) / denom + static_cast<double>(s.decay) * p0[i];
    const double p_scale = std::abs(p0[i]) + lr * (m_scale / s.bias_corr1) / denom;
    worst_m = std::max(worst_m, std::abs(m[i] - mi) / m_scale);
    worst_v = std::max(worst_v, std::abs(v[i] - vi) / vi);
    worst_p = std::max(worst_p, std::abs(p[i] - (p0[i] - step)) / p_scale);
    moved = std::max(moved, std::abs(step));
  }
  EXPECT_LE(worst_m, tol);
  EXPECT_LE(worst_v, tol);
  EXPECT_LE(worst_p, tol);
  EXPECT_GT(moved, 1e-3);  // the step is not vacuous
}

TEST(CpuOptimizer, SumOfSquaresIsTheLongDoubleSum) {
  // The products of fp32 values are exact in double and the sum of 12k terms rounds at 2^-53
  // each: 1e-12 relative is a wide bound that a lost block or a float accumulation breaks.
  std::mt19937_64 gen(52);
  for (const std::int64_t n : {std::int64_t{0}, std::int64_t{7}, std::int64_t{3 * 4096 + 17}}) {
    const VecF x = to_float(random_vec(gen, sz(n), -3, 3));
    long double want = 0;
    for (float e : x) want += static_cast<long double>(e) * static_cast<long double>(e);
    const double got = cpu::sum_squares(x.data(), n);
    EXPECT_NEAR(got, static_cast<double>(want), 1e-12 * static_cast<double>(want)) << n;
  }
}
TEST(Bf16VsReference, AdamWMatchesFp32StepAndRoundsTheCopy) {
  // The master update must be cpu::adamw_update's bit for bit (the fp32 optimizer is the tested
  // one); the compute copy is the rounded new master weight. n crosses several OpenMP blocks.
  std::mt19937_64 gen(49);
  const std::int64_t n = 3 * 4096 + 17;
  const VecF p0 = to_float(random_vec(gen, sz(n))), g = to_float(random_vec(gen, sz(n)));
  const VecF m0 = to_float(random_vec(gen, sz(n), -0.1, 0.1));
  const VecF v0 = to_float(random_vec(gen, sz(n), 0.0, 0.01));
  cpu::AdamWScalars s;
  s.lr = 3e-4f, s.beta1 = 0.9f, s.beta2 = 0.95f, s.eps = 1e-8f, s.decay = 3e-5f;
  s.bias_corr1 = 0.1f, s.bias_corr2 = 0.05f, s.grad_scale = 0.7f;
  VecF p = p0, m = m0, v = v0, pw = p0, mw = m0, vw = v0;
  VecB pb = nan_bf16(sz(n));
  cpu::bf16::adamw_update(p.data(), pb.data(), m.data(), v.data(), g.data(), n, s);
  cpu::adamw_update(pw.data(), mw.data(), vw.data(), g.data(), n, s);
  EXPECT_TRUE(p == pw) << "master weights";
  EXPECT_TRUE(m == mw) << "first moment";
  EXPECT_TRUE(v == vw) << "second moment";
  std::size_t bad = 0;
  for (std::size_t i = 0; i < pb.size(); ++i) bad += pb[i] != bf16_from_float(p[i]);
  EXPECT_EQ(bad, 0u) << "bf16 copy is not the rounded master weight";
  EXPECT_TRUE(p != p0) << "the step changed nothing";
}

}  // namespace
}  // namespace eth::test::optimizer_test
