// RMSNorm (cpu/rmsnorm.cpp) forward and backward against the double reference, fp32 and bf16
// storage; the backward from the kernel's own rstd on both sides, so only its rounding is compared.
// fp32 outputs within kernel_check.h's reduction tolerance, bf16 outputs within bf16_check.h's
// (2^-8 |want| beside it); "=" outputs start as NaN, "+=" outputs from the same random values on
// both sides.
#include <gtest/gtest.h>

#include <random>

#include "bf16_check.h"
#include "kernel_check.h"
#include "kernels/cpu/bf16/rmsnorm.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/reference/rmsnorm.h"

namespace eth::test::rmsnorm_test {
namespace {

// C spans three 64-channel blocks (the weight gradient's split).
constexpr std::int64_t B = 2, T = 37, C = 160, N = B * T;
constexpr float kEps = 1e-5f;
constexpr auto sz = [](std::int64_t n) { return static_cast<std::size_t>(n); };

TEST(LlamaKernels, RmsNormFp32) {
  std::mt19937_64 gen(40);
  const Vec x = random_vec(gen, sz(N * C), -2, 3), w = random_vec(gen, sz(C), 0.5, 1.5);
  Vec out(sz(N * C)), rstd(sz(N));
  ref::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), kEps, N, C);
  VecF outf = nan_vec(out.size()), rstdf = nan_vec(rstd.size());
  const VecF xf = to_float(x), wf = to_float(w);
  cpu::rmsnorm_forward(outf.data(), rstdf.data(), xf.data(), wf.data(), kEps, N, C);
  expect_reduction("out", outf, out, C);
  expect_reduction("rstd", rstdf, rstd, C);

  // Backward from the float rstd on both sides, so only the backward's rounding is compared.
  const Vec dout = random_vec(gen, sz(N * C));
  Vec dx = random_vec(gen, x.size()), dw = random_vec(gen, w.size());
  VecF dxf = to_float(dx), dwf = to_float(dw);
  ref::rmsnorm_backward(dx.data(), dw.data(), dout.data(), x.data(), w.data(),
                        to_double(rstdf).data(), N, C);
  cpu::rmsnorm_backward(dxf.data(), dwf.data(), to_float(dout).data(), xf.data(), wf.data(),
                        rstdf.data(), N, C);
  expect_reduction("dinp", dxf, dx, C);
  expect_reduction("dweight", dwf, dw, N);
}

TEST(LlamaKernels, RmsNormBf16) {
  std::mt19937_64 gen(41);
  const Vec x = random_bf16_vec(gen, sz(N * C), -2, 3), w = random_bf16_vec(gen, sz(C), 0.5, 1.5);
  Vec out(sz(N * C)), rstd(sz(N));
  ref::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), kEps, N, C);
  VecB outb = nan_bf16(out.size());
  VecF rstdf = nan_vec(rstd.size());
  const VecB xb = to_bf16(x), wb = to_bf16(w);
  cpu::bf16::rmsnorm_forward(outb.data(), rstdf.data(), xb.data(), wb.data(), kEps, N, C);
  expect_bf16_close("out", outb, out, reduction_tol(C));
  expect_fp32_close("rstd", rstdf, rstd, reduction_tol(C));

  const Vec dout = random_bf16_vec(gen, sz(N * C));
  Vec dx = random_bf16_vec(gen, x.size()), dw = random_vec(gen, w.size());
  VecB dxb = to_bf16(dx);
  VecF dwf = to_float(dw);
  ref::rmsnorm_backward(dx.data(), dw.data(), dout.data(), x.data(), w.data(),
                        to_double(rstdf).data(), N, C);
  cpu::bf16::rmsnorm_backward(dxb.data(), dwf.data(), to_bf16(dout).data(), xb.data(), wb.data(),
                              rstdf.data(), N, C);
  expect_bf16_close("dinp", dxb, dx, reduction_tol(C));
  expect_fp32_close("dweight", dwf, dw, reduction_tol(N));
}

}  // namespace
}  // namespace eth::test::rmsnorm_test
