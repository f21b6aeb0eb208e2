// ETH_HOST_DEVICE: __host__ __device__ under nvcc, nothing under the host compiler, for the few
// plain functions that both the CPU code and the CUDA kernels compile (philox.h,
// cuda/launch.h). ETH_UNROLL_10: a full unroll hint where the compiler takes one (GCC for the
// CPU kernels, nvcc's device pass).
#pragma once

#if defined(__CUDACC__)
#define ETH_HOST_DEVICE __host__ __device__
#else
#define ETH_HOST_DEVICE
#endif

#if defined(__CUDA_ARCH__)
#define ETH_UNROLL_10 _Pragma("unroll")
#elif defined(__CUDACC__)
#define ETH_UNROLL_10  // nvcc's host pass: its front end rejects GCC's pragma
#else
#define ETH_UNROLL_10 _Pragma("GCC unroll 10")
#endif
