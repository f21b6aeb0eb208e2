// The loss head (cpu/crossentropy.cpp: per-token losses, log-sum-exp, the scaled mean, and the
// logits' gradient in place) against the double reference, fp32 and bf16 logits.
// fp32 kernels: |got - want| <= atol + rtol |want| with rtol = 4 sqrt(K) eps_float for a
// reduction of length K and atol = rtol rms(want) (kernel_check.h's expect_reduction).
// bf16 kernels: bf16_check.h's bound, 2^-8 |want| + (1 + 2^-8) tol32 (|want| + rms(want)); their
// fp32 outputs (parameter gradients, statistics, losses) tol32 alone.
// "=" outputs start as NaN (so an unwritten element fails), "+=" outputs from the same random
// values on both sides.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "bf16_check.h"
#include "kernel_check.h"
#include "kernels/cpu/bf16/crossentropy.h"
#include "kernels/cpu/crossentropy.h"
#include "kernels/reference/crossentropy.h"

namespace eth::test::crossentropy_test {
namespace {

// The shapes of every kernel-against-reference test (T > 64 exercises the attention row blocks;
// hs = C / NH = 16).
constexpr std::int64_t B = 2, T = 80, C = 48, NH = 3, V = 97, F = 4 * C, N = B * T;
constexpr auto sz = [](std::int64_t n) { return static_cast<std::size_t>(n); };

TEST(CpuVsReference, CrossEntropy) {
  std::mt19937_64 gen(27);
  const Vec logits = random_vec(gen, sz(N * V), -4, 4);
  const VecF logitsf = to_float(logits);
  const auto targets = test::random_ids(gen, sz(N), V);
  const double scale = 1.0 / static_cast<double>(N * 4);  // e.g. 4 micro-batches of N tokens
  Vec losses(sz(N)), lse(sz(N));
  double loss = 0, lossf = 0;
  ref::crossentropy_forward(&loss, losses.data(), lse.data(), logits.data(), targets.data(), scale,
                            N, V);
  VecF lossesf = nan_vec(sz(N)), lsef = nan_vec(sz(N));
  cpu::crossentropy_forward(&lossf, lossesf.data(), lsef.data(), logitsf.data(), targets.data(),
                            scale, N, V);
  expect_reduction("losses", lossesf, losses, V);
  expect_reduction("lse", lsef, lse, V);
  EXPECT_NEAR(lossf, loss, reduction_tol(V) * std::abs(loss));

  Vec dlogits(logits.size());
  ref::crossentropy_backward(dlogits.data(), logits.data(), lse.data(), targets.data(), scale, N,
                             V);
  VecF dlogitsf = logitsf;  // in place over the logits
  cpu::crossentropy_backward(dlogitsf.data(), dlogitsf.data(), lsef.data(), targets.data(), scale,
                             N, V);
  expect_reduction("dlogits", dlogitsf, dlogits, V);
}

TEST(Bf16VsReference, CrossEntropy) {
  std::mt19937_64 gen(48);
  const Vec logits = random_bf16_vec(gen, sz(N * V), -4, 4);
  const VecB logitsb = to_bf16(logits);
  const auto targets = test::random_ids(gen, sz(N), V);
  const double scale = 1.0 / static_cast<double>(N * 4);  // e.g. 4 micro-batches of N tokens
  Vec losses(sz(N)), lse(sz(N));
  double loss = 0, lossb = 0;
  ref::crossentropy_forward(&loss, losses.data(), lse.data(), logits.data(), targets.data(), scale,
                            N, V);
  VecF lossesf = nan_vec(sz(N)), lsef = nan_vec(sz(N));
  cpu::bf16::crossentropy_forward(&lossb, lossesf.data(), lsef.data(), logitsb.data(),
                                  targets.data(), scale, N, V);
  // fp32 math on exact inputs: the fp32 tolerance, no bf16 term.
  expect_fp32_close("losses", lossesf, losses, reduction_tol(V));
  expect_fp32_close("lse", lsef, lse, reduction_tol(V));
  EXPECT_NEAR(lossb, loss, reduction_tol(V) * std::abs(loss));

  Vec dlogits(logits.size());
  ref::crossentropy_backward(dlogits.data(), logits.data(), lse.data(), targets.data(), scale, N,
                             V);
  VecB dlogitsb = logitsb;  // in place over the logits
  cpu::bf16::crossentropy_backward(dlogitsb.data(), dlogitsb.data(), lsef.data(), targets.data(),
                                   scale, N, V);
  expect_bf16_close("dlogits", dlogitsb, dlogits, reduction_tol(V));
}

}  // namespace
}  // namespace eth::test::crossentropy_test
