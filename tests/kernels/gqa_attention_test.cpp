// Grouped-query attention (NH query heads sharing NKV key/value heads) in every CPU kernel set:
//   - against multi-head attention with the kv heads replicated (an independent check: MHA is
//     the kernels GPT trains with; the q gradients must agree, and a kv head's k and v gradients
//     must be the sums of its replicas'), for the reference, fp32 and bf16 kernels;
//   - the fp32 and bf16 kernels against the double reference under GQA (the usual tolerances);
//   - a kv-head range is a contiguous column shard (tensor parallelism under GQA);
//   - thread-count invariance of the G > 1 paths.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>
#include <random>
#include <tuple>
#include <type_traits>

#include "bf16_check.h"
#include "gemm_path_fixture.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/bf16/attention.h"
#include "kernels/reference/attention.h"
#include "train/kernel_set.h"
#include "train/kernel_set_bf16.h"

namespace eth::gqa_attention_test {
namespace {

using cpu::bf16::QkvLayout;
using test::bytes;
using test::bf16_to_double;
using test::expect_bf16_close;
using test::expect_close;
using test::kFloatEps;
using test::random_bf16_vec;
using test::reduction_tol;
using test::rms;
using test::to_bf16;
using test::to_double;
using test::Vec;
using test::VecB;
using test::VecF;

// 6 query heads of 16 over 2 kv heads (G = 3); T > 64 exercises the row blocks.
constexpr std::int64_t B = 2, T = 70, NH = 6, NKV = 2, G = NH / NKV, hs = 16, C = NH * hs;
constexpr std::int64_t N = B * T, W = C + 2 * NKV * hs, nP = B * NH * T * T;
constexpr auto sz = [](std::int64_t n) { return static_cast<std::size_t>(n); };

// The documented grouped layout, written out: kv head g's group starts at g (G+2) hs; query
// head h = g G + j at j hs in it, k at G hs, v at (G+1) hs.
std::int64_t q_col(std::int64_t h) { return (h / G) * (G + 2) * hs + (h % G) * hs; }
std::int64_t k_col(std::int64_t g) { return g * (G + 2) * hs + G * hs; }
std::int64_t v_col(std::int64_t g) { return g * (G + 2) * hs + (G + 1) * hs; }

// The MHA input that replicates kv head h / G for each query head h (GPT's [q_h; k_h; v_h]).
Vec replicate(const Vec& gqa) {
  Vec mha(sz(N * 3 * C));
  for (std::int64_t n = 0; n < N; ++n) {
    for (std::int64_t h = 0; h < NH; ++h) {
      for (std::int64_t i = 0; i < hs; ++i) {
        mha[sz(n * 3 * C + h * 3 * hs + i)] = gqa[sz(n * W + q_col(h) + i)];
        mha[sz(n * 3 * C + h * 3 * hs + hs + i)] = gqa[sz(n * W + k_col(h / G) + i)];
        mha[sz(n * 3 * C + h * 3 * hs + 2 * hs + i)] = gqa[sz(n * W + v_col(h / G) + i)];
      }
    }
  }
  return mha;
}

// The GQA gradient implied by an MHA gradient of the replicated input: q as is, each kv head's
// k and v summed over its G replicas.
Vec fold(const Vec& dmha) {
  Vec d(sz(N * W), 0.0);
  for (std::int64_t n = 0; n < N; ++n) {
    for (std::int64_t h = 0; h < NH; ++h) {
      for (std::int64_t i = 0; i < hs; ++i) {
        d[sz(n * W + q_col(h) + i)] = dmha[sz(n * 3 * C + h * 3 * hs + i)];
        d[sz(n * W + k_col(h / G) + i)] += dmha[sz(n * 3 * C + h * 3 * hs + hs + i)];
        d[sz(n * W + v_col(h / G) + i)] += dmha[sz(n * 3 * C + h * 3 * hs + 2 * hs + i)];
      }
    }
  }
  return d;
}

// The whole chain (scores, softmax, P V and their backward) on one set of kernels, in R:
// returns P, out and dqkv. nkv = NH is multi-head on a (N, 3C) qkv.
template <typename R>
std::tuple<Vec, Vec, Vec> chain(const Vec& qkv, const Vec& dout, std::int64_t nkv,
                                std::int64_t c = C, std::int64_t nh = NH) {
  const std::int64_t np = B * nh * T * T;
  std::vector<R> q(qkv.size()), dy(dout.size()), P(sz(np)), out(sz(N * c)), dP(sz(np));
  std::vector<R> dq(qkv.size());
  for (std::size_t i = 0; i < qkv.size(); ++i) q[i] = static_cast<R>(qkv[i]);
  for (std::size_t i = 0; i < dout.size(); ++i) dy[i] = static_cast<R>(dout[i]);
  if constexpr (std::is_same_v<R, double>) {
    ref::attention_scores_forward(P.data(), q.data(), B, T, c, nh, nkv);
    ref::attention_softmax_forward(P.data(), P.data(), B, nh, T);
    ref::attention_av_forward(out.data(), P.data(), q.data(), B, T, c, nh, nkv);
    ref::attention_av_backward(dP.data(), dq.data(), dy.data(), P.data(), q.data(), B, T, c, nh,
                               nkv);
    ref::attention_softmax_backward(dP.data(), dP.data(), P.data(), B, nh, T);
    ref::attention_scores_backward(dq.data(), dP.data(), q.data(), B, T, c, nh, nkv);
  } else {
    cpu::attention_scores_forward(P.data(), q.data(), B, T, c, nh, nkv);
    cpu::attention_softmax_forward(P.data(), P.data(), B, nh, T);
    cpu::attention_av_forward(out.data(), P.data(), q.data(), B, T, c, nh, nkv);
    cpu::attention_av_backward(dP.data(), dq.data(), dy.data(), P.data(), q.data(), B, T, c, nh,
                               nkv);
    cpu::attention_softmax_backward(dP.data(), dP.data(), P.data(), B, nh, T);
    cpu::attention_scores_backward(dq.data(), dP.data(), q.data(), B, T, c, nh, nkv);
  }
  return {Vec(P.begin(), P.end()), Vec(out.begin(), out.end()), Vec(dq.begin(), dq.end())};
}

// The bf16 chain on layout L (qkv rows L.row wide).
std::tuple<VecB, VecB, VecB> chain_bf16(const QkvLayout& L, const Vec& qkv, const Vec& dout,
                                        std::int64_t nkv) {
  const VecB q = to_bf16(qkv), dy = to_bf16(dout);
  VecB P(sz(nP)), out(sz(N * C)), dP(sz(nP)), dq(qkv.size(), Bf16{0});
  cpu::bf16::attention_probs_forward(P.data(), q.data(), L, B, T, C, NH, nkv);
  cpu::bf16::attention_av_forward(out.data(), P.data(), q.data(), L, B, T, C, NH, nkv);
  cpu::bf16::attention_av_backward(dP.data(), dq.data(), dy.data(), P.data(), q.data(), L, B, T, C,
                                   NH, nkv);
  cpu::bf16::attention_softmax_backward(dP.data(), dP.data(), P.data(), B, NH, T);
  cpu::bf16::attention_scores_backward(dq.data(), dP.data(), q.data(), L, B, T, C, NH, nkv);
  return {P, out, dq};
}

double max_rel(const Vec& got, const Vec& want) {
  EXPECT_EQ(got.size(), want.size());
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::abs(got[i] - want[i]) / (1.0 + std::abs(want[i])));
  }
  return worst;
}

