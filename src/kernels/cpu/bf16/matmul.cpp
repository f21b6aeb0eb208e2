// bf16 matrix products: the products go to bf16::gemm (the weight gradients with beta = 1, so
// oneDNN's sum post-op adds into the fp32 gradient); the bias gradient is an fp32 column sum over
// channel blocks, rows in order, as in cpu/matmul.cpp (thread-count independent).
#include "kernels/cpu/bf16/matmul.h"

#include <algorithm>

#include "kernels/cpu/bf16/gemm.h"

namespace eth::cpu::bf16 {
namespace {

constexpr std::int64_t kChannelBlock = 64;

// dbias[o] += sum_n dout[n,o], summed in fp32.
void bias_backward(float* dbias, const Bf16* dout, std::int64_t N, std::int64_t OC) {
  const std::int64_t blocks = (OC + kChannelBlock - 1) / kChannelBlock;
#pragma omp parallel for schedule(static)
  for (std::int64_t blk = 0; blk < blocks; ++blk) {
    const std::int64_t o0 = blk * kChannelBlock, o1 = std::min(OC, o0 + kChannelBlock);
    float acc[kChannelBlock] = {};
    for (std::int64_t n = 0; n < N; ++n) {
      const Bf16* d = dout + n * OC;
#pragma omp simd
      for (std::int64_t o = o0; o < o1; ++o) acc[o - o0] += float_from_bf16(d[o]);
    }
    for (std::int64_t o = o0; o < o1; ++o) dbias[o] += acc[o - o0];
  }
}

}  // namespace

void matmul_nt_forward(Bf16* out, const Bf16* inp, const Bf16* weight, const Bf16* bias,
                       std::int64_t N, std::int64_t C, std::int64_t OC) {
  gemm(Trans::No, Trans::Yes, N, OC, C, 1.0f, inp, C, weight, C, bias, out, OC);
}

void matmul_nt_backward(Bf16* dinp, float* dweight, float* dbias, const Bf16* dout,
                        const Bf16* inp, const Bf16* weight, std::int64_t N, std::int64_t C,
                        std::int64_t OC) {
  gemm(Trans::No, Trans::No, N, C, OC, 1.0f, dout, OC, weight, C, nullptr, dinp, C);
  gemm(Trans::Yes, Trans::No, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight, C);
  if (dbias) bias_backward(dbias, dout, N, OC);
}

void matmul_nn_forward(Bf16* out, const Bf16* inp, const Bf16* weight, const Bf16* bias,
                       std::int64_t N, std::int64_t C, std::int64_t OC) {
  gemm(Trans::No, Trans::No, N, OC, C, 1.0f, inp, C, weight, OC, bias, out, OC);
}

void matmul_nn_backward(Bf16* dinp, float* dweight, float* dbias, const Bf16* dout,
                        const Bf16* inp, const Bf16* weight, std::int64_t N, std::int64_t C,
                        std::int64_t OC) {
  gemm(Trans::No, Trans::Yes, N, C, OC, 1.0f, dout, OC, weight, OC, nullptr, dinp, C);
  gemm(Trans::Yes, Trans::No, C, OC, N, 1.0f, inp, C, dout, OC, 1.0f, dweight, OC);
  if (dbias) bias_backward(dbias, dout, N, OC);
}

}  // namespace eth::cpu::bf16
