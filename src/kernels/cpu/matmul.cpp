// Matrix products with bias, fp32 and bf16: the products go to sgemm (gemm.h) or bf16::gemm
// (bf16/gemm.h; the weight gradients with beta = 1, so they add into the fp32 gradient); the
// bias broadcast and the bias gradient (fp32 column sums, channel blocks per thread, rows in
// order; one template for both storage types, cpu/storage.h) are OpenMP loops here.
#include "kernels/cpu/matmul.h"

#include <algorithm>

#include "core/error.h"
#include "kernels/cpu/bf16/gemm.h"
#include "kernels/cpu/bf16/matmul.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/storage.h"

namespace eth::cpu {
namespace {

constexpr std::int64_t kChannelBlock = 64;

// out[n,:] = bias (widened) for every row, so the product can accumulate onto it (beta = 1).
template <typename B>
void broadcast_rows(float* out, const B* bias, std::int64_t N, std::int64_t OC) {
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < N; ++n) {
    float* o = out + n * OC;
#pragma omp simd
    for (std::int64_t c = 0; c < OC; ++c) o[c] = widen(bias[c]);
  }
}

// dbias[o] += sum_n dout[n,o], summed in fp32; rows of dout are `ld` apart (OC unless dout is
// a column range of a wider matrix).
template <typename A>
void bias_backward(float* dbias, const A* dout, std::int64_t N, std::int64_t OC,
                   std::int64_t ld) {
  const std::int64_t blocks = (OC + kChannelBlock - 1) / kChannelBlock;
#pragma omp parallel for schedule(static)
  for (std::int64_t blk = 0; blk < blocks; ++blk) {
    const std::int64_t o0 = blk * kChannelBlock, o1 = std::min(OC, o0 + kChannelBlock);
    float acc[kChannelBlock] = {};
    for (std::int64_t n = 0; n < N; ++n) {
      const A* d = dout + n * ld;
#pragma omp simd
      for (std::int64_t o = o0; o < o1; ++o) acc[o - o0] += widen(d[o]);
    }
    for (std::int64_t o = o0; o < o1; ++o) dbias[o] += acc[o - o0];
  }
}

// The weight-gradient products of the *_backward_rows kernels: each chunk of rows written in
// place by one GEMM with beta 1. `Gemm` is sgemm or bf16::gemm (same argument order).
// nt: rows are output channels, dweight[b:e] += dout[:, b:e]^T inp, dbias[b:e] likewise.
template <typename A, typename Gemm>
void nt_weight_rows(const GradRows<float>* rows, std::int64_t num_rows, const A* dout,
                    const A* inp, std::int64_t N, std::int64_t C, std::int64_t OC, Gemm gemm_fn) {
  for (std::int64_t i = 0; i < num_rows; ++i) {
    const GradRows<float>& r = rows[i];
    gemm_fn(Trans::Yes, Trans::No, r.end - r.begin, C, N, 1.0f, dout + r.begin, OC, inp, C, 1.0f,
            r.dweight, C);
    if (r.dbias) bias_backward(r.dbias, dout + r.begin, N, r.end - r.begin, OC);
  }
}

// nn: rows are input channels, dweight[b:e] += inp[:, b:e]^T dout (the bias is not cut).
template <typename A, typename Gemm>
void nn_weight_rows(const GradRows<float>* rows, std::int64_t num_rows, const A* dout,
                    const A* inp, std::int64_t N, std::int64_t C, std::int64_t OC, Gemm gemm_fn) {
  for (std::int64_t i = 0; i < num_rows; ++i) {
    const GradRows<float>& r = rows[i];
    ETH_CHECK(r.dbias == nullptr, "matmul_nn_backward_rows: the bias is not cut by rows");
    gemm_fn(Trans::Yes, Trans::No, r.end - r.begin, OC, N, 1.0f, inp + r.begin, C, dout, OC, 1.0f,
            r.dweight, OC);
  }
}

}  // namespace

void matmul_nt_forward(float* out, const float* inp, const float* weight, const float* bias,
                       std::int64_t N, std::int64_t C, std::int64_t OC) {
  if (bias) broadcast_rows(out, bias, N, OC);
  sgemm(Trans::No, Trans::Yes, N, OC, C, 1.0f, inp, C, weight, C, bias ? 1.0f : 0.0f, out, OC);
}

void matmul_nt_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, std::int64_t N, std::int64_t C,
                        std::int64_t OC) {
  sgemm(Trans::No, Trans::No, N, C, OC, 1.0f, dout, OC, weight, C, 0.0f, dinp, C);
  sgemm(Trans::Yes, Trans::No, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight, C);
  if (dbias) bias_backward(dbias, dout, N, OC, OC);
}

void matmul_nn_forward(float* out, const float* inp, const float* weight, const float* bias,
                       std::int64_t N, std::int64_t C, std::int64_t OC) {
  if (bias) broadcast_rows(out, bias, N, OC);
  sgemm(Trans::No, Trans::No, N, OC, C, 1.0f, inp, C, weight, OC, bias ? 1.0f : 0.0f, out, OC);
}

void matmul_nn_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, std::int64_t N, std::int64_t C,
                        std::int64_t OC) {
  sgemm(Trans::No, Trans::Yes, N, C, OC, 1.0f, dout, OC, weight, OC, 0.0f, dinp, C);
  sgemm(Trans::Yes, Trans::No, C, OC, N, 1.0f, inp, C, dout, OC, 1.0f, dweight, OC);
  if (dbias) bias_backward(dbias, dout, N, OC, OC);
}