class GqaAttention : public ::testing::Test {
 protected:
  std::mt19937_64 gen{60};
  const Vec qkv = random_bf16_vec(gen, sz(N* W), -2, 2);
  const Vec dout = random_bf16_vec(gen, sz(N* C));
};

TEST_F(GqaAttention, EqualsMultiHeadWithReplicatedKvHeads) {
  const Vec mha = replicate(qkv);
  const auto [Pm, outm, dm] = chain<double>(mha, dout, NH);
  const auto [Pg, outg, dg] = chain<double>(qkv, dout, NKV);
  EXPECT_LE(max_rel(Pg, Pm), 1e-13);
  EXPECT_LE(max_rel(outg, outm), 1e-13);
  EXPECT_LE(max_rel(dg, fold(dm)), 1e-13);

  // fp32: each side to rounding of the same sums (the kv gradients add G of them).
  const auto [Pmf, outmf, dmf] = chain<float>(mha, dout, NH);
  const auto [Pgf, outgf, dgf] = chain<float>(qkv, dout, NKV);
  EXPECT_LE(max_rel(Pgf, Pmf), 4 * reduction_tol(hs + T));
  EXPECT_LE(max_rel(outgf, outmf), 4 * reduction_tol(T));
  EXPECT_LE(max_rel(dgf, fold(dmf)), 4 * reduction_tol(G * T));
  // The multi-head call with NKV = NH is the one with NKV left out (GPT's calls): bitwise.
  VecF P1(sz(nP)), P2(sz(nP));
  const VecF m = test::to_float(mha);
  cpu::attention_scores_forward(P1.data(), m.data(), B, T, C, NH);
  cpu::attention_scores_forward(P2.data(), m.data(), B, T, C, NH, NH);
  EXPECT_TRUE(P1 == P2);
}

