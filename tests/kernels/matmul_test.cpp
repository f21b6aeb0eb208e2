// The linear layers (cpu/matmul.cpp: nt and nn weight storage, with and without bias, and the
// backward whose weight gradient is cut into row chunks stored apart) against the double
// reference, fp32 and bf16 storage, the bf16 forms on both GEMM paths (oneDNN's bf16 matmul where
// this CPU can, the fp32-compute fallback always).
// fp32 kernels: |got - want| <= atol + rtol |want| with rtol = 4 sqrt(K) eps_float for a
// reduction of length K and atol = rtol rms(want) (kernel_check.h's expect_reduction).
// bf16 kernels: bf16_check.h's bound, 2^-8 |want| + (1 + 2^-8) tol32 (|want| + rms(want)); their
// fp32 outputs (parameter gradients, statistics, losses) tol32 alone.
// "=" outputs start as NaN (so an unwritten element fails), "+=" outputs from the same random
// values on both sides.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "bf16_check.h"
#include "gemm_path_fixture.h"
#include "kernel_check.h"
#include "kernels/cpu/bf16/matmul.h"
#include "kernels/cpu/matmul.h"
#include "kernels/grad_rows.h"
#include "kernels/reference/matmul.h"

namespace eth::test::matmul_test {
namespace {

// Runs each bf16 test on one GEMM path, restoring the process-wide path afterwards.
class Bf16Matmul : public test::GemmPathTest {};

INSTANTIATE_TEST_SUITE_P(Paths, Bf16Matmul, test::all_gemm_paths(), test::gemm_path_test_name);

// The shapes of every kernel-against-reference test (T > 64 exercises the attention row blocks;
// hs = C / NH = 16).
constexpr std::int64_t B = 2, T = 80, C = 48, NH = 3, V = 97, F = 4 * C, N = B * T;
constexpr auto sz = [](std::int64_t n) { return static_cast<std::size_t>(n); };

// Both matmul variants, with and without bias.
void check_matmul_fp32(bool nn, bool with_bias) {
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
  check_matmul_fp32(false, true);
  check_matmul_fp32(false, false);
}

TEST(CpuVsReference, MatmulNn) {
  check_matmul_fp32(true, true);
  check_matmul_fp32(true, false);
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


// Both matmul storage forms, with and without bias (the LM head is nt without bias).
void check_matmul_bf16(bool nn, bool with_bias) {
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

TEST_P(Bf16Matmul, MatmulNt) {
  check_matmul_bf16(false, true);
  check_matmul_bf16(false, false);
}

TEST_P(Bf16Matmul, MatmulNn) {
  check_matmul_bf16(true, true);
  check_matmul_bf16(true, false);
}

}  // namespace
}  // namespace eth::test::matmul_test
