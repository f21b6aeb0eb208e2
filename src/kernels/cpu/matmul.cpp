// Matrix products with bias, fp32 and bf16: the products go to sgemm (gemm.h) or bf16::gemm
// (bf16/gemm.h; the weight gradients with beta = 1, so they add into the fp32 gradient); the
// bias broadcast and the bias gradient (fp32 column sums, channel blocks per thread, rows in
// order; one template for both storage types, cpu/storage.h) are OpenMP loops here.
#include "kernels/cpu/matmul.h"

#include <algorithm>

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

// dbias[o] += sum_n dout[n,o], summed in fp32.
template <typename A>
void bias_backward(float* dbias, const A* dout, std::int64_t N, std::int64_t OC) {
  const std::int64_t blocks = (OC + kChannelBlock - 1) / kChannelBlock;
#pragma omp parallel for schedule(static)
  for (std::int64_t blk = 0; blk < blocks; ++blk) {
    const std::int64_t o0 = blk * kChannelBlock, o1 = std::min(OC, o0 + kChannelBlock);
    float acc[kChannelBlock] = {};
    for (std::int64_t n = 0; n < N; ++n) {
      const A* d = dout + n * OC;
#pragma omp simd
      for (std::int64_t o = o0; o < o1; ++o) acc[o - o0] += widen(d[o]);
    }
    for (std::int64_t o = o0; o < o1; ++o) dbias[o] += acc[o - o0];
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
  if (dbias) bias_backward(dbias, dout, N, OC);
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
  if (dbias) bias_backward(dbias, dout, N, OC);
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
  if (dbias) bias_backward(dbias, dout, N, OC);
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
  if (dbias) bias_backward(dbias, dout, N, OC);
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
  if (dbias) bias_backward(dbias, dout, N, OC);
}

}  // namespace eth::cpu