TEST_F(GqaAttention, Fp32MatchesReference) {
  const auto [P, out, d] = chain<double>(qkv, dout, NKV);
  const auto [Pf, outf, df] = chain<float>(qkv, dout, NKV);
  // Errors compound through the chain: scores (hs) feed the softmax (T) feeding P V (T); the
  // kv gradients sum G heads.
  const double tol = reduction_tol(4 * G * T);
  expect_close("P", test::to_float(Pf), P, tol * rms(P), tol);
  expect_close("out", test::to_float(outf), out, tol * rms(out), tol);
  expect_close("dqkv", test::to_float(df), d, tol * rms(d), tol);
}

class GqaBf16 : public test::GemmPathTest {};
INSTANTIATE_TEST_SUITE_P(Paths, GqaBf16, test::all_gemm_paths(), test::gemm_path_test_name);

// The bf16 kernels on the grouped layout and on the blocked one (its q | k | v columns mapped
// onto the grouped layout the reference reads) against the reference, operator by operator:
// each reference step reads the bf16 tensors the kernels stored before it (as
// bf16_vs_reference_test does), so each comparison carries one kernel's fp32 arithmetic and one
// rounding.
TEST_P(GqaBf16, MatchesReferenceOnBothLayouts) {
  std::mt19937_64 gen(61);
  const Vec qkv = random_bf16_vec(gen, sz(N * W), -2, 2), dout = random_bf16_vec(gen, sz(N * C));
  // The blocked layout's column of each grouped column.
  std::vector<std::int64_t> to_blocked(sz(W));
  for (std::int64_t h = 0; h < NH; ++h) {
    for (std::int64_t i = 0; i < hs; ++i) to_blocked[sz(q_col(h) + i)] = h * hs + i;
  }
  for (std::int64_t g = 0; g < NKV; ++g) {
    for (std::int64_t i = 0; i < hs; ++i) {
      to_blocked[sz(k_col(g) + i)] = C + g * hs + i;
      to_blocked[sz(v_col(g) + i)] = C + NKV * hs + g * hs + i;
    }
  }
  for (int layout = 0; layout < 2; ++layout) {
    SCOPED_TRACE(layout == 0 ? "grouped" : "blocked");
    const QkvLayout L =
        layout == 0 ? QkvLayout::head_interleaved(C, NH, NKV) : QkvLayout::blocked(C, NH, NKV);
    ASSERT_EQ(L.row, W);
    const auto col = [&](std::int64_t c) { return layout == 0 ? c : to_blocked[sz(c)]; };
    VecB q(qkv.size());  // qkv in layout L
    for (std::int64_t n = 0; n < N; ++n) {
      for (std::int64_t c = 0; c < W; ++c)
        q[sz(n * W + col(c))] = bf16_from_float(static_cast<float>(qkv[sz(n * W + c)]));
    }
    const VecB dy = to_bf16(dout);
    VecB Pb(sz(nP)), outb(sz(N * C)), dPb(sz(nP)), dSb(sz(nP)), db(qkv.size());
    cpu::bf16::attention_probs_forward(Pb.data(), q.data(), L, B, T, C, NH, NKV);
    cpu::bf16::attention_av_forward(outb.data(), Pb.data(), q.data(), L, B, T, C, NH, NKV);
    cpu::bf16::attention_av_backward(dPb.data(), db.data(), dy.data(), Pb.data(), q.data(), L, B, T,
                                     C, NH, NKV);
    cpu::bf16::attention_softmax_backward(dSb.data(), dPb.data(), Pb.data(), B, NH, T);
    cpu::bf16::attention_scores_backward(db.data(), dSb.data(), q.data(), L, B, T, C, NH, NKV);

    const Vec P = bf16_to_double(Pb), dP = bf16_to_double(dPb), dS = bf16_to_double(dSb);
    Vec Pw(sz(nP)), outw(sz(N * C)), dPw(sz(nP)), dSw(sz(nP)), dw(qkv.size());
    ref::attention_scores_forward(Pw.data(), qkv.data(), B, T, C, NH, NKV);
    ref::attention_softmax_forward(Pw.data(), Pw.data(), B, NH, T);
    ref::attention_av_forward(outw.data(), P.data(), qkv.data(), B, T, C, NH, NKV);
    ref::attention_av_backward(dPw.data(), dw.data(), dout.data(), P.data(), qkv.data(), B, T, C,
                               NH, NKV);
    ref::attention_softmax_backward(dSw.data(), dP.data(), P.data(), B, NH, T);
    ref::attention_scores_backward(dw.data(), dS.data(), qkv.data(), B, T, C, NH, NKV);

    expect_bf16_close("P", Pb, Pw, reduction_tol(hs + T));
    expect_bf16_close("out", outb, outw, reduction_tol(T));
    expect_bf16_close("dPd", dPb, dPw, reduction_tol(hs));
    expect_bf16_close("dscores", dSb, dSw, reduction_tol(T));
    VecB dgrouped(db.size());
    for (std::int64_t n = 0; n < N; ++n) {
      for (std::int64_t c = 0; c < W; ++c) dgrouped[sz(n * W + c)] = db[sz(n * W + col(c))];
    }
    // k and v sum the G query heads' products in fp32 and round once.
    expect_bf16_close("dqkv", dgrouped, dw, reduction_tol(G * T));
  }
}

