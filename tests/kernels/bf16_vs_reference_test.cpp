// Every bf16 kernel against its double reference (kernels/reference/), on bf16-representable
// inputs, with the tolerance of bf16_check.h: |got - want| <= 2^-8 |want| + (1 + 2^-8) tol32
// (|want| + rms(want)), tol32 = 4 sqrt(K) eps_float for a reduction of length K; fp32 outputs
// (parameter gradients, statistics, losses) with tol32 alone. "=" outputs start as NaN, "+="
// outputs from the same random values on both sides. The GEMM-based kernels run on both GEMM
// paths: oneDNN's bf16 matmul where this CPU can, and the fp32-compute fallback always.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <functional>
#include <random>

#include "bf16_check.h"
#include "gemm_path_fixture.h"
#include "kernels/cpu/bf16/attention.h"
#include "kernels/cpu/bf16/crossentropy.h"
#include "kernels/cpu/bf16/encoder.h"
#include "kernels/cpu/bf16/gemm.h"
#include "kernels/cpu/bf16/gemm_detail.h"
#include "kernels/cpu/bf16/layernorm.h"
#include "kernels/cpu/bf16/matmul.h"
#include "kernels/cpu/bf16/optimizer.h"
#include "kernels/cpu/bf16/pointwise.h"
#include "kernels/cpu/optimizer.h"
#include "kernels/reference/attention.h"
#include "kernels/reference/crossentropy.h"
#include "kernels/reference/encoder.h"
#include "kernels/reference/layernorm.h"
#include "kernels/reference/matmul.h"
#include "kernels/reference/pointwise.h"
#include "kernels/rng.h"
#include "train/kernel_set.h"
#include "train/kernel_set_bf16.h"

namespace eth::cpu::bf16 {
// gtest prints a failing test's parameter with this (found by argument-dependent lookup).
void PrintTo(GemmPath p, std::ostream* os) { *os << gemm_path_name(p); }
}  // namespace eth::cpu::bf16

