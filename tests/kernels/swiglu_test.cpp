// SwiGLU (cpu/swiglu.cpp) forward and backward against the double reference, fp32 and bf16
// storage, and the documented in-place aliasing (out over gate; dgate over dout, dup over up).
#include <gtest/gtest.h>

#include <random>

#include "bf16_check.h"
#include "kernel_check.h"
#include "kernels/cpu/bf16/swiglu.h"
#include "kernels/cpu/swiglu.h"
#include "kernels/reference/swiglu.h"

namespace eth::test::swiglu_test {
namespace {

constexpr std::int64_t B = 2, T = 37, N = B * T, F = 96;
constexpr auto sz = [](std::int64_t n) { return static_cast<std::size_t>(n); };

TEST(LlamaKernels, SwiGlu) {
  std::mt19937_64 gen(44);
  const Vec g = random_bf16_vec(gen, sz(N * F), -8, 8), u = random_bf16_vec(gen, sz(N * F), -2, 2);
  const Vec dout = random_bf16_vec(gen, g.size());
  Vec out(g.size()), dg(g.size()), du(g.size());
  ref::swiglu_forward(out.data(), g.data(), u.data(), N, F);
  ref::swiglu_backward(dg.data(), du.data(), dout.data(), g.data(), u.data(), N, F);
  // A handful of roundings in exp, the sigmoid and the products; silu' crosses 0 near x = -1.28
  // (two terms of opposite sign), so its gradient gets more room, as GELU's does.
  const double tol = 4 * kFloatEps, dtol = 16 * kFloatEps;

  VecF outf = nan_vec(out.size()), dgf = nan_vec(g.size()), duf = nan_vec(g.size());
  const VecF gf = to_float(g), uf = to_float(u), doutf = to_float(dout);
  cpu::swiglu_forward(outf.data(), gf.data(), uf.data(), N, F);
  expect_close("swiglu fp32", outf, out, tol * rms(out), tol);
  cpu::swiglu_backward(dgf.data(), duf.data(), doutf.data(), gf.data(), uf.data(), N, F);
  expect_close("dgate fp32", dgf, dg, dtol * rms(dg), dtol);
  expect_close("dup fp32", duf, du, tol * rms(du), tol);

  VecB outb = nan_bf16(out.size()), dgb = nan_bf16(g.size()), dub = nan_bf16(g.size());
  const VecB gb = to_bf16(g), ub = to_bf16(u), doutb = to_bf16(dout);
  cpu::bf16::swiglu_forward(outb.data(), gb.data(), ub.data(), N, F);
  expect_bf16_close("swiglu bf16", outb, out, tol);
  cpu::bf16::swiglu_backward(dgb.data(), dub.data(), doutb.data(), gb.data(), ub.data(), N, F);
  expect_bf16_close("dgate bf16", dgb, dg, dtol);
  expect_bf16_close("dup bf16", dub, du, tol);

  // The documented aliasing: out over gate; dgate over dout and dup over up.
  VecF in_place = gf;
  cpu::swiglu_forward(in_place.data(), in_place.data(), uf.data(), N, F);
  EXPECT_TRUE(in_place == outf) << "swiglu in place";
  VecF dgi = doutf, dui = uf;
  cpu::swiglu_backward(dgi.data(), dui.data(), dgi.data(), gf.data(), dui.data(), N, F);
  EXPECT_TRUE(dgi == dgf && dui == duf) << "swiglu_backward in place";
}

}  // namespace
}  // namespace eth::test::swiglu_test
