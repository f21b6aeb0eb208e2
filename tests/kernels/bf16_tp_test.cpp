// The bf16 kernels a tensor-parallel rank runs, against the double references of the whole
// kernels (bf16_check.h's tolerances): the fp32 partial products of a row-parallel product and
// of a column-parallel input gradient, summed over the shares, are the whole product before its
// one rounding; the vocabulary-parallel lookup summed over the ranks plus the positions is
// bf16::encoder_forward bit for bit; the shards' loss statistics give the whole cross-entropy, and
// each shard's dlogits are its columns of the whole gradient. GEMM-based ones on both GEMM paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "bf16_check.h"
#include "gemm_path_fixture.h"
#include "kernels/cpu/bf16/encoder.h"
#include "kernels/cpu/bf16/gemm.h"
#include "kernels/cpu/bf16/matmul.h"
#include "kernels/cpu/bf16/vocab_parallel.h"
#include "kernels/cpu/vocab_parallel.h"
#include "kernels/reference/crossentropy.h"
#include "kernels/reference/encoder.h"
#include "kernels/reference/matmul.h"

namespace eth::bf16_tp_test {
namespace {

using test::expect_bf16_close;
using test::expect_fp32_close;
using test::nan_bf16;
using test::nan_vec;
using test::random_bf16_vec;
using test::reduction_tol;
using test::to_bf16;
using test::Vec;
using test::VecB;
using test::VecF;

constexpr std::int64_t B = 2, T = 24, C = 32, N = B * T, V = 53, K = 96;
constexpr auto sz = [](std::int64_t n) { return static_cast<std::size_t>(n); };

class Bf16TpGemm : public test::GemmPathTest {};

INSTANTIATE_TEST_SUITE_P(Paths, Bf16TpGemm, test::all_gemm_paths(), test::gemm_path_test_name);

// Rows [r*R/n, (r+1)*R/n) of a row-major (R, cols) matrix.
Vec rows_of(const Vec& m, std::int64_t cols, std::int64_t R, std::int64_t n, std::int64_t r) {
  return Vec(m.begin() + (r * R / n) * cols, m.begin() + ((r + 1) * R / n) * cols);
}
// Columns [c0, c1) of a row-major (rows, cols) matrix.
Vec cols_of(const Vec& m, std::int64_t rows, std::int64_t cols, std::int64_t c0, std::int64_t c1) {
  Vec out;
  for (std::int64_t i = 0; i < rows; ++i) {
    out.insert(out.end(), m.begin() + i * cols + c0, m.begin() + i * cols + c1);
  }
  return out;
}

TEST_P(Bf16TpGemm, RowParallelPartialsSumToTheWholeProduct) {
  // out = inp W + b with K = 96 split over 3 ranks (the attention or MLP output of tp 3): each
  // rank's fp32 partial (the bias from rank 0 only) summed is the whole fp32 product.
  std::mt19937_64 gen(71);
  const Vec inp = random_bf16_vec(gen, sz(N * K)), w = random_bf16_vec(gen, sz(K * C));
  const Vec bias = random_bf16_vec(gen, sz(C));
  Vec want(sz(N * C));
  ref::matmul_nn_forward(want.data(), inp.data(), w.data(), bias.data(), N, K, C);
  const std::int64_t tp = 3;
  VecF sum(sz(N * C), 0.0f);
  for (std::int64_t r = 0; r < tp; ++r) {
    const Vec inp_r = cols_of(inp, N, K, r * K / tp, (r + 1) * K / tp);
    const Vec w_r = rows_of(w, C, K, tp, r);
    VecF part = nan_vec(sz(N * C));
    cpu::bf16::matmul_nn_forward_partial(part.data(), to_bf16(inp_r).data(), to_bf16(w_r).data(),
                                         r == 0 ? to_bf16(bias).data() : nullptr, N, K / tp, C);
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += part[i];
  }
  expect_fp32_close("sum of partials", sum, want, reduction_tol(K));
}

TEST_P(Bf16TpGemm, ColumnParallelInputGradientPartialIsFp32) {
  // dinp = dout W in fp32 (the rank's share of qkv's, fc's or the LM head's input gradient),
  // dW and db += as matmul_nt_backward.
  std::mt19937_64 gen(72);
  const std::int64_t OC = 40;
  const Vec dout = random_bf16_vec(gen, sz(N * OC)), inp = random_bf16_vec(gen, sz(N * C));
  const Vec w = random_bf16_vec(gen, sz(OC * C));
  const Vec dw0 = random_bf16_vec(gen, sz(OC * C)), db0 = random_bf16_vec(gen, sz(OC));
  Vec dinp(sz(N * C)), dw = dw0, db = db0;
  ref::matmul_nt_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), N,
                          C, OC);
  VecF got = nan_vec(sz(N * C)), gw(dw0.begin(), dw0.end()), gb(db0.begin(), db0.end());
  cpu::bf16::matmul_nt_backward_partial(got.data(), gw.data(), gb.data(), to_bf16(dout).data(),
                                        to_bf16(inp).data(), to_bf16(w).data(), N, C, OC);
  expect_fp32_close("dinp", got, dinp, reduction_tol(OC));
  expect_fp32_close("dweight", gw, dw, reduction_tol(N));
  expect_fp32_close("dbias", gb, db, reduction_tol(N));
}

