// Internal to gemm.cpp: the oneDNN half of the bf16 GEMM. gemm_onednn.cpp implements
// it with oneDNN's matmul primitive; gemm_no_onednn.cpp is the stub CMake compiles instead
// in an ETH_GEMM=openblas build (then only the fp32-compute path exists).
#pragma once

#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/cpu/gemm.h"

namespace eth::cpu::bf16::detail {

struct GemmCall {
  Trans trans_a = Trans::No, trans_b = Trans::No;
  std::int64_t M = 0, N = 0, K = 0;
  float alpha = 1;
  const Bf16* A = nullptr;
  std::int64_t lda = 0;
  const Bf16* B = nullptr;
  std::int64_t ldb = 0;
  float beta = 0;             // fp32 C only: 0 or 1
  const Bf16* bias = nullptr;  // bf16 C only
  float* C32 = nullptr;        // exactly one of C32 and C16 is set
  Bf16* C16 = nullptr;
  std::int64_t ldc = 0;
};

// Whether oneDNN creates a bf16 matmul on this CPU (tried once per process).
bool onednn_bf16_available();
void onednn_bf16_gemm(const GemmCall& call);

// The fp32-compute path, in blocks of at most `block` rows, columns and depth.
void fp32_compute_gemm(const GemmCall& call, std::int64_t block);

}  // namespace eth::cpu::bf16::detail
