// (b) Every fast fp32 kernel matches its double reference on the same (float-representable)
// inputs within |got - want| <= atol + rtol |want|, rtol = 4 sqrt(K) eps_float for a reduction
// of length K (kernel_check.h), atol = rtol * rms(want). "=" outputs start as NaN (so an
// unwritten element fails); "+=" outputs start from the same random values on both sides.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <tuple>
#include <type_traits>

#include "kernel_check.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/crossentropy.h"
#include "kernels/cpu/encoder.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/pointwise.h"
#include "kernels/cpu/vec_math.h"
#include "kernels/reference/attention.h"
#include "kernels/reference/crossentropy.h"
#include "kernels/reference/encoder.h"
#include "kernels/reference/layernorm.h"
#include "kernels/reference/matmul.h"
#include "kernels/reference/pointwise.h"
#include "kernels/rng.h"

namespace eth::cpu_vs_reference_test {
namespace {

using test::expect_close;
using test::kFloatEps;
using test::nan_vec;
using test::random_vec;
using test::reduction_tol;
using test::rms;
using test::to_double;
using test::to_float;
using test::Vec;
using test::VecF;

// T > 64 exercises the attention row blocks; hs = C / NH = 16.
constexpr std::int64_t B = 2, T = 80, C = 48, NH = 3, V = 97, F = 4 * C, N = B * T;
constexpr auto sz = [](std::int64_t n) { return static_cast<std::size_t>(n); };

// Compares with the reduction tolerance of length K, atol scaled by the size of want.
void expect_reduction(const std::string& name, const VecF& got, const Vec& want,
                      std::int64_t K) {
  const double tol = reduction_tol(K);
  expect_close(name, got, want, tol * rms(want), tol);
}

TEST(CpuVsReference, SgemmAllTransposes) {
  std::mt19937_64 gen(20);
  const std::int64_t M = 37, Nc = 29, K = 53, pad = 3;  // leading dimensions wider than rows
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      const std::int64_t a_rows = ta ? K : M, a_cols = ta ? M : K;
      const std::int64_t b_rows = tb ? Nc : K, b_cols = tb ? K : Nc;
      const std::int64_t lda = a_cols + pad, ldb = b_cols + pad, ldc = Nc + pad;
      const Vec A = random_vec(gen, sz(a_rows * lda)), Bm = random_vec(gen, sz(b_rows * ldb));
      const Vec C0 = random_vec(gen, sz(M * ldc));
      for (float beta : {0.0f, 0.5f}) {
        VecF Cf = beta == 0.0f ? nan_vec(C0.size()) : to_float(C0);
        const VecF Af = to_float(A), Bf = to_float(Bm);
        cpu::sgemm(ta ? cpu::Trans::Yes : cpu::Trans::No, tb ? cpu::Trans::Yes : cpu::Trans::No,
                   M, Nc, K, 1.5f, Af.data(), lda, Bf.data(), ldb, beta, Cf.data(), ldc);
        VecF got;
        Vec want;
        for (std::int64_t i = 0; i < M; ++i) {
          for (std::int64_t j = 0; j < Nc; ++j) {
            double acc = 0;
            for (std::int64_t k = 0; k < K; ++k) {
              const double a = ta ? A[sz(k * lda + i)] : A[sz(i * lda + k)];
              const double b = tb ? Bm[sz(j * ldb + k)] : Bm[sz(k * ldb + j)];
              acc += a * b;
            }
            want.push_back(1.5 * acc + beta * C0[sz(i * ldc + j)]);
            got.push_back(Cf[sz(i * ldc + j)]);
          }
        }
        expect_reduction("sgemm ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) +
                             " beta=" + std::to_string(beta),
                         got, want, K);
      }
    }
  }
  EXPECT_FALSE(cpu::gemm_library().empty());
}

TEST(CpuVsReference, ExpApprox) {
  // Relative error against exp in double over the whole range the kernels use.
  double worst = 0;
  for (double x = -87.0; x <= 88.0; x += 0.0137) {
    const auto xf = static_cast<float>(x);
    const double want = std::exp(static_cast<double>(xf));
    worst = std::max(worst, std::abs(cpu::exp_approx(xf) - want) / want);
  }
  EXPECT_LE(worst, 2 * kFloatEps);  // measured: 0.84 eps
  EXPECT_EQ(cpu::exp_approx(-100.0f), 0.0f);
  EXPECT_EQ(cpu::exp_approx(0.0f), 1.0f);
}

