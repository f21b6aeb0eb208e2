// The Llama family's row-wise kernels (RMSNorm, rotary positions, SwiGLU) and the embedding
// without a position table: the fast fp32 and the bf16 kernels against the double references
// (kernel_check.h and bf16_check.h tolerances), the reference rotation against a direct
// complex-number rotation of each (i, i + hd/2) pair, and the fp32 and bf16 kernels' bytes at
// 1, 2 and 3 threads.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <complex>
#include <cstring>
#include <functional>
#include <random>

#include "bf16_check.h"
#include "kernels/cpu/bf16/encoder.h"
#include "kernels/cpu/bf16/rmsnorm.h"
#include "kernels/cpu/bf16/rope.h"
#include "kernels/cpu/bf16/swiglu.h"
#include "kernels/cpu/encoder.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/swiglu.h"
#include "kernels/reference/encoder.h"
#include "kernels/reference/rmsnorm.h"
#include "kernels/reference/rope.h"
#include "kernels/reference/swiglu.h"

namespace eth {
namespace {

using test::bf16_to_double;
using test::expect_bf16_close;
using test::expect_close;
using test::expect_fp32_close;
using test::kFloatEps;
using test::nan_bf16;
using test::nan_vec;
using test::random_bf16_vec;
using test::random_vec;
using test::reduction_tol;
using test::rms;
using test::to_bf16;
using test::to_double;
using test::to_float;
using test::Vec;
using test::VecB;
using test::VecF;

// C spans three 64-channel blocks (the weight gradient's split); 6 query heads share 2 kv heads
// of size 16 in the rotary tests, T = 37 positions.
constexpr std::int64_t B = 2, T = 37, C = 160, N = B * T, F = 96;
constexpr std::int64_t NH = 6, NKV = 2, HD = 16, W = (NH + 2 * NKV) * HD;
constexpr float kEps = 1e-5f, kTheta = 10000.0f;
constexpr auto sz = [](std::int64_t n) { return static_cast<std::size_t>(n); };

void expect_reduction(const std::string& name, const VecF& got, const Vec& want, std::int64_t K) {
  const double tol = reduction_tol(K);
  expect_close(name, got, want, tol * rms(want), tol);
}

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

TEST(LlamaKernels, EncoderWithoutPositionTable) {
  std::mt19937_64 gen(45);
  const std::int64_t V = 53;
  const Vec wte = random_bf16_vec(gen, sz(V * C)), dout = random_bf16_vec(gen, sz(N * C));
  const auto tokens = test::random_ids(gen, sz(N), V);
  Vec out(sz(N * C));
  ref::encoder_forward<double>(out.data(), tokens.data(), wte.data(), nullptr, B, T, C, V);
  VecF outf = nan_vec(out.size());
  cpu::encoder_forward(outf.data(), tokens.data(), to_float(wte).data(), nullptr, B, T, C, V);
  expect_close("out fp32", outf, out, 0.0, 0.0);  // a copy of the token rows
  VecB outb = nan_bf16(out.size());
  cpu::bf16::encoder_forward(outb.data(), tokens.data(), to_bf16(wte).data(), nullptr, B, T, C, V);
  expect_close("out bf16", test::bf16_to_float(outb), out, 0.0, 0.0);

  Vec dwte = random_vec(gen, wte.size());
  VecF dwtef = to_float(dwte), dwteb = dwtef;
  ref::encoder_backward<double>(dwte.data(), nullptr, dout.data(), tokens.data(), B, T, C, V);
  cpu::encoder_backward(dwtef.data(), nullptr, to_float(dout).data(), tokens.data(), B, T, C, V);
  cpu::bf16::encoder_backward(dwteb.data(), nullptr, to_bf16(dout).data(), tokens.data(), B, T, C,
                              V);
  expect_reduction("dwte fp32", dwtef, dwte, N);
  expect_fp32_close("dwte bf16", dwteb, dwte, reduction_tol(N));
}

template <typename X>
std::vector<std::uint8_t> bytes(const std::vector<X>& v) {
  std::vector<std::uint8_t> b(v.size() * sizeof(X));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

TEST(LlamaKernels, ThreadInvariance) {
  std::mt19937_64 gen(46);
  const Vec x = random_bf16_vec(gen, sz(N * C)), w = random_bf16_vec(gen, sz(C));
  const Vec q = random_bf16_vec(gen, sz(N * W)), g = random_bf16_vec(gen, sz(N * F), -4, 4);
  auto run = [&] {
    std::vector<std::vector<std::uint8_t>> o;
    VecF out(x.size()), rstd(sz(N)), dx(x.size(), 0.5f), dw(sz(C), 0.25f);
    cpu::rmsnorm_forward(out.data(), rstd.data(), to_float(x).data(), to_float(w).data(), kEps, N,
                         C);
    cpu::rmsnorm_backward(dx.data(), dw.data(), to_float(x).data(), to_float(x).data(),
                          to_float(w).data(), rstd.data(), N, C);
    VecF qf = to_float(q), sg(g.size()), dg(g.size()), du(g.size());
    cpu::rope_forward(qf.data(), B, T, NH, NKV, HD, kTheta);
    cpu::swiglu_forward(sg.data(), to_float(g).data(), to_float(g).data(), N, F);
    cpu::swiglu_backward(dg.data(), du.data(), sg.data(), to_float(g).data(), to_float(g).data(), N,
                         F);
    for (const auto* v : {&out, &rstd, &dx, &dw, &qf, &sg, &dg, &du}) o.push_back(bytes(*v));
    VecB outb(x.size()), dxb(x.size(), Bf16{0}), qb = to_bf16(q), sgb(g.size());
    VecF dwb(sz(C), 0.0f);
    cpu::bf16::rmsnorm_forward(outb.data(), rstd.data(), to_bf16(x).data(), to_bf16(w).data(), kEps,
                               N, C);
    cpu::bf16::rmsnorm_backward(dxb.data(), dwb.data(), to_bf16(x).data(), to_bf16(x).data(),
                                to_bf16(w).data(), rstd.data(), N, C);
    cpu::bf16::rope_backward(qb.data(), B, T, NH, NKV, HD, kTheta);
    cpu::bf16::swiglu_forward(sgb.data(), to_bf16(g).data(), to_bf16(g).data(), N, F);
    for (const auto* v : {&outb, &dxb, &qb, &sgb}) o.push_back(bytes(*v));
    o.push_back(bytes(dwb));
    return o;
  };
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto one = run();
  for (int threads : {2, 3}) {
    omp_set_num_threads(threads);
    const auto many = run();
    for (std::size_t i = 0; i < one.size(); ++i) {
      EXPECT_TRUE(one[i] == many[i]) << "output " << i << " differs at " << threads << " threads";
    }
  }
  omp_set_num_threads(saved);
}

}  // namespace
}  // namespace eth