namespace eth::bf16_vs_reference_test {

namespace {

using cpu::bf16::GemmPath;
using cpu::bf16::QkvLayout;
using test::bf16_to_double;
using test::expect_bf16_close;
using test::expect_fp32_close;
using test::kFloatEps;
using test::nan_bf16;
using test::nan_vec;
using test::random_bf16_vec;
using test::random_vec;
using test::reduction_tol;
using test::to_bf16;
using test::to_double;
using test::to_float;
using test::Vec;
using test::VecB;
using test::VecF;

// T > 64 exercises the attention row blocks; hs = C / NH = 16.
constexpr std::int64_t B = 2, T = 80, C = 48, NH = 3, V = 97, F = 4 * C, N = B * T;
constexpr auto sz = [](std::int64_t n) { return static_cast<std::size_t>(n); };
constexpr std::int64_t hs = C / NH;

// Runs each GEMM-based test on one GEMM path, restoring the process-wide path afterwards.
class Bf16Gemm : public test::GemmPathTest {};

INSTANTIATE_TEST_SUITE_P(Paths, Bf16Gemm, test::all_gemm_paths(), test::gemm_path_test_name);

// C = alpha op(A) op(B) (+ beta C0 | + bias) in double, from the stored (padded) operands.
Vec reference_gemm(bool ta, bool tb, std::int64_t M, std::int64_t Nc, std::int64_t K, double alpha,
                   const Vec& A, std::int64_t lda, const Vec& Bm, std::int64_t ldb) {
  Vec out(sz(M * Nc));
  for (std::int64_t i = 0; i < M; ++i) {
    for (std::int64_t j = 0; j < Nc; ++j) {
      double acc = 0;
      for (std::int64_t k = 0; k < K; ++k) {
        const double a = ta ? A[sz(k * lda + i)] : A[sz(i * lda + k)];
        const double b = tb ? Bm[sz(j * ldb + k)] : Bm[sz(k * ldb + j)];
        acc += a * b;
      }
      out[sz(i * Nc + j)] = alpha * acc;
    }
  }
  return out;
}

using cpu::bf16::detail::GemmCall;
using GemmRunner = std::function<void(const GemmCall&)>;

// Through the public entry points, on the process-wide path.
void public_gemm(const GemmCall& c) {
  if (c.C32 != nullptr) {
    cpu::bf16::gemm(c.trans_a, c.trans_b, c.M, c.N, c.K, c.alpha, c.A, c.lda, c.B, c.ldb, c.beta,
                    c.C32, c.ldc);
  } else {
    cpu::bf16::gemm(c.trans_a, c.trans_b, c.M, c.N, c.K, c.alpha, c.A, c.lda, c.B, c.ldb, c.bias,
                    c.C16, c.ldc);
  }
}

// One GEMM with padded leading dimensions, both output types; checks only the (M, Nc) block.
void check_gemm(bool ta, bool tb, std::int64_t M, std::int64_t Nc, std::int64_t K,
                std::mt19937_64& gen, const GemmRunner& run = public_gemm) {
  SCOPED_TRACE("ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) + " M=" +
               std::to_string(M) + " N=" + std::to_string(Nc) + " K=" + std::to_string(K));
  const std::int64_t pad = 3;
  const std::int64_t a_rows = ta ? K : M, a_cols = ta ? M : K;
  const std::int64_t b_rows = tb ? Nc : K, b_cols = tb ? K : Nc;
  const std::int64_t lda = a_cols + pad, ldb = b_cols + pad, ldc = Nc + pad;
  const Vec A = random_bf16_vec(gen, sz(a_rows * lda)), Bm = random_bf16_vec(gen, sz(b_rows * ldb));
  const Vec C0 = random_vec(gen, sz(M * ldc)), bias = random_bf16_vec(gen, sz(Nc));
  const VecB Ab = to_bf16(A), Bb = to_bf16(Bm), biasb = to_bf16(bias);
  const auto cpu_t = [](bool t) { return t ? cpu::Trans::Yes : cpu::Trans::No; };
  const double tol = reduction_tol(K);
  for (const float alpha : {1.0f, 1.5f}) {
    const Vec prod = reference_gemm(ta, tb, M, Nc, K, alpha, A, lda, Bm, ldb);
    // fp32 C, beta 0 (C not read: NaN) and 1 (accumulate).
    for (const float beta : {0.0f, 1.0f}) {
      VecF Cf = beta == 0.0f ? nan_vec(C0.size()) : to_float(C0);
      GemmCall c{cpu_t(ta), cpu_t(tb), M, Nc, K, alpha, Ab.data(), lda, Bb.data(), ldb};
      c.beta = beta, c.C32 = Cf.data(), c.ldc = ldc;
      run(c);
      VecF got;
      Vec want;
      for (std::int64_t i = 0; i < M; ++i) {
        for (std::int64_t j = 0; j < Nc; ++j) {
          got.push_back(Cf[sz(i * ldc + j)]);
          want.push_back(prod[sz(i * Nc + j)] +
                         beta * static_cast<double>(static_cast<float>(C0[sz(i * ldc + j)])));
        }
      }
      expect_fp32_close("fp32 C alpha=" + std::to_string(alpha) + " beta=" + std::to_string(beta),
                        got, want, tol);
    }
    // bf16 C: with a bias (alpha 1 only) and without; padding columns must stay untouched.
    for (const bool with_bias : {false, true}) {
      if (with_bias && alpha != 1.0f) continue;
      VecB Cb = nan_bf16(sz(M * ldc));
      GemmCall c{cpu_t(ta), cpu_t(tb), M, Nc, K, alpha, Ab.data(), lda, Bb.data(), ldb};
      c.bias = with_bias ? biasb.data() : nullptr, c.C16 = Cb.data(), c.ldc = ldc;
      run(c);
      VecB got;
      Vec want;
      for (std::int64_t i = 0; i < M; ++i) {
        for (std::int64_t j = 0; j < Nc; ++j) {
          got.push_back(Cb[sz(i * ldc + j)]);
          want.push_back(prod[sz(i * Nc + j)] + (with_bias ? bias[sz(j)] : 0.0));
        }
        for (std::int64_t j = Nc; j < ldc; ++j) EXPECT_EQ(Cb[sz(i * ldc + j)].bits, 0x7FC0);
      }
      expect_bf16_close(std::string("bf16 C") + (with_bias ? " with bias" : ""), got, want, tol);
    }
  }
}

TEST_P(Bf16Gemm, AllTransposesPaddedLeadingDimensions) {
  std::mt19937_64 gen(40);
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) check_gemm(ta != 0, tb != 0, 37, 29, 53, gen);
  }
}

