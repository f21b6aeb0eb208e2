// Element-wise kernels on bf16 storage with fp32 arithmetic (cpu/pointwise.cpp's formulas),
// the device dropout masks (philox.h, bit for bit rng.cpp's) and the small helpers the trainer
// and the threads backend need. Grid-stride loops on the calling thread's stream.
#include "kernels/constants.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kernels.h"
#include "kernels/philox.h"

namespace eth::cuda {
namespace {

constexpr float kK0 = static_cast<float>(kGeluSqrt2OverPi);
constexpr float kK1 = static_cast<float>(kGeluCubic);

// expf, not __expf: the fast intrinsic loses up to ~14 ulp at the arguments GELU sees.
__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

__global__ void gelu_fwd(Bf16* out, const Bf16* inp, std::int64_t n) {
  ETH_GRID_LOOP(i, n) {
    const float x = to_float(inp[i]);
    const float u = kK0 * (x + kK1 * x * x * x);
    out[i] = to_bf16(x * sigmoid(2.0f * u));
  }
}

__global__ void gelu_bwd(Bf16* dinp, const Bf16* dout, const Bf16* inp, std::int64_t n) {
  ETH_GRID_LOOP(i, n) {
    const float x = to_float(inp[i]);
    const float u = kK0 * (x + kK1 * x * x * x);
    const float s = sigmoid(2.0f * u);
    const float grad = s + 2.0f * x * s * (1.0f - s) * kK0 * (1.0f + 3.0f * kK1 * x * x);
    dinp[i] = to_bf16(to_float(dout[i]) * grad);
  }
}

__global__ void residual_fwd(Bf16* out, const Bf16* res, const Bf16* branch, std::int64_t n) {
  ETH_GRID_LOOP(i, n) out[i] = to_bf16(to_float(res[i]) + to_float(branch[i]));
}

__global__ void residual_bwd(Bf16* dres, Bf16* dbranch, const Bf16* dout, std::int64_t n) {
  ETH_GRID_LOOP(i, n) {
    const Bf16 d = dout[i];
    dres[i] = to_bf16(to_float(dres[i]) + to_float(d));
    dbranch[i] = d;
  }
}

__global__ void dropout_apply(Bf16* out, const Bf16* inp, const std::uint8_t* mask, float scale,
                              std::int64_t n) {
  ETH_GRID_LOOP(i, n) out[i] = mask[i] ? to_bf16(to_float(inp[i]) * scale) : Bf16{0};
}

// One thread per Philox block (4 elements) of one sample row: the words rng.cpp draws.
__global__ void mask_fill(std::uint8_t* mask, std::uint64_t seed, std::int64_t step,
                          std::int64_t unit, std::uint16_t op, std::uint32_t threshold,
                          std::int64_t sample0, std::int64_t elem0, std::int64_t n,
                          std::int64_t first_block, std::int64_t blocks_per_row,
                          std::int64_t total) {
  ETH_GRID_LOOP(i, total) {
    const std::int64_t b = i / blocks_per_row;
    const std::int64_t block = first_block + i % blocks_per_row;
    const philox::Block w =
        philox::rounds10(philox::counter(step, unit, op, sample0 + b, block), philox::key0(seed),
                         philox::key1(seed));
    std::uint8_t* row = mask + b * n;
    for (int l = 0; l < 4; ++l) {
      const std::int64_t e = block * 4 + l;
      if (e >= elem0 && e < elem0 + n) {
        row[e - elem0] = philox::dropout_keep(w.w[l], threshold) ? 1 : 0;
      }
    }
  }
}

__global__ void to_bf16_kernel(Bf16* out, const float* in, std::int64_t n) {
  ETH_GRID_LOOP(i, n) out[i] = to_bf16(in[i]);
}

template <typename T>
__global__ void add_kernel(T* x, const T* y, std::int64_t n) {
  ETH_GRID_LOOP(i, n) x[i] += y[i];
}

template <typename T>
__global__ void max_kernel(T* x, const T* y, std::int64_t n) {
  ETH_GRID_LOOP(i, n) x[i] = x[i] < y[i] ? y[i] : x[i];
}

void check_p(float p) {
  if (!(p >= 0.0f && p < 1.0f)) throw CudaError("[cuda] dropout probability must be in [0, 1)");
}

}  // namespace

void gelu_forward(Bf16* out, const Bf16* inp, std::int64_t N) {
  gelu_fwd<<<blocks_for(N), kThreads, 0, stream()>>>(out, inp, N);
  ETH_CUDA_LAUNCHED();
}

void gelu_backward(Bf16* dinp, const Bf16* dout, const Bf16* inp, std::int64_t N) {
  gelu_bwd<<<blocks_for(N), kThreads, 0, stream()>>>(dinp, dout, inp, N);
  ETH_CUDA_LAUNCHED();
}

void residual_forward(Bf16* out, const Bf16* res, const Bf16* branch, std::int64_t N) {
  residual_fwd<<<blocks_for(N), kThreads, 0, stream()>>>(out, res, branch, N);
  ETH_CUDA_LAUNCHED();
}

void residual_backward(Bf16* dres, Bf16* dbranch, const Bf16* dout, std::int64_t N) {
  residual_bwd<<<blocks_for(N), kThreads, 0, stream()>>>(dres, dbranch, dout, N);
  ETH_CUDA_LAUNCHED();
}

void dropout_forward(Bf16* out, const Bf16* inp, const std::uint8_t* mask, float p,
                     std::int64_t N) {
  check_p(p);
  dropout_apply<<<blocks_for(N), kThreads, 0, stream()>>>(out, inp, mask, 1.0f / (1.0f - p), N);
  ETH_CUDA_LAUNCHED();
}

void dropout_backward(Bf16* dinp, const Bf16* dout, const std::uint8_t* mask, float p,
                      std::int64_t N) {
  dropout_forward(dinp, dout, mask, p, N);
}

void dropout_mask_fill(std::uint8_t* mask, const RngStream& s, float p, std::int64_t sample0,
                       std::int64_t elem0, std::int64_t B, std::int64_t n) {
  check_p(p);
  if (B <= 0 || n <= 0) return;
  const std::int64_t first = elem0 >> 2, last = (elem0 + n - 1) >> 2;
  const std::int64_t per_row = last - first + 1;
  const std::int64_t total = B * per_row;
  mask_fill<<<blocks_for(total), kThreads, 0, stream()>>>(
      mask, s.seed, s.step, s.unit, static_cast<std::uint16_t>(s.op),
      philox::dropout_threshold(p), sample0, elem0, n, first, per_row, total);
  ETH_CUDA_LAUNCHED();
}

void convert_to_bf16(Bf16* out, const float* in, std::int64_t n) {
  to_bf16_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(out, in, n);
  ETH_CUDA_LAUNCHED();
}

void add_inplace(float* x, const float* y, std::int64_t n) {
  add_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(x, y, n);
  ETH_CUDA_LAUNCHED();
}
void add_inplace(double* x, const double* y, std::int64_t n) {
  add_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(x, y, n);
  ETH_CUDA_LAUNCHED();
}
void max_inplace(float* x, const float* y, std::int64_t n) {
  max_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(x, y, n);
  ETH_CUDA_LAUNCHED();
}
void max_inplace(double* x, const double* y, std::int64_t n) {
  max_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(x, y, n);
  ETH_CUDA_LAUNCHED();
}

}  // namespace eth::cuda
