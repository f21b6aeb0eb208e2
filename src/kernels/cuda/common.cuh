// What every .cu file of the CUDA backend shares: the error check, the bf16 conversions of
// bf16.h's contract on the device, and launch-size helpers. Internal to kernels/cuda/.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/runtime.h"

namespace eth::cuda {

// Throws CudaError("[cuda] <call> at file:line: <CUDA's error string>") unless err is success.
void check(cudaError_t err, const char* call, const char* file, int line);
#define ETH_CUDA_CHECK(call) ::eth::cuda::check((call), #call, __FILE__, __LINE__)
// After a kernel launch: reports a bad launch configuration at once (execution errors surface
// at the next synchronize()).
#define ETH_CUDA_LAUNCHED() \
  ::eth::cuda::check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)

// The stream of the calling host thread (runtime.h).
inline cudaStream_t stream() { return cudaStreamPerThread; }

__device__ __forceinline__ float to_float(Bf16 x) {
  return __uint_as_float(static_cast<std::uint32_t>(x.bits) << 16);
}

// bf16.h's rounding, bit for bit: nearest-even, subnormals to signed zero, NaN quiet.
__device__ __forceinline__ Bf16 to_bf16(float x) {
  const std::uint32_t u = __float_as_uint(x);
  const std::uint32_t rounded = u + 0x7FFFu + ((u >> 16) & 1u);
  const bool is_nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
  const bool is_zero_or_subnormal = (u & 0x7F800000u) == 0;
  const std::uint32_t r =
      is_nan ? (u | 0x00400000u) : is_zero_or_subnormal ? (u & 0x80000000u) : rounded;
  return Bf16{static_cast<std::uint16_t>(r >> 16)};
}

using launch::blocks_for;
using launch::kThreads;

// for (i = this thread's first element; i < n; i += the grid's threads)
#define ETH_GRID_LOOP(i, n)                                                                  \
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; \
       i < (n); i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)

// Warp-wide sum and max (all 32 lanes take part).
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
  return v;
}

// Block-wide sum of blockDim.x <= 1024 threads (a multiple of 32); every thread gets the result.
// `shared` holds 32 floats.
__device__ __forceinline__ float block_sum(float v, float* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int warps = blockDim.x >> 5;
  float t = lane < warps ? shared[lane] : 0.0f;
  return warp_sum(t);
}
__device__ __forceinline__ float block_max(float v, float* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int warps = blockDim.x >> 5;
  float t = lane < warps ? shared[lane] : -INFINITY;
  return warp_max(t);
}

}  // namespace eth::cuda