TEST(Bf16VsReference, GemmFallbackInSeveralBlocks) {
  // Blocks of 16: M = 37 takes three row blocks (the last partial), N = 29 two column blocks and
  // K = 53 four depth blocks added onto each other, in every orientation, both output types.
  std::mt19937_64 gen(41);
  const GemmRunner small_blocks = [](const GemmCall& c) {
    cpu::bf16::detail::fp32_compute_gemm(c, 16);
  };
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) check_gemm(ta != 0, tb != 0, 37, 29, 53, gen, small_blocks);
  }
}

// Both matmul storage forms, with and without bias (the LM head is nt without bias).
void check_matmul(bool nn, bool with_bias) {
  SCOPED_TRACE(std::string(nn ? "nn" : "nt") + (with_bias ? " with bias" : " without bias"));
  std::mt19937_64 gen(43);
  const std::int64_t IC = C, OC = F;
  const Vec x = random_bf16_vec(gen, sz(N * IC)), w = random_bf16_vec(gen, sz(IC * OC));
  const Vec b = random_bf16_vec(gen, sz(OC));
  const VecB xb = to_bf16(x), wb = to_bf16(w), bb = to_bf16(b);
  const auto fwd_ref = nn ? ref::matmul_nn_forward<double> : ref::matmul_nt_forward<double>;
  const auto fwd = nn ? cpu::bf16::matmul_nn_forward : cpu::bf16::matmul_nt_forward;
  const auto bwd_ref = nn ? ref::matmul_nn_backward<double> : ref::matmul_nt_backward<double>;
  const auto bwd = nn ? cpu::bf16::matmul_nn_backward : cpu::bf16::matmul_nt_backward;
  Vec out(sz(N * OC));
  VecB outb = nan_bf16(out.size());
  fwd_ref(out.data(), x.data(), w.data(), with_bias ? b.data() : nullptr, N, IC, OC);
  fwd(outb.data(), xb.data(), wb.data(), with_bias ? bb.data() : nullptr, N, IC, OC);
  expect_bf16_close("out", outb, out, reduction_tol(IC));

  const Vec dout = random_bf16_vec(gen, sz(N * OC));
  Vec dx(x.size()), dw = random_vec(gen, w.size()), db = random_vec(gen, b.size());
  VecB dxb = nan_bf16(dx.size());
  VecF dwf = to_float(dw), dbf = to_float(db);
  dw = to_double(dwf), db = to_double(dbf);  // the fp32 starting values on both sides
  bwd_ref(dx.data(), dw.data(), with_bias ? db.data() : nullptr, dout.data(), x.data(), w.data(),
          N, IC, OC);
  bwd(dxb.data(), dwf.data(), with_bias ? dbf.data() : nullptr, to_bf16(dout).data(), xb.data(),
      wb.data(), N, IC, OC);
  expect_bf16_close("dinp", dxb, dx, reduction_tol(OC));
  expect_fp32_close("dweight", dwf, dw, reduction_tol(N));
  expect_fp32_close("dbias", dbf, db, reduction_tol(N));  // unchanged on both sides without bias
}

