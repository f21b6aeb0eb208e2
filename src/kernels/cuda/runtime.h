// The CUDA runtime as the rest of ETH sees it: whether this build has the backend, what GPU is
// there, device memory and copies, and the stream every kernel runs on. A plain C++ header (no
// CUDA include), so train/, runtime/ and cli/ compile the same in builds without CUDA, where
// no_cuda.cpp's versions report "built without CUDA" (CMake picks the file, STYLE.md section 6).
//
// Streams: every kernel, copy and cuBLASLt call of ETH runs on the calling host thread's own
// default stream (cudaStreamPerThread), so ranks that are threads of one process (the threads
// backend) each run on their own stream without passing one around. synchronize() waits for the
// calling thread's stream only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

namespace eth::cuda {

// A CUDA call failed (or the backend is missing): the call, file:line and CUDA's error string.
class CudaError : public std::runtime_error {
 public:
  explicit CudaError(const std::string& message) : std::runtime_error(message) {}
};

// The shared runtime interface (compiled, device_count, unavailable_reason, DeviceInfo,
// device_info, set_device, alloc, free, the copies, memset_zero, synchronize, DeviceBuffer). On
// CUDA: compiled() is ETH_CUDA=ON; device_count() is 0 without a driver, without a GPU, or in a
// build without CUDA; unavailable_reason() says which ("built without CUDA", "no CUDA driver:
// ...", "no GPU: ..."); DeviceInfo names the GPU ("NVIDIA H200") and its compute capability;
// device_info() throws CudaError without a device; set_device() picks the thread's GPU (NCCL
// ranks: one each); alloc is cudaMalloc (plain allocations, never managed memory); the copies run
// on the calling thread's stream (the transfers ETH does per step are small: tokens, losses),
// copy_on_device and memset_zero asynchronously; synchronize() throws CudaError for any failure
// of what the thread queued (an asynchronous kernel error surfaces there).
#include "kernels/device_runtime.inc"

}  // namespace eth::cuda
