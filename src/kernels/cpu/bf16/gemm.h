// The bf16 GEMM every bf16 kernel calls: bf16 operands, fp32 accumulation, an fp32 or bf16
// result. Two paths, chosen at run time:
//   - OneDnn: oneDNN's matmul primitive on bf16 inputs (VDPBF16PS / AMX), where the CPU has
//     bf16 matrix instructions. Each primitive is created once per (shape, strides, kind) and
//     kept in a process-wide cache of immutable objects (the shapes of a run are few: one per
//     matmul per micro-batch size, one per attention row block), executed with a per-thread
//     scratchpad, so calls from inside an OpenMP parallel region are safe.
//   - Fp32Compute: elsewhere (an AVX2-only Zen 3 has no bf16 instructions, and oneDNN 2.6 has
//     no bf16 matmul there): the operands are converted to fp32 in blocks of at most 1024 rows,
//     columns and depth and multiplied by sgemm (cpu/gemm.h). bf16 then only saves memory; the
//     blocks keep the extra work to about one conversion per 1024 flops.
// The blocks and the oneDNN scratchpads live in per-thread buffers that grow to the largest
// shape seen and are kept (the first step allocates them; no kernel allocates after that).
// Row-major, leading dimensions as in sgemm, so strided sub-matrices (an attention head's
// columns of qkv) need no copies. Same thread behaviour as sgemm: the library's threads, or the
// calling thread alone inside a parallel region.
#pragma once

#include <cstdint>
#include <string_view>

#include "kernels/bf16.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm.h"

namespace eth::cpu::bf16 {

enum class GemmPath { OneDnn, Fp32Compute };

std::string_view gemm_path_name(GemmPath path);  // "onednn-bf16", "fp32-compute"
// OneDnn where `f` has bf16 matrix instructions, Fp32Compute otherwise (oneDNN would emulate
// bf16 on plain AVX-512, slower than its fp32 GEMM, and has no bf16 matmul on AVX2).
GemmPath gemm_path_for(const CpuFeatures& f);
// Whether `path` runs in this process: OneDnn needs a oneDNN build (ETH_GEMM=onednn) that can
// create a bf16 matmul on this CPU (tried once); Fp32Compute always runs.
bool gemm_path_available(GemmPath path);
// The path every bf16 GEMM takes; initially gemm_path_for(cpu_features()).
GemmPath gemm_path();
// Process-wide, like set_max_threads: set it before work, not during. ETH_CHECKs availability.
// Tests use it to run the fallback on a bf16 CPU; the CLI never needs it.
void set_gemm_path(GemmPath path);

// C = alpha op(A) op(B) + beta C in fp32, beta 0 or 1 (with 0, C is not read).
//   op(A) (M,K) bf16, op(B) (K,N) bf16, C (M,N) fp32
void gemm(Trans trans_a, Trans trans_b, std::int64_t M, std::int64_t N, std::int64_t K,
               float alpha, const Bf16* A, std::int64_t lda, const Bf16* B, std::int64_t ldb,
               float beta, float* C, std::int64_t ldc);

// C = round_bf16(alpha op(A) op(B) + bias): accumulated in fp32 (bias added there), rounded once.
// alpha must be 1 when there is a bias.
//   op(A) (M,K) bf16, op(B) (K,N) bf16, bias (N) bf16 or nullptr, C (M,N) bf16
void gemm(Trans trans_a, Trans trans_b, std::int64_t M, std::int64_t N, std::int64_t K,
               float alpha, const Bf16* A, std::int64_t lda, const Bf16* B, std::int64_t ldb,
               const Bf16* bias, Bf16* C, std::int64_t ldc);

}  // namespace eth::cpu::bf16
