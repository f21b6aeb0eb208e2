// The one fp32 GEMM every CPU kernel calls: oneDNN's dnnl_sgemm by default, OpenBLAS's
// cblas_sgemm when built with ETH_GEMM=openblas (gemm.cpp or gemm_openblas.cpp, chosen by CMake).
// Row-major only. Threads: the library's own (OpenMP for oneDNN); called inside an OpenMP
// parallel region it runs on the calling thread alone.
#pragma once

#include <cstdint>
#include <string_view>

namespace eth::cpu {

enum class Trans : bool { No = false, Yes = true };

// C = alpha * op(A) op(B) + beta * C, op(X) = X or X^T; row-major with leading dimensions.
// With beta = 0, C is not read (it may hold NaN).
//   op(A) (M,K), op(B) (K,N), C (M,N)
void sgemm(Trans trans_a, Trans trans_b, std::int64_t M, std::int64_t N, std::int64_t K,
           float alpha, const float* A, std::int64_t lda, const float* B, std::int64_t ldb,
           float beta, float* C, std::int64_t ldc);

// "onednn" or "openblas": which library sgemm calls.
std::string_view gemm_library();

}  // namespace eth::cpu