void matmul_nt_backward_rows(float* dinp, const GradRows<float>* rows, std::int64_t num_rows,
                             const float* dout, const float* inp, const float* weight,
                             std::int64_t N, std::int64_t C, std::int64_t OC) {
  sgemm(Trans::No, Trans::No, N, C, OC, 1.0f, dout, OC, weight, C, 0.0f, dinp, C);
  nt_weight_rows(rows, num_rows, dout, inp, N, C, OC, sgemm);
}

void matmul_nn_backward_rows(float* dinp, const GradRows<float>* rows, std::int64_t num_rows,
                             float* dbias, const float* dout, const float* inp,
                             const float* weight, std::int64_t N, std::int64_t C, std::int64_t OC) {
  sgemm(Trans::No, Trans::Yes, N, C, OC, 1.0f, dout, OC, weight, OC, 0.0f, dinp, C);
  nn_weight_rows(rows, num_rows, dout, inp, N, C, OC, sgemm);
  if (dbias) bias_backward(dbias, dout, N, OC, OC);
}

// bf16: the bias is added inside the GEMM's fp32 accumulation, before the one rounding.

void bf16::matmul_nt_forward(Bf16* out, const Bf16* inp, const Bf16* weight, const Bf16* bias,
                             std::int64_t N, std::int64_t C, std::int64_t OC) {
  gemm(Trans::No, Trans::Yes, N, OC, C, 1.0f, inp, C, weight, C, bias, out, OC);
}

void bf16::matmul_nt_backward(Bf16* dinp, float* dweight, float* dbias, const Bf16* dout,
                              const Bf16* inp, const Bf16* weight, std::int64_t N,
                              std::int64_t C, std::int64_t OC) {
  gemm(Trans::No, Trans::No, N, C, OC, 1.0f, dout, OC, weight, C, nullptr, dinp, C);
  gemm(Trans::Yes, Trans::No, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight, C);
  if (dbias) bias_backward(dbias, dout, N, OC, OC);
}

void bf16::matmul_nn_forward(Bf16* out, const Bf16* inp, const Bf16* weight, const Bf16* bias,
                             std::int64_t N, std::int64_t C, std::int64_t OC) {
  gemm(Trans::No, Trans::No, N, OC, C, 1.0f, inp, C, weight, OC, bias, out, OC);
}

void bf16::matmul_nn_backward(Bf16* dinp, float* dweight, float* dbias, const Bf16* dout,
                              const Bf16* inp, const Bf16* weight, std::int64_t N,
                              std::int64_t C, std::int64_t OC) {
  gemm(Trans::No, Trans::Yes, N, C, OC, 1.0f, dout, OC, weight, OC, nullptr, dinp, C);
  gemm(Trans::Yes, Trans::No, C, OC, N, 1.0f, inp, C, dout, OC, 1.0f, dweight, OC);
  if (dbias) bias_backward(dbias, dout, N, OC, OC);
}

namespace {
// The fp32-output bf16 GEMM (beta form), named so the templates above can take it.
void bf16_gemm_acc(Trans ta, Trans tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
                   const Bf16* A, std::int64_t lda, const Bf16* B, std::int64_t ldb, float beta,
                   float* C, std::int64_t ldc) {
  bf16::gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
}  // namespace

void bf16::matmul_nt_backward_rows(Bf16* dinp, const GradRows<float>* rows, std::int64_t num_rows,
                                   const Bf16* dout, const Bf16* inp, const Bf16* weight,
                                   std::int64_t N, std::int64_t C, std::int64_t OC) {
  gemm(Trans::No, Trans::No, N, C, OC, 1.0f, dout, OC, weight, C, nullptr, dinp, C);
  nt_weight_rows(rows, num_rows, dout, inp, N, C, OC, bf16_gemm_acc);
}

void bf16::matmul_nn_backward_rows(Bf16* dinp, const GradRows<float>* rows, std::int64_t num_rows,
                                   float* dbias, const Bf16* dout, const Bf16* inp,
                                   const Bf16* weight, std::int64_t N, std::int64_t C,
                                   std::int64_t OC) {
  gemm(Trans::No, Trans::Yes, N, C, OC, 1.0f, dout, OC, weight, OC, nullptr, dinp, C);
  nn_weight_rows(rows, num_rows, dout, inp, N, C, OC, bf16_gemm_acc);
  if (dbias) bias_backward(dbias, dout, N, OC, OC);
}

void bf16::matmul_nn_forward_partial(float* out, const Bf16* inp, const Bf16* weight,
                                     const Bf16* bias, std::int64_t N, std::int64_t C,
                                     std::int64_t OC) {
  if (bias) broadcast_rows(out, bias, N, OC);
  gemm(Trans::No, Trans::No, N, OC, C, 1.0f, inp, C, weight, OC, bias ? 1.0f : 0.0f, out, OC);
}

void bf16::matmul_nt_backward_partial(float* dinp, float* dweight, float* dbias,
                                      const Bf16* dout, const Bf16* inp, const Bf16* weight,
                                      std::int64_t N, std::int64_t C, std::int64_t OC) {
  gemm(Trans::No, Trans::No, N, C, OC, 1.0f, dout, OC, weight, C, 0.0f, dinp, C);
  gemm(Trans::Yes, Trans::No, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight, C);
  if (dbias) bias_backward(dbias, dout, N, OC, OC);
}

void bf16::matmul_nt_backward_partial_rows(float* dinp, const GradRows<float>* rows,
                                           std::int64_t num_rows, const Bf16* dout,
                                           const Bf16* inp, const Bf16* weight, std::int64_t N,
                                           std::int64_t C, std::int64_t OC) {
  gemm(Trans::No, Trans::No, N, C, OC, 1.0f, dout, OC, weight, C, 0.0f, dinp, C);
  nt_weight_rows(rows, num_rows, dout, inp, N, C, OC, bf16_gemm_acc);
}

}  // namespace eth::cpu
