// Layer norm (cpu/layernorm.cpp) forward and backward against the double reference, fp32 and
// bf16 storage; the backward from the kernel's own saved statistics, so only its own rounding is
// compared.
// fp32 kernels: |got - want| <= atol + rtol |want| with rtol = 4 sqrt(K) eps_float for a
// reduction of length K and atol = rtol rms(want) (kernel_check.h's expect_reduction).
// bf16 kernels: bf16_check.h's bound, 2^-8 |want| + (1 + 2^-8) tol32 (|want| + rms(want)); their
// fp32 outputs (parameter gradients, statistics, losses) tol32 alone.
// "=" outputs start as NaN (so an unwritten element fails), "+=" outputs from the same random
// values on both sides.
#include <gtest/gtest.h>

#include <random>

#include "bf16_check.h"
#include "kernel_check.h"
#include "kernels/cpu/bf16/layernorm.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/reference/layernorm.h"

namespace eth::test::layernorm_test {
namespace {

// The shapes of every kernel-against-reference test (T > 64 exercises the attention row blocks;
// hs = C / NH = 16).
constexpr std::int64_t B = 2, T = 80, C = 48, NH = 3, V = 97, F = 4 * C, N = B * T;
constexpr auto sz = [](std::int64_t n) { return static_cast<std::size_t>(n); };

TEST(CpuVsReference, LayerNorm) {
  std::mt19937_64 gen(22);
  const Vec x = random_vec(gen, sz(N * C), -2, 3), w = random_vec(gen, sz(C), 0.5, 1.5);
  const Vec b = random_vec(gen, sz(C));
  Vec out(sz(N * C)), mean(sz(N)), rstd(sz(N));
  ref::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  VecF outf = nan_vec(out.size()), meanf = nan_vec(mean.size()), rstdf = nan_vec(rstd.size());
  const VecF xf = to_float(x), wf = to_float(w);
  cpu::layernorm_forward(outf.data(), meanf.data(), rstdf.data(), xf.data(), wf.data(),
                         to_float(b).data(), N, C);
  expect_reduction("out", outf, out, C);
  expect_reduction("mean", meanf, mean, C);
  expect_reduction("rstd", rstdf, rstd, C);

  // Backward from the same saved statistics (the float ones, converted), so only the
  // backward's own rounding is compared.
  const Vec dout = random_vec(gen, sz(N * C));
  Vec dx = random_vec(gen, x.size()), dw = random_vec(gen, w.size()), db = random_vec(gen, sz(C));
  VecF dxf = to_float(dx), dwf = to_float(dw), dbf = to_float(db);
  ref::layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(),
                          to_double(meanf).data(), to_double(rstdf).data(), N, C);
  cpu::layernorm_backward(dxf.data(), dwf.data(), dbf.data(), to_float(dout).data(), xf.data(),
                          wf.data(), meanf.data(), rstdf.data(), N, C);
  expect_reduction("dinp", dxf, dx, C);
  expect_reduction("dweight", dwf, dw, N);
  expect_reduction("dbias", dbf, db, N);
}

TEST(Bf16VsReference, LayerNorm) {
  std::mt19937_64 gen(45);
  const Vec x = random_bf16_vec(gen, sz(N * C), -2, 3), w = random_bf16_vec(gen, sz(C), 0.5, 1.5);
  const Vec b = random_bf16_vec(gen, sz(C));
  Vec out(sz(N * C)), mean(sz(N)), rstd(sz(N));
  ref::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  VecB outb = nan_bf16(out.size());
  VecF meanf = nan_vec(mean.size()), rstdf = nan_vec(rstd.size());
  const VecB xb = to_bf16(x), wb = to_bf16(w);
  cpu::bf16::layernorm_forward(outb.data(), meanf.data(), rstdf.data(), xb.data(), wb.data(),
                               to_bf16(b).data(), N, C);
  expect_bf16_close("out", outb, out, reduction_tol(C));
  expect_fp32_close("mean", meanf, mean, reduction_tol(C));
  expect_fp32_close("rstd", rstdf, rstd, reduction_tol(C));

  // Backward from the kernel's own saved statistics; dinp accumulates onto bf16 values.
  const Vec dout = random_bf16_vec(gen, sz(N * C));
  Vec dx = random_bf16_vec(gen, x.size()), dw = random_vec(gen, w.size()), db = random_vec(gen, sz(C));
  VecB dxb = to_bf16(dx);
  VecF dwf = to_float(dw), dbf = to_float(db);
  dw = to_double(dwf), db = to_double(dbf);
  ref::layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(),
                          to_double(meanf).data(), to_double(rstdf).data(), N, C);
  cpu::bf16::layernorm_backward(dxb.data(), dwf.data(), dbf.data(), to_bf16(dout).data(),
                                xb.data(), wb.data(), meanf.data(), rstdf.data(), N, C);
  expect_bf16_close("dinp", dxb, dx, reduction_tol(C));
  expect_fp32_close("dweight", dwf, dw, reduction_tol(N));
  expect_fp32_close("dbias", dbf, db, reduction_tol(N));
}

}  // namespace
}  // namespace eth::test::layernorm_test
