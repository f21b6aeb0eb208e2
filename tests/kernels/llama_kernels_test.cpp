// What the Llama family's kernels need beyond their own sources' tests (rmsnorm_test.cpp,
// rope_test.cpp, swiglu_test.cpp): the embedding without a position table, fp32 and bf16 against
// the double reference (kernel_check.h and bf16_check.h tolerances), and the RMSNorm, rotary and
// SwiGLU kernels' bytes at 1, 2 and 3 threads.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>
#include <random>
#include <vector>

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

namespace eth::llama_kernels_test {
namespace {

using test::bytes;
using test::expect_bf16_close;
using test::expect_close;
using test::expect_reduction;
using test::expect_fp32_close;
using test::nan_bf16;
using test::nan_vec;
using test::random_bf16_vec;
using test::random_vec;
using test::reduction_tol;
using test::to_bf16;
using test::to_float;
using test::Vec;
using test::VecB;
using test::VecF;

// C spans three 64-channel blocks (the weight gradient's split); 6 query heads share 2 kv heads
// of size 16 in the rotary kernels, T = 37 positions (as rmsnorm_test.cpp, rope_test.cpp and
// swiglu_test.cpp have them).
constexpr std::int64_t B = 2, T = 37, C = 160, N = B * T, F = 96;
constexpr std::int64_t NH = 6, NKV = 2, HD = 16, W = (NH + 2 * NKV) * HD;
constexpr float kEps = 1e-5f, kTheta = 10000.0f;
constexpr auto sz = [](std::int64_t n) { return static_cast<std::size_t>(n); };


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
  test::expect_thread_invariant("llama kernels", run);
}

}  // namespace
}  // namespace eth::llama_kernels_test
