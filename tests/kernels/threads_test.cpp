// (c) The OpenMP kernels, fp32 and bf16, give bit-identical results for 1, 2 and 3 threads:
// every output element is owned by one thread and summed in a fixed order. Covers every kernel
// except the matmul products, which are the GEMM library's own (attention's GEMM calls run
// inside our parallel region, one per thread, so attention is covered).
#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>
#include <functional>
#include <random>

#include "bf16_check.h"
#include "kernel_check.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/bf16/attention.h"
#include "kernels/cpu/bf16/crossentropy.h"
#include "kernels/cpu/bf16/encoder.h"
#include "kernels/cpu/bf16/gemm.h"
#include "kernels/cpu/bf16/layernorm.h"
#include "kernels/cpu/bf16/matmul.h"
#include "kernels/cpu/bf16/optimizer.h"
#include "kernels/cpu/bf16/pointwise.h"
#include "kernels/cpu/crossentropy.h"
#include "kernels/cpu/encoder.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/optimizer.h"
#include "kernels/cpu/pointwise.h"
#include "kernels/rng.h"

namespace eth::threads_test {
namespace {

using test::bytes;
using test::expect_thread_invariant;
using test::random_vec;
using test::to_float;
using test::VecF;

// C spans three 64-channel blocks so the channel-blocked reductions split between threads.
constexpr std::int64_t B = 3, T = 70, C = 160, NH = 5, V = 50, N = B * T;
constexpr auto sz = [](std::int64_t n) { return static_cast<std::size_t>(n); };

class ThreadInvariance : public ::testing::Test {
 protected:
  std::mt19937_64 gen{30};
  VecF rand(std::int64_t n, double lo = -1, double hi = 1) {
    return to_float(random_vec(gen, sz(n), lo, hi));
  }
};

TEST_F(ThreadInvariance, Encoder) {
  const VecF wte = rand(V * C), wpe = rand(T * C), dout = rand(N * C);
  const auto tokens = test::random_ids(gen, sz(N), V);
  expect_thread_invariant("encoder", [&] {
    VecF out(sz(N * C)), dwte(wte.size(), 0.5f), dwpe(wpe.size(), 0.25f);
    cpu::encoder_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C, V);
    cpu::encoder_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), B, T, C, V);
    return std::vector{bytes(out), bytes(dwte), bytes(dwpe)};
  });
}

TEST_F(ThreadInvariance, LayerNorm) {
  const VecF x = rand(N * C), w = rand(C), b = rand(C), dout = rand(N * C);
  expect_thread_invariant("layernorm", [&] {
    VecF out(x.size()), mean(sz(N)), rstd(sz(N)), dx(x.size(), 0.0f), dw(sz(C), 0.0f);
    VecF db(sz(C), 0.0f);
    cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N,
                           C);
    cpu::layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(),
                            mean.data(), rstd.data(), N, C);
    return std::vector{bytes(out), bytes(mean), bytes(rstd), bytes(dx), bytes(dw), bytes(db)};
  });
}

TEST_F(ThreadInvariance, Attention) {
  const std::int64_t nP = B * NH * T * T;
  const VecF qkv = rand(N * 3 * C), dout = rand(N * C);
  expect_thread_invariant("attention", [&] {
    VecF P(sz(nP)), out(sz(N * C)), dP(sz(nP)), dqkv(qkv.size());
    cpu::attention_scores_forward(P.data(), qkv.data(), B, T, C, NH);
    cpu::attention_softmax_forward(P.data(), P.data(), B, NH, T);
    cpu::attention_av_forward(out.data(), P.data(), qkv.data(), B, T, C, NH);
    cpu::attention_av_backward(dP.data(), dqkv.data(), dout.data(), P.data(), qkv.data(), B, T, C,
                               NH);
    cpu::attention_softmax_backward(dP.data(), dP.data(), P.data(), B, NH, T);
    cpu::attention_scores_backward(dqkv.data(), dP.data(), qkv.data(), B, T, C, NH);
    return std::vector{bytes(P), bytes(out), bytes(dP), bytes(dqkv)};
  });
}