TEST(CpuVsReference, LogAndSinCosApprox) {
  // Over the Box-Muller inputs of normal_fill: u = k / 2^24. Absolute error of ln u (|ln u| up
  // to 16.6, so a relative bound would be meaningless near u = 1) and of cos, sin of 2 pi u.
  double worst_log = 0, worst_trig = 0;
  for (std::uint32_t k = 1; k <= (1u << 24); k += 997) {
    const float u = static_cast<float>(k) / 16777216.0f;
    const double want = std::log(static_cast<double>(u));
    worst_log = std::max(worst_log, std::abs(cpu::log_approx(u) - want) /
                                        std::max(1.0, std::abs(want)));
    const float v = static_cast<float>(k - 1) / 16777216.0f;
    float c = 0, s = 0;
    cpu::sincos_2pi_approx(v, &c, &s);
    const double th = 6.283185307179586 * static_cast<double>(v);
    worst_trig = std::max({worst_trig, std::abs(c - std::cos(th)), std::abs(s - std::sin(th))});
  }
  EXPECT_LE(worst_log, 2 * kFloatEps);
  EXPECT_LE(worst_trig, 2 * kFloatEps);
  EXPECT_EQ(cpu::log_approx(1.0f), 0.0f);
  float c = 0, s = 0;
  cpu::sincos_2pi_approx(0.25f, &c, &s);  // quarter turn: exactly (0, 1)
  EXPECT_EQ(c, 0.0f);
  EXPECT_EQ(s, 1.0f);
}

TEST(CpuVsReference, Encoder) {
  std::mt19937_64 gen(21);
  const Vec wte = random_vec(gen, sz(V * C)), wpe = random_vec(gen, sz(T * C));
  const auto tokens = test::random_ids(gen, sz(N), V);
  Vec out(sz(N * C));
  ref::encoder_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C, V);
  VecF outf = nan_vec(out.size());
  cpu::encoder_forward(outf.data(), tokens.data(), to_float(wte).data(), to_float(wpe).data(), B,
                       T, C, V);
  expect_close("out", outf, out, 0.0, kFloatEps);

  const Vec dout = random_vec(gen, sz(N * C));
  Vec dwte = random_vec(gen, wte.size()), dwpe = random_vec(gen, wpe.size());
  VecF dwtef = to_float(dwte), dwpef = to_float(dwpe);
  ref::encoder_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), B, T, C, V);
  cpu::encoder_backward(dwtef.data(), dwpef.data(), to_float(dout).data(), tokens.data(), B, T, C,
                        V);
  expect_reduction("dwte", dwtef, dwte, N);
  expect_reduction("dwpe", dwpef, dwpe, B);
}

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

// Both matmul variants, with and without bias.
void check_matmul(bool nn, bool with_bias) {
  SCOPED_TRACE(std::string(nn ? "nn" : "nt") + (with_bias ? " with bias" : " without bias"));
  std::mt19937_64 gen(23);
  const std::int64_t IC = C, OC = F;
  const Vec x = random_vec(gen, sz(N * IC)), w = random_vec(gen, sz(IC * OC));
  const Vec b = random_vec(gen, sz(OC));
  const VecF xf = to_float(x), wf = to_float(w), bf = to_float(b);
  const auto fwd_ref = nn ? ref::matmul_nn_forward<double> : ref::matmul_nt_forward<double>;
  const auto fwd_cpu = nn ? cpu::matmul_nn_forward : cpu::matmul_nt_forward;
  const auto bwd_ref = nn ? ref::matmul_nn_backward<double> : ref::matmul_nt_backward<double>;
  const auto bwd_cpu = nn ? cpu::matmul_nn_backward : cpu::matmul_nt_backward;
  Vec out(sz(N * OC));
  VecF outf = nan_vec(out.size());
  fwd_ref(out.data(), x.data(), w.data(), with_bias ? b.data() : nullptr, N, IC, OC);
  fwd_cpu(outf.data(), xf.data(), wf.data(), with_bias ? bf.data() : nullptr, N, IC, OC);
  expect_reduction("out", outf, out, IC);

  const Vec dout = random_vec(gen, sz(N * OC));
  Vec dx(x.size()), dw = random_vec(gen, w.size()), db = random_vec(gen, b.size());
  VecF dxf = nan_vec(dx.size()), dwf = to_float(dw), dbf = to_float(db);
  bwd_ref(dx.data(), dw.data(), with_bias ? db.data() : nullptr, dout.data(), x.data(), w.data(),
          N, IC, OC);
  bwd_cpu(dxf.data(), dwf.data(), with_bias ? dbf.data() : nullptr, to_float(dout).data(),
          xf.data(), wf.data(), N, IC, OC);
  expect_reduction("dinp", dxf, dx, OC);
  expect_reduction("dweight", dwf, dw, N);
  expect_reduction("dbias", dbf, db, N);  // unchanged on both sides without bias
}

