// The bf16 attention operators (cpu/bf16/attention.cpp) against the double reference head by
// head, on the blocked, head-interleaved and padded qkv layouts and both GEMM paths, with
// bf16_check.h's tolerances; the layouts' documented head columns; and the bf16 kernel set
// reading qkv as the fp32 set writes it.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "bf16_check.h"
#include "gemm_path_fixture.h"
#include "kernel_check.h"
#include "kernels/cpu/bf16/attention.h"
#include "kernels/reference/attention.h"
#include "train/kernel_set.h"
#include "train/kernel_set_bf16.h"

namespace eth::test::bf16_attention_test {
namespace {

using cpu::bf16::QkvLayout;

// Runs each test on one GEMM path, restoring the process-wide path afterwards.
class Bf16Attention : public test::GemmPathTest {};

INSTANTIATE_TEST_SUITE_P(Paths, Bf16Attention, test::all_gemm_paths(),
                         test::gemm_path_test_name);

// The shapes of every kernel-against-reference test (T > 64 exercises the attention row blocks;
// hs = C / NH = 16).
constexpr std::int64_t B = 2, T = 80, C = 48, NH = 3, V = 97, F = 4 * C, N = B * T;
constexpr auto sz = [](std::int64_t n) { return static_cast<std::size_t>(n); };
constexpr std::int64_t hs = C / NH;

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

TEST_P(Bf16Attention, AttentionBlockedLayout) { check_attention(QkvLayout::blocked(C, NH), "blocked"); }

TEST_P(Bf16Attention, AttentionHeadInterleavedLayout) {
  check_attention(QkvLayout::head_interleaved(C, NH), "head-interleaved");
}

TEST_P(Bf16Attention, AttentionPaddedRows) {
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

}  // namespace
}  // namespace eth::test::bf16_attention_test