TEST_F(ThreadInvariance, Pointwise) {
  const std::int64_t n = N * C;
  const VecF x = rand(n, -5, 5), y = rand(n), dout = rand(n);
  std::vector<std::uint8_t> mask(sz(n));
  dropout_mask_fill(mask.data(), RngStream{4, 2, 3, RngOp::MlpResidDropout}, 0.2f, 0, 0, 1, n);
  expect_thread_invariant("pointwise", [&] {
    VecF g(sz(n)), dg(sz(n)), r(sz(n)), dres(sz(n), 1.0f), dbr(sz(n)), d(sz(n)), dd(sz(n));
    cpu::gelu_forward(g.data(), x.data(), n);
    cpu::gelu_backward(dg.data(), dout.data(), x.data(), n);
    cpu::residual_forward(r.data(), x.data(), y.data(), n);
    cpu::residual_backward(dres.data(), dbr.data(), dout.data(), n);
    cpu::dropout_forward(d.data(), x.data(), mask.data(), 0.2f, n);
    cpu::dropout_backward(dd.data(), dout.data(), mask.data(), 0.2f, n);
    return std::vector{bytes(g), bytes(dg), bytes(r), bytes(dres), bytes(dbr), bytes(d),
                       bytes(dd)};
  });
}

TEST_F(ThreadInvariance, MatmulBiasGradient) {
  // Only dbias is ours (column sums); dinp and dweight come from the GEMM library.
  const std::int64_t OC = 3 * C;
  const VecF x = rand(N * C), w = rand(OC * C), dout = rand(N * OC);
  expect_thread_invariant("matmul dbias", [&] {
    VecF dx(x.size()), dw(w.size(), 0.0f), db(sz(OC), 0.5f);
    cpu::matmul_nt_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), N,
                            C, OC);
    return std::vector<std::vector<std::uint8_t>>{bytes(db)};
  });
}

TEST_F(ThreadInvariance, CrossEntropy) {
  const VecF logits = rand(N * V, -4, 4);
  const auto targets = test::random_ids(gen, sz(N), V);
  expect_thread_invariant("crossentropy", [&] {
    VecF losses(sz(N)), lse(sz(N)), dlogits(logits.size());
    double loss = 0;
    cpu::crossentropy_forward(&loss, losses.data(), lse.data(), logits.data(), targets.data(),
                              0.01, N, V);
    cpu::crossentropy_backward(dlogits.data(), logits.data(), lse.data(), targets.data(), 0.01, N,
                               V);
    return std::vector{bytes(losses), bytes(lse), bytes(dlogits), bytes(std::vector{loss})};
  });
}

TEST_F(ThreadInvariance, Optimizer) {
  // 25 blocks of 4096: above the size at which the passes go parallel; odd tail.
  const std::int64_t n = 25 * 4096 + 3;
  const VecF g = rand(n), p0 = rand(n), m0 = rand(n, -0.1, 0.1), v0 = rand(n, 0, 0.01);
  cpu::AdamWScalars sc;
  sc.lr = 1e-3f;
  sc.beta1 = 0.9f;
  sc.beta2 = 0.95f;
  sc.eps = 1e-8f;
  sc.decay = 1e-4f;
  sc.bias_corr1 = 0.19f;
  sc.bias_corr2 = 0.0975f;
  sc.grad_scale = 0.7f;
  expect_thread_invariant("optimizer", [&] {
    VecF p = p0, m = m0, v = v0;
    cpu::adamw_update(p.data(), m.data(), v.data(), g.data(), n, sc);
    const double ss = cpu::sum_squares(g.data(), n);
    return std::vector{bytes(p), bytes(m), bytes(v), bytes(std::vector{ss})};
  });
  // The sum of squares does not depend on where the span starts in memory (each plan's unit
  // spans start at different alignments): one float further on, same bits.
  VecF shifted(sz(n + 1));
  std::copy(g.begin(), g.end(), shifted.begin() + 1);
  const double a = cpu::sum_squares(g.data(), n), b = cpu::sum_squares(shifted.data() + 1, n);
  EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0) << a << " vs " << b;
  // And it is the sum of squares (fp64 accumulation, 8 lanes): within 1e-12 of a plain loop.
  double plain = 0;
  for (float x : g) plain += static_cast<double>(x) * x;
  EXPECT_NEAR(a, plain, 1e-12 * plain);
}

TEST_F(ThreadInvariance, RandomStreams) {
  expect_thread_invariant("rng", [&] {
    std::vector<std::uint8_t> mask(sz(B * 1001));
    dropout_mask_fill(mask.data(), RngStream{77, 1, 2, RngOp::AttnDropout}, 0.5f, 3, 5, B, 1001);
    VecF normal(5000);
    normal_fill(normal.data(), RngStream{77, 0, 2, RngOp::Init}, 0.02f, 4, 0, 5000);
    return std::vector{mask, bytes(normal)};
  });
}