TEST(CpuVsReference, MatmulNt) {
  check_matmul(false, true);
  check_matmul(false, false);
}

TEST(CpuVsReference, MatmulNn) {
  check_matmul(true, true);
  check_matmul(true, false);
}

// The row-chunk variants (weight gradients cut into lcm(tp) chunks stored apart): each chunk
// equals the same rows of the whole reference gradient, dinp the whole reference's.
void check_matmul_rows(bool nn) {
  SCOPED_TRACE(nn ? "nn rows" : "nt rows");
  std::mt19937_64 gen(25);
  const std::int64_t IC = C, OC = F;
  const std::int64_t R = nn ? IC : OC;  // rows of the weight as stored
  const std::int64_t row = nn ? OC : IC;
  const Vec x = random_vec(gen, sz(N * IC)), w = random_vec(gen, sz(IC * OC));
  const Vec dout = random_vec(gen, sz(N * OC));
  Vec dx(x.size()), dw = random_vec(gen, w.size()), db = random_vec(gen, sz(OC));
  const VecF dw0 = to_float(dw), db0 = to_float(db);
  (nn ? ref::matmul_nn_backward<double> : ref::matmul_nt_backward<double>)(
      dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), N, IC, OC);
  // Three uneven chunks, each in its own buffer starting from the same values as the whole.
  const std::int64_t cuts[] = {0, 5, R / 2 + 1, R};
  std::vector<VecF> dws, dbs;
  std::vector<GradRows<float>> rows;
  for (int i = 0; i < 3; ++i) {
    const std::int64_t b = cuts[i], e = cuts[i + 1];
    dws.emplace_back(dw0.begin() + b * row, dw0.begin() + e * row);
    dbs.emplace_back(nn ? VecF{} : VecF(db0.begin() + b, db0.begin() + e));
  }
  for (int i = 0; i < 3; ++i) {
    rows.push_back({cuts[i], cuts[i + 1], dws[static_cast<std::size_t>(i)].data(),
                    nn ? nullptr : dbs[static_cast<std::size_t>(i)].data()});
  }
  VecF dxf = nan_vec(dx.size()), dbf = db0;
  if (nn) {
    cpu::matmul_nn_backward_rows(dxf.data(), rows.data(), 3, dbf.data(), to_float(dout).data(),
                                 to_float(x).data(), to_float(w).data(), N, IC, OC);
    expect_reduction("dbias", dbf, db, N);
  } else {
    cpu::matmul_nt_backward_rows(dxf.data(), rows.data(), 3, to_float(dout).data(),
                                 to_float(x).data(), to_float(w).data(), N, IC, OC);
  }
  expect_reduction("dinp", dxf, dx, OC);
  // The reference's row variant sums the same terms in the same order as its whole one.
  std::vector<Vec> rdw, rdb;
  std::vector<GradRows<double>> rrows;
  const Vec dw_start = to_double(dw0), db_start = to_double(db0);
  for (int i = 0; i < 3; ++i) {
    rdw.emplace_back(dw_start.begin() + cuts[i] * row, dw_start.begin() + cuts[i + 1] * row);
    rdb.emplace_back(db_start.begin() + cuts[i], db_start.begin() + cuts[i + 1]);
  }
  for (std::size_t i = 0; i < 3; ++i) {
    rrows.push_back({cuts[i], cuts[i + 1], rdw[i].data(), nn ? nullptr : rdb[i].data()});
  }
  Vec rdx(dx.size()), rdb_whole = db_start;
  if (nn) {
    ref::matmul_nn_backward_rows(rdx.data(), rrows.data(), 3, rdb_whole.data(), dout.data(),
                                 x.data(), w.data(), N, IC, OC);
    EXPECT_EQ(rdb_whole, db);
  } else {
    ref::matmul_nt_backward_rows(rdx.data(), rrows.data(), 3, dout.data(), x.data(), w.data(), N,
                                 IC, OC);
  }
  EXPECT_EQ(rdx, dx);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(rdw[i], Vec(dw.begin() + cuts[i] * row, dw.begin() + cuts[i + 1] * row));
    if (!nn) {
      EXPECT_EQ(rdb[i], Vec(db.begin() + cuts[i], db.begin() + cuts[i + 1]));
    }
  }
  for (int i = 0; i < 3; ++i) {
    const std::int64_t b = cuts[i], e = cuts[i + 1];
    expect_reduction("dweight chunk " + std::to_string(i), dws[static_cast<std::size_t>(i)],
                     Vec(dw.begin() + b * row, dw.begin() + e * row), N);
    if (!nn) {
      expect_reduction("dbias chunk " + std::to_string(i), dbs[static_cast<std::size_t>(i)],
                       Vec(db.begin() + b, db.begin() + e), N);
    }
  }
}