// Under tensor parallelism a rank holds kv heads [g0, g1) with their query heads: one
// contiguous column range of qkv (and of out). The kernels on that range alone compute exactly
// those heads of the whole: bitwise for the reference, to rounding for the fp32 kernels.
TEST_F(GqaAttention, KvHeadRangeIsAContiguousShard) {
  const std::int64_t g0 = 1, g1 = 2, nkv = g1 - g0, nh = nkv * G, c = nh * hs;
  const std::int64_t w = c + 2 * nkv * hs;
  Vec qkv_l, dout_l;
  for (std::int64_t n = 0; n < N; ++n) {
    const auto row = qkv.begin() + n * W, drow = dout.begin() + n * C;
    qkv_l.insert(qkv_l.end(), row + g0 * (G + 2) * hs, row + g0 * (G + 2) * hs + w);
    dout_l.insert(dout_l.end(), drow + g0 * G * hs, drow + g0 * G * hs + c);
  }
  auto check = [&](auto tag, double tol) {
    using R = decltype(tag);
    const auto [P, out, d] = chain<R>(qkv, dout, NKV);
    const auto [Pl, outl, dl] = chain<R>(qkv_l, dout_l, nkv, c, nh);
    Vec Pw, outw, dw;
    for (std::int64_t b = 0; b < B; ++b) {
      const auto at = P.begin() + (b * NH + g0 * G) * T * T;
      Pw.insert(Pw.end(), at, at + nh * T * T);
    }
    for (std::int64_t n = 0; n < N; ++n) {
      outw.insert(outw.end(), out.begin() + n * C + g0 * G * hs,
                  out.begin() + n * C + g0 * G * hs + c);
      dw.insert(dw.end(), d.begin() + n * W + g0 * (G + 2) * hs,
                d.begin() + n * W + g0 * (G + 2) * hs + w);
    }
    EXPECT_LE(max_rel(Pl, Pw), tol);
    EXPECT_LE(max_rel(outl, outw), tol);
    EXPECT_LE(max_rel(dl, dw), tol);
  };
  check(0.0, 0.0);
  check(0.0f, 4 * T * kFloatEps);
}

TEST_F(GqaAttention, ThreadInvariant) {
  auto run = [&] {
    const auto [P, out, d] = chain<float>(qkv, dout, NKV);
    const auto [Pb, outb, db] = chain_bf16(QkvLayout::head_interleaved(C, NH, NKV), qkv, dout, NKV);
    return std::vector{bytes(P), bytes(out), bytes(d), bytes(Pb), bytes(outb), bytes(db)};
  };
  test::expect_thread_invariant("grouped-query attention", run);
}