TEST_P(Bf16Gemm, MatmulNt) {
  check_matmul(false, true);
  check_matmul(false, false);
}

TEST_P(Bf16Gemm, MatmulNn) {
  check_matmul(true, true);
  check_matmul(true, false);
}

// Attention is checked head by head: the reference runs on one head at a time (B = 1, NH = 1,
// C = hs), where every qkv layout is the same [q | k | v], so the check does not depend on the
// layout the reference itself uses for several heads.
struct HeadView {
  const QkvLayout& L;
  std::int64_t b, h;
  std::int64_t col(std::int64_t t, int part) const {  // part 0 q, 1 k, 2 v
    return (b * T + t) * L.row + h * L.head + (part == 0 ? 0 : part == 1 ? L.k : L.v);
  }
};

Vec gather_head(const Vec& qkv, const HeadView& hv) {
  Vec one(sz(T * 3 * hs));
  for (std::int64_t t = 0; t < T; ++t) {
    for (int part = 0; part < 3; ++part) {
      for (std::int64_t i = 0; i < hs; ++i) one[sz(t * 3 * hs + part * hs + i)] = qkv[sz(hv.col(t, part) + i)];
    }
  }
  return one;
}

void scatter_head(Vec& qkv, const Vec& one, const HeadView& hv, int first_part, int last_part) {
  for (std::int64_t t = 0; t < T; ++t) {
    for (int part = first_part; part <= last_part; ++part) {
      for (std::int64_t i = 0; i < hs; ++i) qkv[sz(hv.col(t, part) + i)] = one[sz(t * 3 * hs + part * hs + i)];
    }
  }
}

// (T,T) block of head (b,h) of a (B,NH,T,T) tensor, and the (T,hs) columns of head h of (B,T,C).
Vec tt_block(const Vec& x, std::int64_t b, std::int64_t h) {
  const auto at = x.begin() + static_cast<std::ptrdiff_t>((b * NH + h) * T * T);
  return Vec(at, at + T * T);
}
Vec head_cols(const Vec& x, std::int64_t b, std::int64_t h) {
  Vec out(sz(T * hs));
  for (std::int64_t t = 0; t < T; ++t) {
    for (std::int64_t i = 0; i < hs; ++i) out[sz(t * hs + i)] = x[sz((b * T + t) * C + h * hs + i)];
  }
  return out;
}

