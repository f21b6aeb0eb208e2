// (a) Every double-precision reference backward equals central finite differences of its
// forward: L = <R, forward(x)> for a random projection R, gradient = backward(dout = R).
// Dropout uses a fixed mask; the causal mask needs no special care (masked outputs are
// constants, masked inputs have zero gradient on both sides).
#include <gtest/gtest.h>

#include <random>

#include "kernel_check.h"
#include "kernels/reference/attention.h"
#include "kernels/reference/crossentropy.h"
#include "kernels/reference/encoder.h"
#include "kernels/reference/layernorm.h"
#include "kernels/reference/matmul.h"
#include "kernels/reference/pointwise.h"
#include "kernels/reference/rmsnorm.h"
#include "kernels/reference/rope.h"
#include "kernels/reference/swiglu.h"
#include "kernels/rng.h"

namespace eth {
namespace {

using test::expect_gradient;
using test::project;
using test::random_vec;
using test::Vec;

// Tiny shapes: B batch, T sequence, C channels, NH heads, V vocabulary, F MLP width.
constexpr std::int64_t B = 2, T = 5, C = 8, NH = 2, V = 11, F = 12, N = B * T;
constexpr auto sz = [](std::int64_t n) { return static_cast<std::size_t>(n); };

TEST(ReferenceGrad, Encoder) {
  std::mt19937_64 gen(1);
  Vec wte = random_vec(gen, sz(V * C)), wpe = random_vec(gen, sz(T * C));
  const auto tokens = test::random_ids(gen, sz(N), V);
  const Vec R = random_vec(gen, sz(N * C));
  Vec out(sz(N * C));
  auto loss = [&] {
    ref::encoder_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C, V);
    return project(R, out);
  };
  Vec dwte(wte.size(), 0.0), dwpe(wpe.size(), 0.0);
  ref::encoder_backward(dwte.data(), dwpe.data(), R.data(), tokens.data(), B, T, C, V);
  expect_gradient("dwte", wte, dwte, loss);
  expect_gradient("dwpe", wpe, dwpe, loss);
}

TEST(ReferenceGrad, LayerNorm) {
  std::mt19937_64 gen(2);
  Vec x = random_vec(gen, sz(N * C), -2, 2), w = random_vec(gen, sz(C), 0.5, 1.5);
  Vec b = random_vec(gen, sz(C));
  const Vec R = random_vec(gen, sz(N * C));
  Vec out(sz(N * C)), mean(sz(N)), rstd(sz(N));
  auto loss = [&] {
    ref::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N,
                           C);
    return project(R, out);
  };
  loss();
  Vec dx(x.size(), 0.0), dw(w.size(), 0.0), db(b.size(), 0.0);
  ref::layernorm_backward(dx.data(), dw.data(), db.data(), R.data(), x.data(), w.data(),
                          mean.data(), rstd.data(), N, C);
  expect_gradient("dinp", x, dx, loss);
  expect_gradient("dweight", w, dw, loss);
  expect_gradient("dbias", b, db, loss);
}

TEST(ReferenceGrad, MatmulNt) {
  std::mt19937_64 gen(3);
  Vec x = random_vec(gen, sz(N * C)), w = random_vec(gen, sz(F * C)), b = random_vec(gen, sz(F));
  const Vec R = random_vec(gen, sz(N * F));
  Vec out(sz(N * F));
  auto loss = [&] {
    ref::matmul_nt_forward(out.data(), x.data(), w.data(), b.data(), N, C, F);
    return project(R, out);
  };
  Vec dx(x.size(), 0.0), dw(w.size(), 0.0), db(b.size(), 0.0);
  ref::matmul_nt_backward(dx.data(), dw.data(), db.data(), R.data(), x.data(), w.data(), N, C, F);
  expect_gradient("dinp", x, dx, loss);
  expect_gradient("dweight", w, dw, loss);
  expect_gradient("dbias", b, db, loss);
}