// A micro-batch of one has fewer (batch, kv head) tasks than threads, so the backward kernels
// split them by row blocks too: the bytes stay those of one thread, and those of the same
// sample inside a batch of two.
TEST_F(GqaAttention, RowBlockSplitKeepsTheBytes) {
  const Vec q1(qkv.begin(), qkv.begin() + T * W), d1(dout.begin(), dout.begin() + T * C);
  auto run = [&](std::int64_t b, const Vec& q, const Vec& d) {
    const std::int64_t np = b * NH * T * T;
    const VecF qf = test::to_float(q), df = test::to_float(d);
    VecF P(sz(np)), out(sz(b * T * C)), dP(sz(np)), dq(q.size());
    cpu::attention_scores_forward(P.data(), qf.data(), b, T, C, NH, NKV);
    cpu::attention_softmax_forward(P.data(), P.data(), b, NH, T);
    cpu::attention_av_forward(out.data(), P.data(), qf.data(), b, T, C, NH, NKV);
    cpu::attention_av_backward(dP.data(), dq.data(), df.data(), P.data(), qf.data(), b, T, C, NH,
                               NKV);
    cpu::attention_softmax_backward(dP.data(), dP.data(), P.data(), b, NH, T);
    cpu::attention_scores_backward(dq.data(), dP.data(), qf.data(), b, T, C, NH, NKV);
    const auto L = QkvLayout::head_interleaved(C, NH, NKV);
    const VecB qb = to_bf16(q), db = to_bf16(d);
    VecB Pb(sz(np)), dPb(sz(np)), dqb(q.size());
    cpu::bf16::attention_probs_forward(Pb.data(), qb.data(), L, b, T, C, NH, NKV);
    cpu::bf16::attention_av_backward(dPb.data(), dqb.data(), db.data(), Pb.data(), qb.data(), L, b,
                                     T, C, NH, NKV);
    cpu::bf16::attention_softmax_backward(dPb.data(), dPb.data(), Pb.data(), b, NH, T);
    cpu::bf16::attention_scores_backward(dqb.data(), dPb.data(), qb.data(), L, b, T, C, NH, NKV);
    // The first sample's dqkv and dP, as bytes.
    dq.resize(sz(T * W)), dqb.resize(sz(T * W)), dP.resize(sz(NH * T * T)),
        dPb.resize(sz(NH * T * T));
    return std::vector{bytes(dq), bytes(dP), bytes(dqb), bytes(dPb)};
  };
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto whole = run(B, qkv, dout);
  const auto one = run(1, q1, d1);
  omp_set_num_threads(3);  // 2 tasks < 3 threads: split by row blocks
  const auto split = run(1, q1, d1);
  omp_set_num_threads(saved);
  for (std::size_t i = 0; i < one.size(); ++i) {
    EXPECT_TRUE(one[i] == split[i]) << "output " << i << ": split by row blocks";
    EXPECT_TRUE(one[i] == whole[i]) << "output " << i << ": the batch's first sample";
  }
}

// The bf16 set reads a GQA qkv as the fp32 set does (one checkpoint, either precision): their
// attention outputs on the same bf16-representable inputs agree to bf16 rounding, where any
// other placement of the kv heads would be off by O(1).
TEST_F(GqaAttention, Bf16SetUsesTheFp32SetsLayout) {
  VecF P32(sz(nP)), out32(sz(N * C));
  const VecF q32 = test::to_float(qkv);
  CpuKernels::attention_probs_forward(P32.data(), q32.data(), B, T, C, NH, NKV);
  CpuKernels::attention_av_forward(out32.data(), P32.data(), q32.data(), B, T, C, NH, NKV);
  VecB P16(sz(nP)), out16(sz(N * C));
  const VecB q16 = to_bf16(qkv);
  CpuBf16Kernels::attention_probs_forward(P16.data(), q16.data(), B, T, C, NH, NKV);
  CpuBf16Kernels::attention_av_forward(out16.data(), P16.data(), q16.data(), B, T, C, NH, NKV);
  expect_bf16_close("P", P16, to_double(P32), 2 * reduction_tol(hs + T));
  expect_close("out", test::bf16_to_float(out16), to_double(out32),
               2 * test::kBf16Roundoff + 2 * reduction_tol(T) * rms(to_double(out32)),
               test::kBf16Roundoff + 2 * reduction_tol(T));
}

TEST(GqaAttentionInput, BadHeadCountsAreRefused) {
  Vec qkv(sz(N * W)), S(sz(nP));
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(ref::attention_scores_forward(S.data(), qkv.data(), B, T, C, NH, 4), "NKV");
  VecF qf(qkv.size()), Sf(S.size());
  EXPECT_DEATH(cpu::attention_scores_forward(Sf.data(), qf.data(), B, T, C, NH, 4), "NKV");
  VecB qb(qkv.size()), Sb(S.size());
  EXPECT_DEATH(cpu::bf16::attention_probs_forward(
                   Sb.data(), qb.data(), QkvLayout::head_interleaved(C, NH, NKV), B, T, C, NH, 4),
               "NKV");
}

}  // namespace
}  // namespace eth::gqa_attention_test