void check_attention(const QkvLayout& L, const std::string& what) {
  SCOPED_TRACE(what);
  std::mt19937_64 gen(44);
  const std::int64_t nP = B * NH * T * T, nqkv = B * T * L.row;
  const Vec qkv = random_bf16_vec(gen, sz(nqkv), -2, 2);
  const VecB qkvb = to_bf16(qkv);
  const Vec dout = random_bf16_vec(gen, sz(N * C)), dPin = random_bf16_vec(gen, sz(nP));

  VecB Pb = nan_bf16(sz(nP)), outb = nan_bf16(sz(N * C)), dPb = nan_bf16(sz(nP));
  VecB dSb = nan_bf16(sz(nP));
  VecB dqkvb = nan_bf16(sz(nqkv));
  cpu::bf16::attention_probs_forward(Pb.data(), qkvb.data(), L, B, T, C, NH);
  const Vec P = bf16_to_double(Pb);  // the kernels downstream read the stored P
  cpu::bf16::attention_av_forward(outb.data(), Pb.data(), qkvb.data(), L, B, T, C, NH);
  cpu::bf16::attention_av_backward(dPb.data(), dqkvb.data(), to_bf16(dout).data(), Pb.data(),
                                   qkvb.data(), L, B, T, C, NH);
  VecB dPinb = to_bf16(dPin);
  for (std::int64_t r = 0; r < B * NH * T; ++r) {  // 0 above the diagonal, as dropout leaves it
    for (std::int64_t t2 = r % T + 1; t2 < T; ++t2) dPinb[sz(r * T + t2)] = Bf16{0};
  }
  cpu::bf16::attention_softmax_backward(dSb.data(), dPinb.data(), Pb.data(), B, NH, T);
  const Vec dS = bf16_to_double(dSb);
  cpu::bf16::attention_scores_backward(dqkvb.data(), dSb.data(), qkvb.data(), L, B, T, C, NH);

  Vec Pw(sz(nP)), outw(sz(N * C)), dPw(sz(nP)), dSw(sz(nP)), dqkvw(sz(nqkv), 0.0);
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t h = 0; h < NH; ++h) {
      const HeadView hv{L, b, h};
      const Vec one = gather_head(qkv, hv);
      Vec S(sz(T * T)), Ph(sz(T * T)), o(sz(T * hs)), dP1(sz(T * T)), dS1(sz(T * T));
      Vec d1(sz(T * 3 * hs), 0.0);
      ref::attention_scores_forward(S.data(), one.data(), 1, T, hs, 1);
      ref::attention_softmax_forward(Ph.data(), S.data(), 1, 1, T);
      const Vec Pk = tt_block(P, b, h);
      ref::attention_av_forward(o.data(), Pk.data(), one.data(), 1, T, hs, 1);
      ref::attention_av_backward(dP1.data(), d1.data(), head_cols(dout, b, h).data(), Pk.data(),
                                 one.data(), 1, T, hs, 1);
      ref::attention_softmax_backward(dS1.data(), tt_block(bf16_to_double(dPinb), b, h).data(),
                                      Pk.data(), 1, 1, T);
      ref::attention_scores_backward(d1.data(), tt_block(dS, b, h).data(), one.data(), 1, T, hs, 1);
      std::copy(Ph.begin(), Ph.end(), Pw.begin() + static_cast<std::ptrdiff_t>((b * NH + h) * T * T));
      std::copy(dP1.begin(), dP1.end(), dPw.begin() + static_cast<std::ptrdiff_t>((b * NH + h) * T * T));
      std::copy(dS1.begin(), dS1.end(), dSw.begin() + static_cast<std::ptrdiff_t>((b * NH + h) * T * T));
      for (std::int64_t t = 0; t < T; ++t) {
        for (std::int64_t i = 0; i < hs; ++i) outw[sz((b * T + t) * C + h * hs + i)] = o[sz(t * hs + i)];
      }
      scatter_head(dqkvw, d1, hv, 0, 2);
    }
  }
  // P: the scores (length hs) feed a softmax (length T); the bf16 rounding of P dominates.
  expect_bf16_close("P", Pb, Pw, reduction_tol(hs + T));
  expect_bf16_close("out", outb, outw, reduction_tol(T));
  expect_bf16_close("dPd", dPb, dPw, reduction_tol(hs));
  expect_bf16_close("dscores", dSb, dSw, reduction_tol(T));
  // Compare only the q, k, v columns of dqkv (padding columns of a padded layout are never
  // written by either side).
  VecB got;
  Vec want;
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t h = 0; h < NH; ++h) {
      const HeadView hv{L, b, h};
      for (std::int64_t t = 0; t < T; ++t) {
        for (int part = 0; part < 3; ++part) {
          for (std::int64_t i = 0; i < hs; ++i) {
            got.push_back(dqkvb[sz(hv.col(t, part) + i)]);
            want.push_back(dqkvw[sz(hv.col(t, part) + i)]);
          }
        }
      }
    }
  }
  expect_bf16_close("dqkv", got, want, reduction_tol(T));
}

TEST_P(Bf16Gemm, AttentionBlockedLayout) { check_attention(QkvLayout::blocked(C, NH), "blocked"); }

TEST_P(Bf16Gemm, AttentionHeadInterleavedLayout) {
  check_attention(QkvLayout::head_interleaved(C, NH), "head-interleaved");
}