TEST(ReferenceGrad, MatmulNn) {
  std::mt19937_64 gen(4);
  Vec x = random_vec(gen, sz(N * F)), w = random_vec(gen, sz(F * C)), b = random_vec(gen, sz(C));
  const Vec R = random_vec(gen, sz(N * C));
  Vec out(sz(N * C));
  auto loss = [&] {
    ref::matmul_nn_forward(out.data(), x.data(), w.data(), b.data(), N, F, C);
    return project(R, out);
  };
  Vec dx(x.size(), 0.0), dw(w.size(), 0.0), db(b.size(), 0.0);
  ref::matmul_nn_backward(dx.data(), dw.data(), db.data(), R.data(), x.data(), w.data(), N, F, C);
  expect_gradient("dinp", x, dx, loss);
  expect_gradient("dweight", w, dw, loss);
  expect_gradient("dbias", b, db, loss);
}

TEST(ReferenceGrad, AttentionScores) {
  std::mt19937_64 gen(5);
  Vec qkv = random_vec(gen, sz(N * 3 * C));
  const Vec R = random_vec(gen, sz(B * NH * T * T));
  Vec scores(R.size());
  auto loss = [&] {
    ref::attention_scores_forward(scores.data(), qkv.data(), B, T, C, NH);
    return project(R, scores);
  };
  Vec dqkv(qkv.size(), 0.0);  // the v part stays 0: scores do not depend on v
  ref::attention_scores_backward(dqkv.data(), R.data(), qkv.data(), B, T, C, NH);
  expect_gradient("dqkv", qkv, dqkv, loss);
}

TEST(ReferenceGrad, AttentionSoftmax) {
  std::mt19937_64 gen(6);
  Vec scores = random_vec(gen, sz(B * NH * T * T), -3, 3);
  const Vec R = random_vec(gen, scores.size());
  Vec P(scores.size());
  auto loss = [&] {
    ref::attention_softmax_forward(P.data(), scores.data(), B, NH, T);
    return project(R, P);
  };
  loss();
  Vec ds(scores.size());
  ref::attention_softmax_backward(ds.data(), R.data(), P.data(), B, NH, T);
  expect_gradient("dscores", scores, ds, loss);
}

TEST(ReferenceGrad, AttentionAv) {
  std::mt19937_64 gen(7);
  Vec Pd = random_vec(gen, sz(B * NH * T * T), 0, 1), qkv = random_vec(gen, sz(N * 3 * C));
  const Vec R = random_vec(gen, sz(N * C));
  Vec out(R.size());
  auto loss = [&] {
    ref::attention_av_forward(out.data(), Pd.data(), qkv.data(), B, T, C, NH);
    return project(R, out);
  };
  Vec dPd(Pd.size()), dqkv(qkv.size(), 0.0);  // q and k parts stay 0
  ref::attention_av_backward(dPd.data(), dqkv.data(), R.data(), Pd.data(), qkv.data(), B, T, C,
                             NH);
  expect_gradient("dPd", Pd, dPd, loss);
  expect_gradient("dqkv", qkv, dqkv, loss);
}

// The operator classes chained as a block uses them, with attention dropout on a fixed mask.
TEST(ReferenceGrad, AttentionComposed) {
  std::mt19937_64 gen(8);
  Vec qkv = random_vec(gen, sz(N * 3 * C), -2, 2);
  const Vec R = random_vec(gen, sz(N * C));
  const std::int64_t nP = B * NH * T * T;
  const float p = 0.25f;
  std::vector<std::uint8_t> mask(sz(nP));
  dropout_mask_fill(mask.data(), RngStream{7, 3, 1, RngOp::AttnDropout}, p, 0, 0, B, NH * T * T);
  Vec S(sz(nP)), P(sz(nP)), Pd(sz(nP)), out(sz(N * C));
  auto loss = [&] {
    ref::attention_scores_forward(S.data(), qkv.data(), B, T, C, NH);
    ref::attention_softmax_forward(P.data(), S.data(), B, NH, T);
    ref::dropout_forward(Pd.data(), P.data(), mask.data(), p, nP);
    ref::attention_av_forward(out.data(), Pd.data(), qkv.data(), B, T, C, NH);
    return project(R, out);
  };
  loss();
  Vec dPd(sz(nP)), dP(sz(nP)), dS(sz(nP)), dqkv(qkv.size());
  ref::attention_av_backward(dPd.data(), dqkv.data(), R.data(), Pd.data(), qkv.data(), B, T, C,
                             NH);
  ref::dropout_backward(dP.data(), dPd.data(), mask.data(), p, nP);
  ref::attention_softmax_backward(dS.data(), dP.data(), P.data(), B, NH, T);
  ref::attention_scores_backward(dqkv.data(), dS.data(), qkv.data(), B, T, C, NH);
  expect_gradient("dqkv", qkv, dqkv, loss);
}

