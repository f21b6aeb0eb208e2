// The bf16 matrix products through cuBLASLt: bf16 operands, fp32 accumulation
// (CUBLAS_COMPUTE_32F), a bf16 output rounded once after the bias (the BIAS epilogue) or an fp32
// output (weight gradients with beta = 1, the tensor-parallel partial sums). Row-major products
// are issued as their column-major transposes: C = op(A) op(B) is C^T = op(B)^T op(A)^T, so
// cuBLASLt's A is our B. One cuBLASLt handle and workspace per host thread (the threads
// backend's ranks), on that thread's stream.
#include <cublasLt.h>

#include <cstdint>
#include <string>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kernels.h"

namespace eth::cuda {
namespace {

void check_lt(cublasStatus_t st, const char* call, int line) {
  if (st == CUBLAS_STATUS_SUCCESS) return;
  throw CudaError(std::string("[cuda] ") + call + " at matmul.cu:" + std::to_string(line) +
                  ": cuBLAS status " + std::to_string(static_cast<int>(st)));
}
#define ETH_LT_CHECK(call) check_lt((call), #call, __LINE__)

constexpr std::size_t kWorkspaceBytes = 32u << 20;  // cuBLASLt's advice for Hopper

struct LtThread {
  cublasLtHandle_t handle = nullptr;
  DeviceBuffer<unsigned char> workspace;
  LtThread() {
    ETH_LT_CHECK(cublasLtCreate(&handle));
    workspace = DeviceBuffer<unsigned char>(kWorkspaceBytes);
  }
  ~LtThread() { (void)cublasLtDestroy(handle); }
  LtThread(const LtThread&) = delete;
  LtThread& operator=(const LtThread&) = delete;
};

LtThread& lt() {
  thread_local LtThread t;
  return t;
}

// Destroys the cuBLASLt descriptors of one call on every path out.
struct Descs {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  Descs() = default;
  Descs(const Descs&) = delete;
  Descs& operator=(const Descs&) = delete;
  ~Descs() {
    if (pref) (void)cublasLtMatmulPreferenceDestroy(pref);
    if (c) (void)cublasLtMatrixLayoutDestroy(c);
    if (b) (void)cublasLtMatrixLayoutDestroy(b);
    if (a) (void)cublasLtMatrixLayoutDestroy(a);
    if (op) (void)cublasLtMatmulDescDestroy(op);
  }
};

// The largest power of two (at most 256) dividing the address: cuBLASLt assumes 256-byte
// aligned operands unless told otherwise, and an arena's tensors need not be.
std::uint32_t alignment(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t al = 256;
  while (al > 1 && a % al != 0) al >>= 1;
  return al;
}

// Row-major C (M,N) = op(A) (M,K) op(B) (K,N) [+ bias (N), bf16 C only] [+ C if beta = 1].
// Exactly one of c16 and c32 is set.
void gemm(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K,
          const Bf16* A, std::int64_t lda, const Bf16* B, std::int64_t ldb, const Bf16* bias,
          float beta, Bf16* c16, float* c32, std::int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) {  // an empty sum: C stays (beta = 1) or is 0 (no bias: our K = 0 calls have none)
    if (beta == 0.0f) memset_zero(c16 != nullptr ? static_cast<void*>(c16) : c32,
                                  static_cast<std::size_t>(M * ldc) *
                                      (c16 != nullptr ? sizeof(Bf16) : sizeof(float)));
    return;
  }
  Descs d;
  ETH_LT_CHECK(cublasLtMatmulDescCreate(&d.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  // Column-major view: D (N,M) = op(B') (N,K) op(A') (K,M), B' = our B, A' = our A.
  const cublasOperation_t ta = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  ETH_LT_CHECK(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  ETH_LT_CHECK(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  if (bias != nullptr) {
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    ETH_LT_CHECK(
        cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    ETH_LT_CHECK(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                sizeof(bias)));
  }
  // Stored shapes (column-major rows x cols) of B' and A' before their op.
  const auto rows_b = static_cast<std::uint64_t>(trans_b ? K : N);
  const auto cols_b = static_cast<std::uint64_t>(trans_b ? N : K);
  const auto rows_a = static_cast<std::uint64_t>(trans_a ? M : K);
  const auto cols_a = static_cast<std::uint64_t>(trans_a ? K : M);
  ETH_LT_CHECK(cublasLtMatrixLayoutCreate(&d.a, CUDA_R_16BF, rows_b, cols_b, ldb));
  ETH_LT_CHECK(cublasLtMatrixLayoutCreate(&d.b, CUDA_R_16BF, rows_a, cols_a, lda));
  ETH_LT_CHECK(cublasLtMatrixLayoutCreate(&d.c, c16 != nullptr ? CUDA_R_16BF : CUDA_R_32F,
                                          static_cast<std::uint64_t>(N),
                                          static_cast<std::uint64_t>(M), ldc));
  LtThread& t = lt();
  ETH_LT_CHECK(cublasLtMatmulPreferenceCreate(&d.pref));
  const std::size_t ws = t.workspace.bytes();
  ETH_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(
      d.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  void* c = c16 != nullptr ? static_cast<void*>(c16) : static_cast<void*>(c32);
  // cuBLASLt's A is our B (above).
  const std::uint32_t align[4] = {alignment(B), alignment(A), alignment(c), alignment(c)};
  const cublasLtMatmulPreferenceAttributes_t which[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i) {
    ETH_LT_CHECK(
        cublasLtMatmulPreferenceSetAttribute(d.pref, which[i], &align[i], sizeof(align[i])));
  }
  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  ETH_LT_CHECK(cublasLtMatmulAlgoGetHeuristic(t.handle, d.op, d.a, d.b, d.c, d.c, d.pref, 1,
                                              &heur, &found));
  if (found == 0) throw CudaError("[cuda] cuBLASLt has no algorithm for this bf16 matmul");
  const float alpha = 1.0f;
  ETH_LT_CHECK(cublasLtMatmul(t.handle, d.op, &alpha, B, d.a, A, d.b, &beta, c, d.c, c, d.c,
                              &heur.algo, t.workspace.data(), ws, stream()));
}

// dbias[o] += sum_n dout[n,o] for o < cols, rows `ld` apart, in order (one thread per column,
// as the CPU's order).
__global__ void bias_grad(float* dbias, const Bf16* dout, std::int64_t N, std::int64_t cols,
                          std::int64_t ld) {
  ETH_GRID_LOOP(o, cols) {
    float acc = dbias[o];
    for (std::int64_t n = 0; n < N; ++n) acc += to_float(dout[n * ld + o]);
    dbias[o] = acc;
  }
}

// out (fp32) += bias (bf16) per row: the partial forward's bias, added in fp32.
__global__ void add_bias(float* out, const Bf16* bias, std::int64_t OC, std::int64_t total) {
  ETH_GRID_LOOP(i, total) out[i] += to_float(bias[i % OC]);
}

// Columns [0, cols) of dout (rows ld apart) summed into dbias.
void bias_backward(float* dbias, const Bf16* dout, std::int64_t N, std::int64_t cols,
                   std::int64_t ld) {
  if (dbias == nullptr || cols == 0) return;
  bias_grad<<<blocks_for(cols, 64), 64, 0, stream()>>>(dbias, dout, N, cols, ld);
  ETH_CUDA_LAUNCHED();
}
void bias_backward(float* dbias, const Bf16* dout, std::int64_t N, std::int64_t OC) {
  bias_backward(dbias, dout, N, OC, OC);
}

// The weight (and bias) gradient chunks of an "nt" weight (rows = output channels): rows
// [b, e) of dweight += dout[:, b:e]^T inp, of dbias += column sums of dout[:, b:e].
void nt_weight_rows(const GradRows<float>* rows, std::int64_t num_rows, const Bf16* dout,
                    const Bf16* inp, std::int64_t N, std::int64_t C, std::int64_t OC) {
  for (std::int64_t i = 0; i < num_rows; ++i) {
    const GradRows<float>& r = rows[i];
    gemm(true, false, r.end - r.begin, C, N, dout + r.begin, OC, inp, C, nullptr, 1.0f, nullptr,
         r.dweight, C);
    bias_backward(r.dbias, dout + r.begin, N, r.end - r.begin, OC);
  }
}

}  // namespace

void matmul_nt_forward(Bf16* out, const Bf16* inp, const Bf16* weight, const Bf16* bias,
                       std::int64_t N, std::int64_t C, std::int64_t OC) {
  gemm(false, true, N, OC, C, inp, C, weight, C, bias, 0.0f, out, nullptr, OC);
}

void matmul_nt_backward(Bf16* dinp, float* dweight, float* dbias, const Bf16* dout,
                        const Bf16* inp, const Bf16* weight, std::int64_t N, std::int64_t C,
                        std::int64_t OC) {
  gemm(false, false, N, C, OC, dout, OC, weight, C, nullptr, 0.0f, dinp, nullptr, C);
  gemm(true, false, OC, C, N, dout, OC, inp, C, nullptr, 1.0f, nullptr, dweight, C);
  bias_backward(dbias, dout, N, OC);
}

void matmul_nt_backward_rows(Bf16* dinp, const GradRows<float>* rows, std::int64_t num_rows,
                             const Bf16* dout, const Bf16* inp, const Bf16* weight,
                             std::int64_t N, std::int64_t C, std::int64_t OC) {
  gemm(false, false, N, C, OC, dout, OC, weight, C, nullptr, 0.0f, dinp, nullptr, C);
  nt_weight_rows(rows, num_rows, dout, inp, N, C, OC);
}

void matmul_nn_forward(Bf16* out, const Bf16* inp, const Bf16* weight, const Bf16* bias,
                       std::int64_t N, std::int64_t C, std::int64_t OC) {
  gemm(false, false, N, OC, C, inp, C, weight, OC, bias, 0.0f, out, nullptr, OC);
}

void matmul_nn_backward(Bf16* dinp, float* dweight, float* dbias, const Bf16* dout,
                        const Bf16* inp, const Bf16* weight, std::int64_t N, std::int64_t C,
                        std::int64_t OC) {
  gemm(false, true, N, C, OC, dout, OC, weight, OC, nullptr, 0.0f, dinp, nullptr, C);
  gemm(true, false, C, OC, N, inp, C, dout, OC, nullptr, 1.0f, nullptr, dweight, OC);
  bias_backward(dbias, dout, N, OC);
}

// Chunks of input channels: rows [b, e) of dweight (C,OC) += inp[:, b:e]^T dout.
void matmul_nn_backward_rows(Bf16* dinp, const GradRows<float>* rows, std::int64_t num_rows,
                             float* dbias, const Bf16* dout, const Bf16* inp, const Bf16* weight,
                             std::int64_t N, std::int64_t C, std::int64_t OC) {
  gemm(false, true, N, C, OC, dout, OC, weight, OC, nullptr, 0.0f, dinp, nullptr, C);
  for (std::int64_t i = 0; i < num_rows; ++i) {
    const GradRows<float>& r = rows[i];
    gemm(true, false, r.end - r.begin, OC, N, inp + r.begin, C, dout, OC, nullptr, 1.0f, nullptr,
         r.dweight, OC);
  }
  bias_backward(dbias, dout, N, OC);
}

void matmul_nn_forward_partial(float* out, const Bf16* inp, const Bf16* weight, const Bf16* bias,
                               std::int64_t N, std::int64_t C, std::int64_t OC) {
  gemm(false, false, N, OC, C, inp, C, weight, OC, nullptr, 0.0f, nullptr, out, OC);
  if (bias != nullptr && N * OC > 0) {
    add_bias<<<blocks_for(N * OC), kThreads, 0, stream()>>>(out, bias, OC, N * OC);
    ETH_CUDA_LAUNCHED();
  }
}

void matmul_nt_backward_partial(float* dinp, float* dweight, float* dbias, const Bf16* dout,
                                const Bf16* inp, const Bf16* weight, std::int64_t N,
                                std::int64_t C, std::int64_t OC) {
  gemm(false, false, N, C, OC, dout, OC, weight, C, nullptr, 0.0f, nullptr, dinp, C);
  gemm(true, false, OC, C, N, dout, OC, inp, C, nullptr, 1.0f, nullptr, dweight, C);
  bias_backward(dbias, dout, N, OC);
}

void matmul_nt_backward_partial_rows(float* dinp, const GradRows<float>* rows,
                                     std::int64_t num_rows, const Bf16* dout, const Bf16* inp,
                                     const Bf16* weight, std::int64_t N, std::int64_t C,
                                     std::int64_t OC) {
  gemm(false, false, N, C, OC, dout, OC, weight, C, nullptr, 0.0f, nullptr, dinp, C);
  nt_weight_rows(rows, num_rows, dout, inp, N, C, OC);
}

}  // namespace eth::cuda