TEST_P(Bf16Gemm, AttentionPaddedRows) {
  // A row longer than 3C (as when qkv is a column range of a wider buffer): strides are honoured.
  QkvLayout L = QkvLayout::head_interleaved(C, NH);
  L.row = 3 * C + 5;
  check_attention(L, "head-interleaved, padded rows");
}

TEST(Bf16VsReference, LayoutsPlaceHeadsAsDocumented) {
  const QkvLayout b = QkvLayout::blocked(C, NH), i = QkvLayout::head_interleaved(C, NH);
  EXPECT_EQ(b.row, 3 * C);
  EXPECT_EQ(i.row, 3 * C);
  // Head 2's q, k, v columns: 2*hs + {0, C, 2C} blocked; 2*3hs + {0, hs, 2hs} interleaved.
  EXPECT_EQ(2 * b.head, 2 * hs);
  EXPECT_EQ(2 * b.head + b.k, 2 * hs + C);
  EXPECT_EQ(2 * b.head + b.v, 2 * hs + 2 * C);
  EXPECT_EQ(2 * i.head, 6 * hs);
  EXPECT_EQ(2 * i.head + i.k, 7 * hs);
  EXPECT_EQ(2 * i.head + i.v, 8 * hs);
  QkvLayout bad = i;
  bad.row = 3 * C - 1;  // the last head's v would run past the row
  VecB qkv(sz(3 * C * T * B)), P(sz(B * NH * T * T));
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // OpenMP threads may be running
  EXPECT_DEATH(cpu::bf16::attention_probs_forward(P.data(), qkv.data(), bad, B, T, C, NH),
               "does not fit its row");
}

// The bf16 kernel set must read qkv as the fp32 kernels write and read it (one model, one
// checkpoint, either precision): its attention on bf16-representable inputs agrees with the fp32
// set's to bf16 rounding. Fails when one side's layout changes without the other.
TEST(Bf16KernelSet, AttentionUsesTheFp32Layout) {
  std::mt19937_64 gen(50);
  const std::int64_t nP = B * NH * T * T;
  const Vec qkv = random_bf16_vec(gen, sz(N * 3 * C), -2, 2);
  VecF P32 = nan_vec(sz(nP)), out32 = nan_vec(sz(N * C));
  CpuKernels::attention_probs_forward(P32.data(), to_float(qkv).data(), B, T, C, NH, NH);
  CpuKernels::attention_av_forward(out32.data(), P32.data(), to_float(qkv).data(), B, T, C, NH,
                                   NH);
  VecB P16 = nan_bf16(sz(nP)), out16 = nan_bf16(sz(N * C));
  CpuBf16Kernels::attention_probs_forward(P16.data(), to_bf16(qkv).data(), B, T, C, NH, NH);
  CpuBf16Kernels::attention_av_forward(out16.data(), P16.data(), to_bf16(qkv).data(), B, T, C,
                                       NH, NH);
  // Both sides carry fp32 errors. The bf16 side also stores P rounded, so out = sum P v moves
  // by up to 2^-8 sum P |v| <= 2^-8 max |v| = 2^-7, beside its own rounding of 2^-8 |out|.
  // Another layout would be off by O(1).
  expect_bf16_close("P", P16, to_double(P32), 2 * reduction_tol(hs + T));
  test::expect_close("out", test::bf16_to_float(out16), to_double(out32),
                     2 * test::kBf16Roundoff + 2 * reduction_tol(T) * test::rms(to_double(out32)),
                     test::kBf16Roundoff + 2 * reduction_tol(T));
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

TEST(Bf16VsReference, Encoder) {
  std::mt19937_64 gen(46);
  const Vec wte = random_bf16_vec(gen, sz(V * C)), wpe = random_bf16_vec(gen, sz(T * C));
  const auto tokens = test::random_ids(gen, sz(N), V);
  Vec out(sz(N * C));
  ref::encoder_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C, V);
  VecB outb = nan_bf16(out.size());
  cpu::bf16::encoder_forward(outb.data(), tokens.data(), to_bf16(wte).data(), to_bf16(wpe).data(),
                             B, T, C, V);
  expect_bf16_close("out", outb, out, kFloatEps);

  const Vec dout = random_bf16_vec(gen, sz(N * C));
  VecF dwtef = to_float(random_vec(gen, wte.size())), dwpef = to_float(random_vec(gen, wpe.size()));
  Vec dwte = to_double(dwtef), dwpe = to_double(dwpef);
  ref::encoder_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), B, T, C, V);
  cpu::bf16::encoder_backward(dwtef.data(), dwpef.data(), to_bf16(dout).data(), tokens.data(), B,
                              T, C, V);
  expect_fp32_close("dwte", dwtef, dwte, reduction_tol(N));
  expect_fp32_close("dwpe", dwpef, dwpe, reduction_tol(B));
}