TEST(ReferenceGrad, Gelu) {
  std::mt19937_64 gen(9);
  Vec x = random_vec(gen, 300, -4, 4);
  const Vec R = random_vec(gen, x.size());
  Vec out(x.size());
  auto loss = [&] {
    ref::gelu_forward(out.data(), x.data(), static_cast<std::int64_t>(x.size()));
    return project(R, out);
  };
  Vec dx(x.size());
  ref::gelu_backward(dx.data(), R.data(), x.data(), static_cast<std::int64_t>(x.size()));
  expect_gradient("dinp", x, dx, loss);
}

TEST(ReferenceGrad, ResidualAndDropout) {
  std::mt19937_64 gen(10);
  const std::int64_t n = 64;
  const float p = 0.4f;
  std::vector<std::uint8_t> mask(sz(n));
  dropout_mask_fill(mask.data(), RngStream{1, 0, 2, RngOp::MlpResidDropout}, p, 0, 0, 1, n);
  Vec res = random_vec(gen, sz(n)), branch = random_vec(gen, sz(n));
  const Vec R = random_vec(gen, sz(n));
  Vec dropped(sz(n)), out(sz(n));
  auto loss = [&] {  // out = res + dropout(branch)
    ref::dropout_forward(dropped.data(), branch.data(), mask.data(), p, n);
    ref::residual_forward(out.data(), res.data(), dropped.data(), n);
    return project(R, out);
  };
  Vec dres(sz(n), 0.0), ddropped(sz(n)), dbranch(sz(n));
  ref::residual_backward(dres.data(), ddropped.data(), R.data(), n);
  ref::dropout_backward(dbranch.data(), ddropped.data(), mask.data(), p, n);
  expect_gradient("dres", res, dres, loss);
  expect_gradient("dbranch", branch, dbranch, loss);
}

TEST(ReferenceGrad, CrossEntropy) {
  std::mt19937_64 gen(11);
  Vec logits = random_vec(gen, sz(N * V), -3, 3);
  const auto targets = test::random_ids(gen, sz(N), V);
  const double scale = 1.0 / 3.0;  // any caller factor; the trainer's is 1 / (GBS * T)
  Vec losses(sz(N)), lse(sz(N));
  double loss_value = 0;
  const Vec R(sz(N), scale);  // L = scale * sum of token losses, summed in long double
  auto loss = [&] {
    ref::crossentropy_forward(&loss_value, losses.data(), lse.data(), logits.data(),
                              targets.data(), scale, N, V);
    return project(R, losses);
  };
  const long double L = loss();
  EXPECT_NEAR(loss_value, static_cast<double>(L), 1e-12 * std::abs(loss_value));
  Vec dlogits(logits.size());
  ref::crossentropy_backward(dlogits.data(), logits.data(), lse.data(), targets.data(), scale, N,
                             V);
  expect_gradient("dlogits", logits, dlogits, loss);
  // Each token's gradient row sums to 0 (softmax minus a one-hot, both summing to 1).
  for (std::int64_t n = 0; n < N; ++n) {
    double s = 0;
    for (std::int64_t v = 0; v < V; ++v) s += dlogits[sz(n * V + v)];
    EXPECT_NEAR(s, 0.0, 1e-15);
  }
}

// The Llama family's kernels (reference/rmsnorm.h, rope.h, swiglu.h).
TEST(ReferenceGrad, RmsNorm) {
  std::mt19937_64 gen(12);
  Vec x = random_vec(gen, sz(N * C), -2, 2), w = random_vec(gen, sz(C), 0.5, 1.5);
  const Vec R = random_vec(gen, sz(N * C));
  Vec out(sz(N * C)), rstd(sz(N));
  const float eps = 1e-5f;
  auto loss = [&] {
    ref::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), eps, N, C);
    return project(R, out);
  };
  loss();
  Vec dx(x.size(), 0.0), dw(w.size(), 0.0);
  ref::rmsnorm_backward(dx.data(), dw.data(), R.data(), x.data(), w.data(), rstd.data(), N, C);
  expect_gradient("dinp", x, dx, loss);
  expect_gradient("dweight", w, dw, loss);
}

