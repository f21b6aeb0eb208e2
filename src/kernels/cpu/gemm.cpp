// sgemm through oneDNN's dnnl_sgemm (row-major, OpenMP threads). The OpenBLAS alternative is
// gemm_openblas.cpp; CMake compiles exactly one of the two.
#include "kernels/cpu/gemm.h"

#include <oneapi/dnnl/dnnl.h>

#include <string>

#include "core/error.h"

namespace eth::cpu {

void sgemm(Trans trans_a, Trans trans_b, std::int64_t M, std::int64_t N, std::int64_t K,
           float alpha, const float* A, std::int64_t lda, const float* B, std::int64_t ldb,
           float beta, float* C, std::int64_t ldc) {
  if (M == 0 || N == 0) return;
  const dnnl_status_t st =
      dnnl_sgemm(trans_a == Trans::Yes ? 'T' : 'N', trans_b == Trans::Yes ? 'T' : 'N', M, N, K,
                 alpha, A, lda, B, ldb, beta, C, ldc);
  ETH_CHECK(st == dnnl_success, "dnnl_sgemm failed with status " + std::to_string(st));
}

std::string_view gemm_library() { return "onednn"; }

}  // namespace eth::cpu
