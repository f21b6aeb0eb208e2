// The element-wise kernels (cpu/pointwise.cpp: GELU, the residual add, dropout with keyed masks)
// against the double reference, fp32 and bf16 storage, the bf16 GELU also in place. Tolerances
// of a few roundings each (the reasons beside them); "=" outputs start as NaN.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "bf16_check.h"
#include "kernel_check.h"
#include "kernels/cpu/bf16/pointwise.h"
#include "kernels/cpu/pointwise.h"
#include "kernels/reference/pointwise.h"
#include "kernels/rng.h"

namespace eth::test::pointwise_test {
namespace {

// The shapes of every kernel-against-reference test (T > 64 exercises the attention row blocks;
// hs = C / NH = 16).
constexpr std::int64_t B = 2, T = 80, C = 48, NH = 3, V = 97, F = 4 * C, N = B * T;
constexpr auto sz = [](std::int64_t n) { return static_cast<std::size_t>(n); };

TEST(CpuVsReference, Pointwise) {
  std::mt19937_64 gen(26);
  const std::int64_t n = 1000;
  const Vec x = random_vec(gen, sz(n), -6, 6), y = random_vec(gen, sz(n));
  const Vec dout = random_vec(gen, sz(n));
  const VecF xf = to_float(x), yf = to_float(y), doutf = to_float(dout);
  // GELU: a handful of roundings in exp, the sigmoid and the products; the derivative adds
  // two terms of opposite sign for x < 0, so it gets more room.
  const double gelu_tol = 4 * kFloatEps, dgelu_tol = 16 * kFloatEps;
  Vec g(sz(n));
  VecF gf = nan_vec(sz(n));
  ref::gelu_forward(g.data(), x.data(), n);
  cpu::gelu_forward(gf.data(), xf.data(), n);
  expect_close("gelu", gf, g, gelu_tol * rms(g), gelu_tol);
  ref::gelu_backward(g.data(), dout.data(), x.data(), n);
  cpu::gelu_backward(gf.data(), doutf.data(), xf.data(), n);
  expect_close("dgelu", gf, g, dgelu_tol * rms(g), dgelu_tol);

  Vec r(sz(n));
  VecF rf = nan_vec(sz(n));
  ref::residual_forward(r.data(), x.data(), y.data(), n);
  cpu::residual_forward(rf.data(), xf.data(), yf.data(), n);
  expect_close("residual", rf, r, 0.0, kFloatEps);
  Vec dres = random_vec(gen, sz(n)), dbranch(sz(n));
  VecF dresf = to_float(dres), dbranchf = nan_vec(sz(n));
  ref::residual_backward(dres.data(), dbranch.data(), dout.data(), n);
  cpu::residual_backward(dresf.data(), dbranchf.data(), doutf.data(), n);
  expect_close("dres", dresf, dres, 0.0, kFloatEps);
  expect_close("dbranch", dbranchf, dbranch, 0.0, 0.0);

  const float p = 0.3f;
  std::vector<std::uint8_t> mask(sz(n));
  dropout_mask_fill(mask.data(), RngStream{9, 1, 1, RngOp::AttnResidDropout}, p, 0, 0, 1, n);
  Vec d(sz(n));
  VecF df = nan_vec(sz(n));
  ref::dropout_forward(d.data(), x.data(), mask.data(), p, n);
  cpu::dropout_forward(df.data(), xf.data(), mask.data(), p, n);
  expect_close("dropout", df, d, 0.0, 2 * kFloatEps);
  ref::dropout_backward(d.data(), dout.data(), mask.data(), p, n);
  cpu::dropout_backward(df.data(), doutf.data(), mask.data(), p, n);
  expect_close("ddropout", df, d, 0.0, 2 * kFloatEps);
}

TEST(Bf16VsReference, Pointwise) {
  std::mt19937_64 gen(47);
  const std::int64_t n = 1000;
  const Vec x = random_bf16_vec(gen, sz(n), -6, 6), y = random_bf16_vec(gen, sz(n));
  const Vec dout = random_bf16_vec(gen, sz(n));
  const VecB xb = to_bf16(x), yb = to_bf16(y), doutb = to_bf16(dout);
  // The fp32 kernels' own GELU tolerances (above): a few roundings in exp,
  // the sigmoid and the products; the derivative's two terms of opposite sign need more room.
  const double gelu_tol = 4 * kFloatEps, dgelu_tol = 16 * kFloatEps;
  Vec g(sz(n));
  VecB gb = nan_bf16(sz(n));
  ref::gelu_forward(g.data(), x.data(), n);
  cpu::bf16::gelu_forward(gb.data(), xb.data(), n);
  expect_bf16_close("gelu", gb, g, gelu_tol);
  VecB inplace = xb;
  cpu::bf16::gelu_forward(inplace.data(), inplace.data(), n);
  EXPECT_TRUE(inplace == gb) << "gelu in place";
  ref::gelu_backward(g.data(), dout.data(), x.data(), n);
  cpu::bf16::gelu_backward(gb.data(), doutb.data(), xb.data(), n);
  expect_bf16_close("dgelu", gb, g, dgelu_tol);

  Vec r(sz(n));
  VecB rb = nan_bf16(sz(n));
  ref::residual_forward(r.data(), x.data(), y.data(), n);
  cpu::bf16::residual_forward(rb.data(), xb.data(), yb.data(), n);
  expect_bf16_close("residual", rb, r, kFloatEps);
  Vec dres = random_bf16_vec(gen, sz(n)), dbranch(sz(n));
  VecB dresb = to_bf16(dres), dbranchb = nan_bf16(sz(n));
  ref::residual_backward(dres.data(), dbranch.data(), dout.data(), n);
  cpu::bf16::residual_backward(dresb.data(), dbranchb.data(), doutb.data(), n);
  expect_bf16_close("dres", dresb, dres, kFloatEps);
  EXPECT_TRUE(dbranchb == doutb) << "dbranch is a copy of dout";

  const float p = 0.3f;
  std::vector<std::uint8_t> mask(sz(n));
  dropout_mask_fill(mask.data(), RngStream{9, 1, 1, RngOp::AttnResidDropout}, p, 0, 0, 1, n);
  Vec d(sz(n));
  VecB db = nan_bf16(sz(n));
  ref::dropout_forward(d.data(), x.data(), mask.data(), p, n);
  cpu::bf16::dropout_forward(db.data(), xb.data(), mask.data(), p, n);
  expect_bf16_close("dropout", db, d, 2 * kFloatEps);
  ref::dropout_backward(d.data(), dout.data(), mask.data(), p, n);
  cpu::bf16::dropout_backward(db.data(), doutb.data(), mask.data(), p, n);
  expect_bf16_close("ddropout", db, d, 2 * kFloatEps);
}

}  // namespace
}  // namespace eth::test::pointwise_test