TEST(ReferenceGrad, Rope) {
  // 4 query heads sharing 2 key/value heads of size 6 (odd half: 3 pairs); theta small enough
  // that every pair turns by a sizeable angle over T = 5 positions.
  std::mt19937_64 gen(13);
  const std::int64_t nh = 4, nkv = 2, hd = 6, W = (nh + 2 * nkv) * hd;
  const float theta = 10.0f;
  Vec x = random_vec(gen, sz(N * W));
  const Vec R = random_vec(gen, x.size());
  Vec out(x.size());
  auto loss = [&] {
    out = x;
    ref::rope_forward(out.data(), B, T, nh, nkv, hd, theta);
    return project(R, out);
  };
  Vec dx = R;  // in place: dqkv starts as dout
  ref::rope_backward(dx.data(), B, T, nh, nkv, hd, theta);
  expect_gradient("dqkv", x, dx, loss);
}

TEST(ReferenceGrad, SwiGlu) {
  std::mt19937_64 gen(14);
  Vec g = random_vec(gen, sz(N * F), -5, 5), u = random_vec(gen, sz(N * F), -2, 2);
  const Vec R = random_vec(gen, g.size());
  Vec out(g.size());
  auto loss = [&] {
    ref::swiglu_forward(out.data(), g.data(), u.data(), N, F);
    return project(R, out);
  };
  Vec dg(g.size()), du(u.size());
  ref::swiglu_backward(dg.data(), du.data(), R.data(), g.data(), u.data(), N, F);
  expect_gradient("dgate", g, dg, loss);
  expect_gradient("dup", u, du, loss);
}

TEST(ReferenceGrad, EncoderWithoutPositions) {
  std::mt19937_64 gen(15);
  Vec wte = random_vec(gen, sz(V * C));
  const auto tokens = test::random_ids(gen, sz(N), V);
  const Vec R = random_vec(gen, sz(N * C));
  Vec out(sz(N * C));
  auto loss = [&] {
    ref::encoder_forward<double>(out.data(), tokens.data(), wte.data(), nullptr, B, T, C, V);
    return project(R, out);
  };
  Vec dwte(wte.size(), 0.0);
  ref::encoder_backward<double>(dwte.data(), nullptr, R.data(), tokens.data(), B, T, C, V);
  expect_gradient("dwte", wte, dwte, loss);
}

// Grouped-query attention: 4 query heads of 2 over 2 kv heads (G = 2), the whole chain with
// dropout; the k and v gradients sum over a kv head's query heads.
TEST(ReferenceGrad, GroupedQueryAttention) {
  std::mt19937_64 gen(16);
  const std::int64_t nh = 4, nkv = 2, hs = C / nh, W = C + 2 * nkv * hs, nP = B * nh * T * T;
  Vec qkv = random_vec(gen, sz(N * W), -2, 2);
  const Vec R = random_vec(gen, sz(N * C));
  const float p = 0.25f;
  std::vector<std::uint8_t> mask(sz(nP));
  dropout_mask_fill(mask.data(), RngStream{7, 3, 2, RngOp::AttnDropout}, p, 0, 0, B, nh * T * T);
  Vec P(sz(nP)), Pd(sz(nP)), out(sz(N * C));
  auto loss = [&] {
    ref::attention_scores_forward(P.data(), qkv.data(), B, T, C, nh, nkv);
    ref::attention_softmax_forward(P.data(), P.data(), B, nh, T);
    ref::dropout_forward(Pd.data(), P.data(), mask.data(), p, nP);
    ref::attention_av_forward(out.data(), Pd.data(), qkv.data(), B, T, C, nh, nkv);
    return project(R, out);
  };
  loss();
  Vec dPd(sz(nP)), dP(sz(nP)), dS(sz(nP)), dqkv(qkv.size());
  ref::attention_av_backward(dPd.data(), dqkv.data(), R.data(), Pd.data(), qkv.data(), B, T, C,
                             nh, nkv);
  ref::dropout_backward(dP.data(), dPd.data(), mask.data(), p, nP);
  ref::attention_softmax_backward(dS.data(), dP.data(), P.data(), B, nh, T);
  ref::attention_scores_backward(dqkv.data(), dS.data(), qkv.data(), B, T, C, nh, nkv);
  expect_gradient("dqkv", qkv, dqkv, loss);
}

}  // namespace
}  // namespace eth
