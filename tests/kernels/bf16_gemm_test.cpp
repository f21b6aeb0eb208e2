// The bf16 GEMM (cpu/bf16/gemm.cpp: oneDNN's bf16 matmul where this CPU can, the fp32-compute
// fallback always, in blocks) against the product written out in double: every transpose,
// padded leading dimensions, fp32 C (beta 0 and 1) and bf16 C (with and without bias, its
// padding columns untouched), with bf16_check.h's tolerances; and the GEMM path chosen for each
// CPU kind, and forced.
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>

#include "bf16_check.h"
#include "cpu_kinds.h"
#include "gemm_path_fixture.h"
#include "kernel_check.h"
#include "kernels/cpu/bf16/gemm.h"
#include "kernels/cpu/bf16/gemm_detail.h"
#include "kernels/cpu/cpu_features.h"

namespace eth::test::bf16_gemm_test {
namespace {

// Runs each GEMM-path test on one GEMM path, restoring the process-wide path afterwards.
class Bf16Gemm : public test::GemmPathTest {};

INSTANTIATE_TEST_SUITE_P(Paths, Bf16Gemm, test::all_gemm_paths(), test::gemm_path_test_name);

// The shapes of every kernel-against-reference test (T > 64 exercises the attention row blocks;
// hs = C / NH = 16).
constexpr std::int64_t B = 2, T = 80, C = 48, NH = 3, V = 97, F = 4 * C, N = B * T;
constexpr auto sz = [](std::int64_t n) { return static_cast<std::size_t>(n); };

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
    const Vec prod = naive_gemm(ta, tb, M, Nc, K, alpha, A, lda, Bm, ldb);
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

TEST(Bf16Dispatch, GemmPathByCpuKind) {
  using cpu::bf16::GemmPath;
  EXPECT_EQ(cpu::bf16::gemm_path_for(test::zen3()), GemmPath::Fp32Compute);
  EXPECT_EQ(cpu::bf16::gemm_path_for(test::skylake_x()), GemmPath::Fp32Compute);
  EXPECT_EQ(cpu::bf16::gemm_path_for(test::zen5()), GemmPath::OneDnn);
  EXPECT_EQ(cpu::bf16::gemm_path_for(test::sapphire_rapids()), GemmPath::OneDnn);
  // This CPU: the process-wide GEMM path starts at what it has (when the build can run it).
  const GemmPath mine = cpu::bf16::gemm_path_for(cpu::cpu_features());
  if (cpu::bf16::gemm_path_available(mine)) {
    EXPECT_EQ(cpu::bf16::gemm_path(), mine);
  }
  EXPECT_TRUE(cpu::bf16::gemm_path_available(GemmPath::Fp32Compute));
  // oneDNN 2.6 creates bf16 matmuls only with AVX-512 (native or emulated).
  if (!cpu::cpu_features().avx512f) {
    EXPECT_FALSE(cpu::bf16::gemm_path_available(GemmPath::OneDnn));
  }
}

TEST(Bf16Dispatch, FallbackCanBeForcedAndRestored) {
  using cpu::bf16::GemmPath;
  const GemmPath saved = cpu::bf16::gemm_path();
  cpu::bf16::set_gemm_path(GemmPath::Fp32Compute);
  EXPECT_EQ(cpu::bf16::gemm_path(), GemmPath::Fp32Compute);
  if (!cpu::bf16::gemm_path_available(GemmPath::OneDnn)) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");  // OpenMP threads may be running
    EXPECT_DEATH(cpu::bf16::set_gemm_path(GemmPath::OneDnn), "not available");
  }
  cpu::bf16::set_gemm_path(saved);
  EXPECT_EQ(cpu::bf16::gemm_path(), saved);
}

}  // namespace
}  // namespace eth::test::bf16_gemm_test
