// The fp32 GEMM (cpu/gemm.cpp, or cpu/gemm_openblas.cpp with ETH_GEMM=openblas) against the
// product written out in double: every transpose, padded leading dimensions, beta 0 (C not read)
// and beta 0.5.
// fp32 kernels: |got - want| <= atol + rtol |want| with rtol = 4 sqrt(K) eps_float for a
// reduction of length K and atol = rtol rms(want) (kernel_check.h's expect_reduction).
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "kernel_check.h"
#include "kernels/cpu/gemm.h"

namespace eth::test::gemm_test {
namespace {

constexpr auto sz = [](std::int64_t n) { return static_cast<std::size_t>(n); };

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
        const Vec prod = naive_gemm(ta != 0, tb != 0, M, Nc, K, 1.5, A, lda, Bm, ldb);
        VecF got;
        Vec want;
        for (std::int64_t i = 0; i < M; ++i) {
          for (std::int64_t j = 0; j < Nc; ++j) {
            want.push_back(prod[sz(i * Nc + j)] + beta * C0[sz(i * ldc + j)]);
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

}  // namespace
}  // namespace eth::test::gemm_test
