// The fp32 attention operators (cpu/attention.cpp: scores, causal softmax, P V and their
// backward) against the double reference one by one and chained with dropout of P, and a head
// range of the documented qkv layout run alone as a tensor-parallel shard.
// fp32 kernels: |got - want| <= atol + rtol |want| with rtol = 4 sqrt(K) eps_float for a
// reduction of length K and atol = rtol rms(want) (kernel_check.h's expect_reduction).
// "=" outputs start as NaN (so an unwritten element fails), "+=" outputs from the same random
// values on both sides.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <tuple>
#include <type_traits>

#include "kernel_check.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/pointwise.h"
#include "kernels/reference/attention.h"
#include "kernels/reference/pointwise.h"
#include "kernels/rng.h"

namespace eth::test::attention_test {
namespace {

// The shapes of every kernel-against-reference test (T > 64 exercises the attention row blocks;
// hs = C / NH = 16).
constexpr std::int64_t B = 2, T = 80, C = 48, NH = 3, V = 97, F = 4 * C, N = B * T;
constexpr auto sz = [](std::int64_t n) { return static_cast<std::size_t>(n); };

TEST(CpuVsReference, AttentionOperators) {
  std::mt19937_64 gen(24);
  const std::int64_t hs = C / NH, nP = B * NH * T * T;
  const Vec qkv = random_vec(gen, sz(N * 3 * C), -2, 2);
  const VecF qkvf = to_float(qkv);

  Vec S(sz(nP));
  VecF Sf = nan_vec(S.size());
  ref::attention_scores_forward(S.data(), qkv.data(), B, T, C, NH);
  cpu::attention_scores_forward(Sf.data(), qkvf.data(), B, T, C, NH);
  expect_reduction("scores", Sf, S, hs);

  // Softmax in place on the float side, from the same float scores on both.
  Vec P(sz(nP));
  ref::attention_softmax_forward(P.data(), to_double(Sf).data(), B, NH, T);
  VecF Pf = Sf;
  cpu::attention_softmax_forward(Pf.data(), Pf.data(), B, NH, T);
  expect_reduction("P", Pf, P, T);

  const Vec dout = random_vec(gen, sz(N * C));
  Vec out(sz(N * C));
  VecF outf = nan_vec(out.size());
  ref::attention_av_forward(out.data(), to_double(Pf).data(), qkv.data(), B, T, C, NH);
  cpu::attention_av_forward(outf.data(), Pf.data(), qkvf.data(), B, T, C, NH);
  expect_reduction("out", outf, out, T);

  Vec dP(sz(nP)), dqkv(qkv.size());
  VecF dPf = nan_vec(dP.size()), dqkvf = nan_vec(dqkv.size());
  ref::attention_av_backward(dP.data(), dqkv.data(), dout.data(), to_double(Pf).data(),
                             qkv.data(), B, T, C, NH);
  cpu::attention_av_backward(dPf.data(), dqkvf.data(), to_float(dout).data(), Pf.data(),
                             qkvf.data(), B, T, C, NH);
  expect_reduction("dP", dPf, dP, hs);

  Vec dS = random_vec(gen, sz(nP));  // softmax backward's input
  Vec dSout(sz(nP));
  VecF dSf = to_float(dS);
  ref::attention_softmax_backward(dSout.data(), dS.data(), to_double(Pf).data(), B, NH, T);
  cpu::attention_softmax_backward(dSf.data(), dSf.data(), Pf.data(), B, NH, T);  // in place
  expect_reduction("dscores", dSf, dSout, T);

  ref::attention_scores_backward(dqkv.data(), to_double(dSf).data(), qkv.data(), B, T, C, NH);
  cpu::attention_scores_backward(dqkvf.data(), dSf.data(), qkvf.data(), B, T, C, NH);
  expect_reduction("dqkv", dqkvf, dqkv, T);  // all three parts written by now
}

TEST(CpuVsReference, AttentionChainWithDropout) {
  std::mt19937_64 gen(25);
  const std::int64_t nP = B * NH * T * T;
  const float p = 0.1f;
  const Vec qkv = random_vec(gen, sz(N * 3 * C), -2, 2), dout = random_vec(gen, sz(N * C));
  const VecF qkvf = to_float(qkv), doutf = to_float(dout);
  std::vector<std::uint8_t> mask(sz(nP));
  dropout_mask_fill(mask.data(), RngStream{3, 5, 2, RngOp::AttnDropout}, p, 10, 0, B,
                    NH * T * T);
  Vec S(sz(nP)), P(sz(nP)), Pd(sz(nP)), out(sz(N * C)), dPd(sz(nP)), dP(sz(nP)), dS(sz(nP));
  Vec dqkv(qkv.size());
  ref::attention_scores_forward(S.data(), qkv.data(), B, T, C, NH);
  ref::attention_softmax_forward(P.data(), S.data(), B, NH, T);
  ref::dropout_forward(Pd.data(), P.data(), mask.data(), p, nP);
  ref::attention_av_forward(out.data(), Pd.data(), qkv.data(), B, T, C, NH);
  ref::attention_av_backward(dPd.data(), dqkv.data(), dout.data(), Pd.data(), qkv.data(), B, T, C,
                             NH);
  ref::dropout_backward(dP.data(), dPd.data(), mask.data(), p, nP);
  ref::attention_softmax_backward(dS.data(), dP.data(), P.data(), B, NH, T);
  ref::attention_scores_backward(dqkv.data(), dS.data(), qkv.data(), B, T, C, NH);

  VecF Pf = nan_vec(sz(nP)), Pdf = nan_vec(sz(nP)), outf = nan_vec(out.size());
  VecF dbuf = nan_vec(sz(nP)), dqkvf = nan_vec(dqkv.size());
  cpu::attention_scores_forward(Pf.data(), qkvf.data(), B, T, C, NH);
  cpu::attention_softmax_forward(Pf.data(), Pf.data(), B, NH, T);
  cpu::dropout_forward(Pdf.data(), Pf.data(), mask.data(), p, nP);
  cpu::attention_av_forward(outf.data(), Pdf.data(), qkvf.data(), B, T, C, NH);
  cpu::attention_av_backward(dbuf.data(), dqkvf.data(), doutf.data(), Pdf.data(), qkvf.data(), B,
                             T, C, NH);
  cpu::dropout_backward(dbuf.data(), dbuf.data(), mask.data(), p, nP);
  cpu::attention_softmax_backward(dbuf.data(), dbuf.data(), Pf.data(), B, NH, T);
  cpu::attention_scores_backward(dqkvf.data(), dbuf.data(), qkvf.data(), B, T, C, NH);
  // Errors compound through the chain: scores (hs) feed the softmax (T) feeding P V (T).
  expect_reduction("out", outf, out, 4 * T);
  expect_reduction("dqkv", dqkvf, dqkv, 4 * T);
}

// The documented layout: head h's q, k, v are columns h*3hs + {0, hs, 2hs} of each token's
// row. So the columns of heads [h0, h1) are one contiguous range, and the kernels run on that
// range alone (C = (h1-h0)*hs, NH = h1-h0) compute exactly those heads of the whole: a
// tensor-parallel rank's shard. The reference must agree bitwise (the same operations), the
// fast kernels to rounding.
TEST(CpuVsReference, AttentionHeadRangeIsAContiguousShard) {
  std::mt19937_64 gen(27);
  const std::int64_t hs = C / NH, h0 = 1, h1 = NH, Cl = (h1 - h0) * hs, NHl = h1 - h0;
  const Vec qkv = random_vec(gen, sz(N * 3 * C), -2, 2), dout = random_vec(gen, sz(N * C));
  // The shard's inputs: columns [h0*3hs, h1*3hs) of qkv, [h0*hs, h1*hs) of dout.
  Vec qkv_l, dout_l;
  for (std::int64_t n = 0; n < N; ++n) {
    qkv_l.insert(qkv_l.end(), qkv.begin() + n * 3 * C + h0 * 3 * hs,
                 qkv.begin() + n * 3 * C + h1 * 3 * hs);
    dout_l.insert(dout_l.end(), dout.begin() + n * C + h0 * hs, dout.begin() + n * C + h1 * hs);
  }
  // One score by hand from the documented columns.
  {
    Vec S(sz(B * NH * T * T));
    ref::attention_scores_forward(S.data(), qkv.data(), B, T, C, NH);
    const std::int64_t b = 1, h = 2, t = 70, t2 = 33;
    double dot = 0;
    for (std::int64_t i = 0; i < hs; ++i) {
      dot += qkv[sz((b * T + t) * 3 * C + h * 3 * hs + i)] *
             qkv[sz((b * T + t2) * 3 * C + h * 3 * hs + hs + i)];
    }
    EXPECT_NEAR(S[sz(((b * NH + h) * T + t) * T + t2)], dot / std::sqrt(double(hs)), 1e-12);
  }
  // Runs the attention chain (scores, softmax, P V and their backward) on (qkv, dout) of nh
  // heads and returns (P, out, dqkv) concatenated.
  auto chain = [](auto tag, const Vec& q, const Vec& dy, std::int64_t c, std::int64_t nh) {
    using R = decltype(tag);
    const std::int64_t nP = B * nh * T * T;
    std::vector<R> qr(q.begin(), q.end()), dyr(dy.begin(), dy.end());
    std::vector<R> P(sz(nP)), out(sz(N * c)), dP(sz(nP)), dq(sz(N * 3 * c));
    if constexpr (std::is_same_v<R, double>) {
      ref::attention_scores_forward(P.data(), qr.data(), B, T, c, nh);
      ref::attention_softmax_forward(P.data(), P.data(), B, nh, T);
      ref::attention_av_forward(out.data(), P.data(), qr.data(), B, T, c, nh);
      ref::attention_av_backward(dP.data(), dq.data(), dyr.data(), P.data(), qr.data(), B, T, c,
                                 nh);
      ref::attention_softmax_backward(dP.data(), dP.data(), P.data(), B, nh, T);
      ref::attention_scores_backward(dq.data(), dP.data(), qr.data(), B, T, c, nh);
    } else {
      cpu::attention_scores_forward(P.data(), qr.data(), B, T, c, nh);
      cpu::attention_softmax_forward(P.data(), P.data(), B, nh, T);
      cpu::attention_av_forward(out.data(), P.data(), qr.data(), B, T, c, nh);
      cpu::attention_av_backward(dP.data(), dq.data(), dyr.data(), P.data(), qr.data(), B, T, c,
                                 nh);
      cpu::attention_softmax_backward(dP.data(), dP.data(), P.data(), B, nh, T);
      cpu::attention_scores_backward(dq.data(), dP.data(), qr.data(), B, T, c, nh);
    }
    return std::tuple{P, out, dq};
  };
  auto check = [&](auto tag, double tol) {
    const auto [P, out, dq] = chain(tag, qkv, dout, C, NH);
    const auto [Pl, outl, dql] = chain(tag, qkv_l, dout_l, Cl, NHl);
    double worst = 0;
    auto cmp = [&](double got, double want) {
      worst = std::max(worst, std::abs(got - want) / (1.0 + std::abs(want)));
    };
    for (std::int64_t b = 0; b < B; ++b) {
      for (std::int64_t i = 0; i < NHl * T * T; ++i) {
        cmp(Pl[sz(b * NHl * T * T + i)], P[sz((b * NH + h0) * T * T + i)]);
      }
    }
    for (std::int64_t n = 0; n < N; ++n) {
      for (std::int64_t i = 0; i < Cl; ++i) cmp(outl[sz(n * Cl + i)], out[sz(n * C + h0 * hs + i)]);
      for (std::int64_t i = 0; i < 3 * Cl; ++i) {
        cmp(dql[sz(n * 3 * Cl + i)], dq[sz(n * 3 * C + h0 * 3 * hs + i)]);
      }
    }
    EXPECT_LE(worst, tol) << (std::is_same_v<decltype(tag), double> ? "reference" : "cpu");
  };
  check(0.0, 0.0);
  check(0.0f, 4 * T * kFloatEps);
}

}  // namespace
}  // namespace eth::test::attention_test