TEST(Bf16VsReference, Pointwise) {
  std::mt19937_64 gen(47);
  const std::int64_t n = 1000;
  const Vec x = random_bf16_vec(gen, sz(n), -6, 6), y = random_bf16_vec(gen, sz(n));
  const Vec dout = random_bf16_vec(gen, sz(n));
  const VecB xb = to_bf16(x), yb = to_bf16(y), doutb = to_bf16(dout);
  // The fp32 kernels' own GELU tolerances (cpu_vs_reference_test.cpp): a few roundings in exp,
  // the sigmoid and the products; the derivative's two terms of opposite sign need more room.
  const double gelu_tol = 4 * kFloatEps, dgelu_tol = 16 * kFloatEps;
  Vec g(sz(n));
  VecB gb = nan_bf16(sz(n));
  ref::gelu_forward(g.data(), x.data(), n);
  cpu::bf16::gelu_forward(gb.data(), xb.data(), n);
  expect_bf16_close("gelu", gb, g, gelu_tol);
  VecB inplace = xb;
  cpu::bf16::gelu_forward(inplace.data(), inplace.data(), n);
  EXPECT_TRUE(inplace == gb) << "gelu in place";
  ref::gelu_backward(g.data(), dout.data(), x.data(), n);
  cpu::bf16::gelu_backward(gb.data(), doutb.data(), xb.data(), n);
  expect_bf16_close("dgelu", gb, g, dgelu_tol);

  Vec r(sz(n));
  VecB rb = nan_bf16(sz(n));
  ref::residual_forward(r.data(), x.data(), y.data(), n);
  cpu::bf16::residual_forward(rb.data(), xb.data(), yb.data(), n);
  expect_bf16_close("residual", rb, r, kFloatEps);
  Vec dres = random_bf16_vec(gen, sz(n)), dbranch(sz(n));
  VecB dresb = to_bf16(dres), dbranchb = nan_bf16(sz(n));
  ref::residual_backward(dres.data(), dbranch.data(), dout.data(), n);
  cpu::bf16::residual_backward(dresb.data(), dbranchb.data(), doutb.data(), n);
  expect_bf16_close("dres", dresb, dres, kFloatEps);
  EXPECT_TRUE(dbranchb == doutb) << "dbranch is a copy of dout";

  const float p = 0.3f;
  std::vector<std::uint8_t> mask(sz(n));
  dropout_mask_fill(mask.data(), RngStream{9, 1, 1, RngOp::AttnResidDropout}, p, 0, 0, 1, n);
  Vec d(sz(n));
  VecB db = nan_bf16(sz(n));
  ref::dropout_forward(d.data(), x.data(), mask.data(), p, n);
  cpu::bf16::dropout_forward(db.data(), xb.data(), mask.data(), p, n);
  expect_bf16_close("dropout", db, d, 2 * kFloatEps);
  ref::dropout_backward(d.data(), dout.data(), mask.data(), p, n);
  cpu::bf16::dropout_backward(db.data(), doutb.data(), mask.data(), p, n);
  expect_bf16_close("ddropout", db, d, 2 * kFloatEps);
}

