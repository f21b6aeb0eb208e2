// The kernels of Llama-family blocks on the device: RMSNorm, rotary positions and SwiGLU
// (device_kernels.inc; the contracts of cpu/bf16/'s kernels of the same names): bf16 storage,
// fp32 arithmetic, each bf16 output rounded once. Kept plain on purpose (a block per row for
// RMSNorm, a thread per element or rotated pair otherwise): none of them is a matmul, and
// they run on a GPU nobody has yet watched them run on.
// The parameter gradient (RMSNorm's dweight) is summed one thread per channel with the rows in
// order, as layer norm's (rows.cu), so it does not depend on the launch shape.
#include <cmath>
#include <string>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kernels.h"

namespace eth::cuda {
namespace {

// ---- RMSNorm ------------------------------------------------------------------------------

// One block per row: rstd = 1 / sqrt(mean(x^2) + eps), out = x rstd w.
__global__ void rmsnorm_fwd(Bf16* out, float* rstd, const Bf16* inp, const Bf16* weight,
                            float eps, std::int64_t C) {
  __shared__ float shared[32];
  const std::int64_t n = blockIdx.x;
  const Bf16* x = inp + n * C;
  float ss = 0;
  for (std::int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    const float v = to_float(x[c]);
    ss += v * v;
  }
  ss = block_sum(ss, shared);
  // Correctly rounded sqrt and division (not rsqrtf's approximation): the bf16 output then
  // carries only its own rounding beyond the fp32 sum's.
  const float r = 1.0f / sqrtf(ss / static_cast<float>(C) + eps);
  for (std::int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    out[n * C + c] = to_bf16(to_float(x[c]) * r * to_float(weight[c]));
  }
  if (threadIdx.x == 0) rstd[n] = r;
}

// One block per row: dinp += rstd (g - xhat mean(g xhat)), g = dout w, xhat = x rstd.
__global__ void rmsnorm_bwd_inp(Bf16* dinp, const Bf16* dout, const Bf16* inp,
                                const Bf16* weight, const float* rstd, std::int64_t C) {
  __shared__ float shared[32];
  const std::int64_t n = blockIdx.x;
  const float r = rstd[n];
  float sgx = 0;
  for (std::int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    const std::int64_t i = n * C + c;
    sgx += to_float(dout[i]) * to_float(weight[c]) * (to_float(inp[i]) * r);
  }
  const float mgx = block_sum(sgx, shared) / static_cast<float>(C);
  for (std::int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    const std::int64_t i = n * C + c;
    const float g = to_float(dout[i]) * to_float(weight[c]);
    const float xhat = to_float(inp[i]) * r;
    dinp[i] = to_bf16(to_float(dinp[i]) + r * (g - xhat * mgx));
  }
}

// One thread per channel, rows in order: dweight += sum_n dout xhat.
__global__ void rmsnorm_bwd_weight(float* dweight, const Bf16* dout, const Bf16* inp,
                                   const float* rstd, std::int64_t N, std::int64_t C) {
  ETH_GRID_LOOP(c, C) {
    float dw = dweight[c];
    for (std::int64_t n = 0; n < N; ++n) {
      dw += to_float(dout[n * C + c]) * (to_float(inp[n * C + c]) * rstd[n]);
    }
    dweight[c] = dw;
  }
}

// ---- rotary positions -----------------------------------------------------------------------

// One thread per rotated pair (row n, rotated head r, i < hd/2): the pair (i, i + hd/2) of the
// head at launch::QkvGroups::rotated_col(r) turned by sign * t w_i, t = n % T,
// w_i = theta^(-2i/hd). The angle and its cosine and sine in double, then rounded to float:
// a float angle t w_i would lose ~t 2^-24 radians (5e-4 at t = 8192) before any rounding of x.
__global__ void rope_rotate(Bf16* qkv, std::int64_t T, std::int64_t W,
                            launch::QkvGroups groups, std::int64_t rotated, double theta,
                            double sign, std::int64_t total) {
  const std::int64_t half = groups.hs / 2;
  ETH_GRID_LOOP(e, total) {
    const std::int64_t i = e % half, r = (e / half) % rotated, n = e / (half * rotated);
    const double angle =
        static_cast<double>(n % T) * pow(theta, -2.0 * static_cast<double>(i) /
                                                    static_cast<double>(groups.hs));
    double s = 0, c = 0;
    sincos(sign * angle, &s, &c);
    const float cf = static_cast<float>(c), sf = static_cast<float>(s);
    Bf16* head = qkv + n * W + groups.rotated_col(r);
    const float a = to_float(head[i]), b = to_float(head[i + half]);
    head[i] = to_bf16(a * cf - b * sf);
    head[i + half] = to_bf16(b * cf + a * sf);
  }
}

void rope(const char* fn, Bf16* x, std::int64_t B, std::int64_t T, std::int64_t NH,
          std::int64_t NKV, std::int64_t hd, float theta, double sign) {
  if (hd <= 0 || hd % 2 != 0) throw CudaError(std::string("[cuda] ") + fn + ": odd head size");
  if (NH <= 0 || NKV <= 0 || NH % NKV != 0) {
    throw CudaError(std::string("[cuda] ") + fn +
                    ": the kv heads NKV must divide the query heads NH");
  }
  const std::int64_t rotated = NH + NKV;  // every query head and every key head
  const std::int64_t total = B * T * rotated * (hd / 2);
  if (total == 0) return;
  const launch::QkvGroups groups{hd, NH / NKV};
  rope_rotate<<<blocks_for(total), kThreads, 0, stream()>>>(
      x, T, (NH + 2 * NKV) * hd, groups, rotated, static_cast<double>(theta), sign, total);
  ETH_CUDA_LAUNCHED();
}

// ---- SwiGLU ---------------------------------------------------------------------------------

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

__global__ void swiglu_fwd(Bf16* out, const Bf16* gate, const Bf16* up, std::int64_t n) {
  ETH_GRID_LOOP(i, n) {
    const float g = to_float(gate[i]);
    out[i] = to_bf16(g * sigmoid(g) * to_float(up[i]));
  }
}

// dgate = dout up silu'(gate), silu'(x) = s (1 + x (1 - s)) with s = sigmoid(x); dup = dout
// silu(gate).
__global__ void swiglu_bwd(Bf16* dgate, Bf16* dup, const Bf16* dout, const Bf16* gate,
                           const Bf16* up, std::int64_t n) {
  ETH_GRID_LOOP(i, n) {
    const float g = to_float(gate[i]), u = to_float(up[i]), d = to_float(dout[i]);
    const float s = sigmoid(g);
    dgate[i] = to_bf16(d * u * (s * (1.0f + g * (1.0f - s))));
    dup[i] = to_bf16(d * (g * s));
  }
}

// Blocks of a one-block-per-row kernel (grid.x is at most 2^31 - 1).
unsigned rows_grid(const char* fn, std::int64_t N) {
  if (N > 0x7FFFFFFF) throw CudaError(std::string("[cuda] ") + fn + ": too many rows");
  return static_cast<unsigned>(N);
}

}  // namespace

void rmsnorm_forward(Bf16* out, float* rstd, const Bf16* inp, const Bf16* weight, float eps,
                     std::int64_t N, std::int64_t C) {
  if (N == 0) return;
  rmsnorm_fwd<<<rows_grid("rmsnorm_forward", N), kThreads, 0, stream()>>>(out, rstd, inp, weight,
                                                                         eps, C);
  ETH_CUDA_LAUNCHED();
}

void rmsnorm_backward(Bf16* dinp, float* dweight, const Bf16* dout, const Bf16* inp,
                      const Bf16* weight, const float* rstd, std::int64_t N, std::int64_t C) {
  if (N == 0) return;
  rmsnorm_bwd_inp<<<rows_grid("rmsnorm_backward", N), kThreads, 0, stream()>>>(dinp, dout, inp,
                                                                              weight, rstd, C);
  ETH_CUDA_LAUNCHED();
  rmsnorm_bwd_weight<<<blocks_for(C, 64), 64, 0, stream()>>>(dweight, dout, inp, rstd, N, C);
  ETH_CUDA_LAUNCHED();
}

void rope_forward(Bf16* qkv, std::int64_t B, std::int64_t T, std::int64_t NH, std::int64_t NKV,
                  std::int64_t hd, float theta) {
  rope("rope_forward", qkv, B, T, NH, NKV, hd, theta, 1.0);
}

void rope_backward(Bf16* dqkv, std::int64_t B, std::int64_t T, std::int64_t NH,
                   std::int64_t NKV, std::int64_t hd, float theta) {
  rope("rope_backward", dqkv, B, T, NH, NKV, hd, theta, -1.0);
}

void swiglu_forward(Bf16* out, const Bf16* gate, const Bf16* up, std::int64_t N,
                    std::int64_t F) {
  const std::int64_t n = N * F;
  if (n == 0) return;
  swiglu_fwd<<<blocks_for(n), kThreads, 0, stream()>>>(out, gate, up, n);
  ETH_CUDA_LAUNCHED();
}

void swiglu_backward(Bf16* dgate, Bf16* dup, const Bf16* dout, const Bf16* gate, const Bf16* up,
                     std::int64_t N, std::int64_t F) {
  const std::int64_t n = N * F;
  if (n == 0) return;
  swiglu_bwd<<<blocks_for(n), kThreads, 0, stream()>>>(dgate, dup, dout, gate, up, n);
  ETH_CUDA_LAUNCHED();
}

}  // namespace eth::cuda
