// sgemm through OpenBLAS's cblas_sgemm, the build-time alternative to oneDNN (ETH_GEMM=openblas).
// Under this machine's OPENBLAS_CORETYPE=Haswell it runs at about half of oneDNN's speed
// (shared/notes/machine-figures.md); we never change that variable.
#include <cblas.h>

#include <limits>

#include "core/error.h"
#include "kernels/cpu/gemm.h"

namespace eth::cpu {

void sgemm(Trans trans_a, Trans trans_b, std::int64_t M, std::int64_t N, std::int64_t K,
           float alpha, const float* A, std::int64_t lda, const float* B, std::int64_t ldb,
           float beta, float* C, std::int64_t ldc) {
  if (M == 0 || N == 0) return;
  constexpr std::int64_t kMax = std::numeric_limits<blasint>::max();
  ETH_CHECK(M <= kMax && N <= kMax && K <= kMax && lda <= kMax && ldb <= kMax && ldc <= kMax,
            "sgemm: dimension exceeds the BLAS integer range");
  cblas_sgemm(CblasRowMajor, trans_a == Trans::Yes ? CblasTrans : CblasNoTrans,
              trans_b == Trans::Yes ? CblasTrans : CblasNoTrans, static_cast<blasint>(M),
              static_cast<blasint>(N), static_cast<blasint>(K), alpha, A,
              static_cast<blasint>(lda), B, static_cast<blasint>(ldb), beta, C,
              static_cast<blasint>(ldc));
}

std::string_view gemm_library() { return "openblas"; }

}  // namespace eth::cpu