TEST(Bf16VocabParallel, LookupSharesSumToTheEncoderBitwise) {
  std::mt19937_64 gen(73);
  const Vec wte = random_bf16_vec(gen, sz(V * C)), wpe = random_bf16_vec(gen, sz(T * C));
  const auto tokens = test::random_ids(gen, sz(N), V);
  VecB whole = nan_bf16(sz(N * C));
  cpu::bf16::encoder_forward(whole.data(), tokens.data(), to_bf16(wte).data(),
                             to_bf16(wpe).data(), B, T, C, V);
  for (std::int64_t tp : {2, 3}) {
    VecF lookup(sz(N * C), 0.0f);
    for (std::int64_t r = 0; r < tp; ++r) {
      const std::int64_t v0 = r * V / tp, v1 = (r + 1) * V / tp;
      VecF part = nan_vec(sz(N * C));
      cpu::bf16::vocab_embedding_forward(part.data(), tokens.data(),
                                         to_bf16(rows_of(wte, C, V, tp, r)).data(), v0, v1 - v0,
                                         N, C, V);
      for (std::size_t i = 0; i < lookup.size(); ++i) lookup[i] += part[i];
    }
    VecB out = nan_bf16(sz(N * C));
    cpu::bf16::position_forward(out.data(), lookup.data(), to_bf16(wpe).data(), B, T, C);
    EXPECT_TRUE(out == whole) << "tp " << tp;
  }
  // Backward: the shards' rows of dwte and dwpe against the whole reference.
  const Vec dout = random_bf16_vec(gen, sz(N * C));
  Vec dwte(sz(V * C), 0.0), dwpe(sz(T * C), 0.0);
  ref::encoder_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), B, T, C, V);
  VecF got_wte(sz(V * C), 0.0f), got_wpe(sz(T * C), 0.0f);
  const std::int64_t tp = 2;
  for (std::int64_t r = 0; r < tp; ++r) {
    const std::int64_t v0 = r * V / tp;
    cpu::bf16::vocab_embedding_backward(got_wte.data() + v0 * C, to_bf16(dout).data(),
                                        tokens.data(), v0, (r + 1) * V / tp - v0, N, C);
  }
  cpu::bf16::position_backward(got_wpe.data(), to_bf16(dout).data(), B, T, C);
  expect_fp32_close("dwte", got_wte, dwte, reduction_tol(N));
  expect_fp32_close("dwpe", got_wpe, dwpe, reduction_tol(B));
}

TEST(Bf16VocabParallel, LossStatisticsOfTheShardsGiveTheWholeCrossEntropy) {
  std::mt19937_64 gen(74);
  const Vec logits = random_bf16_vec(gen, sz(N * V), -4, 4);
  const auto targets = test::random_ids(gen, sz(N), V);
  const double scale = 1.0 / static_cast<double>(N);
  double want_loss = 0;
  Vec losses(sz(N)), lse(sz(N)), dlogits(sz(N * V));
  ref::crossentropy_forward(&want_loss, losses.data(), lse.data(), logits.data(), targets.data(),
                            scale, N, V);
  ref::crossentropy_backward(dlogits.data(), logits.data(), lse.data(), targets.data(), scale, N,
                             V);
  const std::int64_t tp = 3;
  VecF mx(sz(N), -INFINITY), stats(sz(2 * N), 0.0f);
  std::vector<VecB> shard(tp);
  for (std::int64_t r = 0; r < tp; ++r) {
    const std::int64_t v0 = r * V / tp, v1 = (r + 1) * V / tp;
    shard[sz(r)] = to_bf16(cols_of(logits, N, V, v0, v1));
    VecF m = nan_vec(sz(N));
    cpu::bf16::vocab_ce_max(m.data(), shard[sz(r)].data(), N, v1 - v0);
    for (std::size_t i = 0; i < mx.size(); ++i) mx[i] = std::max(mx[i], m[i]);  // max all-reduce
  }
  for (std::int64_t r = 0; r < tp; ++r) {
    const std::int64_t v0 = r * V / tp, v1 = (r + 1) * V / tp;
    VecF s = nan_vec(sz(2 * N));
    cpu::bf16::vocab_ce_sums(s.data(), shard[sz(r)].data(), mx.data(), targets.data(), v0, N,
                             v1 - v0);
    for (std::size_t i = 0; i < stats.size(); ++i) stats[i] += s[i];  // sum all-reduce
  }
  double loss = 0;
  VecF got_losses = nan_vec(sz(N)), got_lse = nan_vec(sz(N));
  cpu::vocab_ce_finish(&loss, got_losses.data(), got_lse.data(), mx.data(), stats.data(), scale,
                       N);
  expect_fp32_close("lse", got_lse, lse, reduction_tol(V));
  expect_fp32_close("losses", got_losses, losses, reduction_tol(V));
  EXPECT_NEAR(loss, want_loss, reduction_tol(V) * std::abs(want_loss));
  for (std::int64_t r = 0; r < tp; ++r) {
    const std::int64_t v0 = r * V / tp, v1 = (r + 1) * V / tp;
    VecB d = shard[sz(r)];  // in place, as the stage runs it
    cpu::bf16::vocab_ce_backward(d.data(), d.data(), got_lse.data(), targets.data(), v0, scale, N,
                                 v1 - v0);
    expect_bf16_close("dlogits shard " + std::to_string(r), d, cols_of(dlogits, N, V, v0, v1),
                      reduction_tol(V));
  }
}

}  // namespace
}  // namespace eth::bf16_tp_test