TEST(CpuVsReference, MatmulBackwardInRowChunks) {
  check_matmul_rows(false);
  check_matmul_rows(true);
}

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

TEST(CpuVsReference, Pointwise) {
  std::mt19937_64 gen(26);
  const std::int64_t n = 1000;
  const Vec x = random_vec(gen, sz(n), -6, 6), y = random_vec(gen, sz(n));
  const Vec dout = random_vec(gen, sz(n));
  const VecF xf = to_float(x), yf = to_float(y), doutf = to_float(dout);
  // GELU: a handful of roundings in exp, the sigmoid and the products; the derivative adds
  // two terms of opposite sign for x < 0, so it gets more room.
  const double gelu_tol = 4 * kFloatEps, dgelu_tol = 16 * kFloatEps;
  Vec g(sz(n));
  VecF gf = nan_vec(sz(n));
  ref::gelu_forward(g.data(), x.data(), n);
  cpu::gelu_forward(gf.data(), xf.data(), n);
  expect_close("gelu", gf, g, gelu_tol * rms(g), gelu_tol);
  ref::gelu_backward(g.data(), dout.data(), x.data(), n);
  cpu::gelu_backward(gf.data(), doutf.data(), xf.data(), n);
  expect_close("dgelu", gf, g, dgelu_tol * rms(g), dgelu_tol);

  Vec r(sz(n));
  VecF rf = nan_vec(sz(n));
  ref::residual_forward(r.data(), x.data(), y.data(), n);
  cpu::residual_forward(rf.data(), xf.data(), yf.data(), n);
  expect_close("residual", rf, r, 0.0, kFloatEps);
  Vec dres = random_vec(gen, sz(n)), dbranch(sz(n));
  VecF dresf = to_float(dres), dbranchf = nan_vec(sz(n));
  ref::residual_backward(dres.data(), dbranch.data(), dout.data(), n);
  cpu::residual_backward(dresf.data(), dbranchf.data(), doutf.data(), n);
  expect_close("dres", dresf, dres, 0.0, kFloatEps);
  expect_close("dbranch", dbranchf, dbranch, 0.0, 0.0);

  const float p = 0.3f;
  std::vector<std::uint8_t> mask(sz(n));
  dropout_mask_fill(mask.data(), RngStream{9, 1, 1, RngOp::AttnResidDropout}, p, 0, 0, 1, n);
  Vec d(sz(n));
  VecF df = nan_vec(sz(n));
  ref::dropout_forward(d.data(), x.data(), mask.data(), p, n);
  cpu::dropout_forward(df.data(), xf.data(), mask.data(), p, n);
  expect_close("dropout", df, d, 0.0, 2 * kFloatEps);
  ref::dropout_backward(d.data(), dout.data(), mask.data(), p, n);
  cpu::dropout_backward(df.data(), doutf.data(), mask.data(), p, n);
  expect_close("ddropout", df, d, 0.0, 2 * kFloatEps);
}

TEST(CpuVsReference, CrossEntropy) {
  std::mt19937_64 gen(27);
  const Vec logits = random_vec(gen, sz(N * V), -4, 4);
  const VecF logitsf = to_float(logits);
  const auto targets = test::random_ids(gen, sz(N), V);
  const double scale = 1.0 / static_cast<double>(N * 4);  // e.g. 4 micro-batches of N tokens
  Vec losses(sz(N)), lse(sz(N));
  double loss = 0, lossf = 0;
  ref::crossentropy_forward(&loss, losses.data(), lse.data(), logits.data(), targets.data(), scale,
                            N, V);
  VecF lossesf = nan_vec(sz(N)), lsef = nan_vec(sz(N));
  cpu::crossentropy_forward(&lossf, lossesf.data(), lsef.data(), logitsf.data(), targets.data(),
                            scale, N, V);
  expect_reduction("losses", lossesf, losses, V);
  expect_reduction("lse", lsef, lse, V);
  EXPECT_NEAR(lossf, loss, reduction_tol(V) * std::abs(loss));

  Vec dlogits(logits.size());
  ref::crossentropy_backward(dlogits.data(), logits.data(), lse.data(), targets.data(), scale, N,
                             V);
  VecF dlogitsf = logitsf;  // in place over the logits
  cpu::crossentropy_backward(dlogitsf.data(), dlogitsf.data(), lsef.data(), targets.data(), scale,
                             N, V);
  expect_reduction("dlogits", dlogitsf, dlogits, V);
}

}  // namespace
}  // namespace eth::cpu_vs_reference_test