// The bf16 kernels: the same ownership rules, so the same invariance. Attention's GEMMs run one
// per thread inside our parallel region (on whichever GEMM path this CPU uses); the matmuls'
// own products are the GEMM library's, so only their bias gradient is covered.
TEST_F(ThreadInvariance, Bf16Kernels) {
  using test::to_bf16;
  const std::int64_t nP = B * NH * T * T, OC = 3 * C, n = N * C;
  const auto r = [&](std::int64_t k, double lo = -1, double hi = 1) {
    return to_bf16(test::random_bf16_vec(gen, sz(k), lo, hi));
  };
  const auto x = r(n, -2, 2), w = r(C), b = r(C), dout = r(n), qkv = r(N * 3 * C);
  const auto wte = r(V * C), wpe = r(T * C), logits = r(N * V, -4, 4), dmm = r(N * OC);
  const auto tokens = test::random_ids(gen, sz(N), V);
  std::vector<std::uint8_t> mask(sz(n));
  dropout_mask_fill(mask.data(), RngStream{4, 2, 3, RngOp::MlpResidDropout}, 0.2f, 0, 0, 1, n);
  const VecF grads = rand(n), p0 = rand(n);
  const auto L = cpu::bf16::QkvLayout::head_interleaved(C, NH);
  expect_thread_invariant("bf16", [&] {
    test::VecB ln(sz(n)), dx(sz(n), Bf16{0}), P(sz(nP)), att(sz(n)), dP(sz(nP));
    test::VecB dqkv(qkv.size()), emb(sz(n)), g(sz(n)), res(sz(n), Bf16{0x3F80}), dbr(sz(n));
    test::VecB d(sz(n)), dlogits(logits.size()), dxm(sz(N * C)), pb(sz(n));
    VecF mean(sz(N)), rstd(sz(N)), dw(sz(C), 0.0f), db(sz(C), 0.0f), dwte(wte.size(), 0.0f);
    VecF dwpe(wpe.size(), 0.0f), losses(sz(N)), lse(sz(N)), dwm(sz(OC * C), 0.0f);
    VecF dbm(sz(OC), 0.5f), p = p0, m(sz(n), 0.0f), v(sz(n), 0.0f);
    double loss = 0;
    cpu::bf16::layernorm_forward(ln.data(), mean.data(), rstd.data(), x.data(), w.data(),
                                 b.data(), N, C);
    cpu::bf16::layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(),
                                  w.data(), mean.data(), rstd.data(), N, C);
    cpu::bf16::attention_probs_forward(P.data(), qkv.data(), L, B, T, C, NH);
    cpu::bf16::attention_av_forward(att.data(), P.data(), qkv.data(), L, B, T, C, NH);
    cpu::bf16::attention_av_backward(dP.data(), dqkv.data(), dout.data(), P.data(), qkv.data(),
                                     L, B, T, C, NH);
    cpu::bf16::attention_softmax_backward(dP.data(), dP.data(), P.data(), B, NH, T);
    cpu::bf16::attention_scores_backward(dqkv.data(), dP.data(), qkv.data(), L, B, T, C, NH);
    cpu::bf16::encoder_forward(emb.data(), tokens.data(), wte.data(), wpe.data(), B, T, C, V);
    cpu::bf16::encoder_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), B, T, C, V);
    cpu::bf16::gelu_forward(g.data(), x.data(), n);
    cpu::bf16::gelu_backward(g.data(), dout.data(), x.data(), n);
    cpu::bf16::residual_backward(res.data(), dbr.data(), dout.data(), n);
    cpu::bf16::dropout_forward(d.data(), x.data(), mask.data(), 0.2f, n);
    cpu::bf16::crossentropy_forward(&loss, losses.data(), lse.data(), logits.data(),
                                    tokens.data(), 0.01, N, V);
    cpu::bf16::crossentropy_backward(dlogits.data(), logits.data(), lse.data(), tokens.data(),
                                     0.01, N, V);
    cpu::bf16::matmul_nt_backward(dxm.data(), dwm.data(), dbm.data(), dmm.data(), ln.data(),
                                  qkv.data(), N, C, OC);
    cpu::AdamWScalars sc;
    sc.lr = 1e-3f, sc.beta1 = 0.9f, sc.beta2 = 0.95f, sc.eps = 1e-8f;
    cpu::bf16::adamw_update(p.data(), pb.data(), m.data(), v.data(), grads.data(), n, sc);
    return std::vector{bytes(ln), bytes(mean), bytes(rstd), bytes(dx), bytes(dw), bytes(db),
                       bytes(P), bytes(att), bytes(dP), bytes(dqkv), bytes(emb), bytes(dwte),
                       bytes(dwpe), bytes(g), bytes(res), bytes(dbr), bytes(d), bytes(losses),
                       bytes(lse), bytes(std::vector{loss}), bytes(dlogits), bytes(dbm),
                       bytes(p), bytes(pb)};
  });
}

}  // namespace
}  // namespace eth::threads_test