TEST(Bf16VsReference, CrossEntropy) {
  std::mt19937_64 gen(48);
  const Vec logits = random_bf16_vec(gen, sz(N * V), -4, 4);
  const VecB logitsb = to_bf16(logits);
  const auto targets = test::random_ids(gen, sz(N), V);
  const double scale = 1.0 / static_cast<double>(N * 4);  // e.g. 4 micro-batches of N tokens
  Vec losses(sz(N)), lse(sz(N));
  double loss = 0, lossb = 0;
  ref::crossentropy_forward(&loss, losses.data(), lse.data(), logits.data(), targets.data(), scale,
                            N, V);
  VecF lossesf = nan_vec(sz(N)), lsef = nan_vec(sz(N));
  cpu::bf16::crossentropy_forward(&lossb, lossesf.data(), lsef.data(), logitsb.data(),
                                  targets.data(), scale, N, V);
  // fp32 math on exact inputs: the fp32 tolerance, no bf16 term.
  expect_fp32_close("losses", lossesf, losses, reduction_tol(V));
  expect_fp32_close("lse", lsef, lse, reduction_tol(V));
  EXPECT_NEAR(lossb, loss, reduction_tol(V) * std::abs(loss));

  Vec dlogits(logits.size());
  ref::crossentropy_backward(dlogits.data(), logits.data(), lse.data(), targets.data(), scale, N,
                             V);
  VecB dlogitsb = logitsb;  // in place over the logits
  cpu::bf16::crossentropy_backward(dlogitsb.data(), dlogitsb.data(), lsef.data(), targets.data(),
                                   scale, N, V);
  expect_bf16_close("dlogits", dlogitsb, dlogits, reduction_tol(V));
}

TEST(Bf16VsReference, AdamWMatchesFp32StepAndRoundsTheCopy) {
  // The master update must be cpu::adamw_update's bit for bit (the fp32 optimizer is the tested
  // one); the compute copy is the rounded new master weight. n crosses several OpenMP blocks.
  std::mt19937_64 gen(49);
  const std::int64_t n = 3 * 4096 + 17;
  const VecF p0 = to_float(random_vec(gen, sz(n))), g = to_float(random_vec(gen, sz(n)));
  const VecF m0 = to_float(random_vec(gen, sz(n), -0.1, 0.1));
  const VecF v0 = to_float(random_vec(gen, sz(n), 0.0, 0.01));
  cpu::AdamWScalars s;
  s.lr = 3e-4f, s.beta1 = 0.9f, s.beta2 = 0.95f, s.eps = 1e-8f, s.decay = 3e-5f;
  s.bias_corr1 = 0.1f, s.bias_corr2 = 0.05f, s.grad_scale = 0.7f;
  VecF p = p0, m = m0, v = v0, pw = p0, mw = m0, vw = v0;
  VecB pb = nan_bf16(sz(n));
  cpu::bf16::adamw_update(p.data(), pb.data(), m.data(), v.data(), g.data(), n, s);
  cpu::adamw_update(pw.data(), mw.data(), vw.data(), g.data(), n, s);
  EXPECT_TRUE(p == pw) << "master weights";
  EXPECT_TRUE(m == mw) << "first moment";
  EXPECT_TRUE(v == vw) << "second moment";
  std::size_t bad = 0;
  for (std::size_t i = 0; i < pb.size(); ++i) bad += pb[i] != bf16_from_float(p[i]);
  EXPECT_EQ(bad, 0u) << "bf16 copy is not the rounded master weight";
  EXPECT_TRUE(p != p0) << "the step changed nothing";
}

}  // namespace
}  // namespace eth::bf16_vs_reference_test
