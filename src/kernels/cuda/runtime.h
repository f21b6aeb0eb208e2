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

// True when this build has the CUDA backend (ETH_CUDA=ON).
bool compiled();
// GPUs the driver reports; 0 without a driver, without a GPU, or in a build without CUDA (never
// throws: the CLI asks before any work).
int device_count();
// Why device_count() is 0, in words ("built without CUDA", "no CUDA driver: ...",
// "no GPU: ..."); empty when there is a GPU.
std::string unavailable_reason();

struct DeviceInfo {
  std::string name;                 // "NVIDIA H200"
  int major = 0, minor = 0;         // compute capability
  int multiprocessors = 0;
  double memory_bytes = 0;          // total global memory
  double memory_free_bytes = 0;     // free now
};
// The current device of the calling thread. CudaError without one.
DeviceInfo device_info();
// Makes `device` the calling thread's current device (NCCL ranks: one GPU each).
void set_device(int device);

// Device memory (cudaMalloc: plain allocations, never managed memory). alloc(0) is nullptr.
void* alloc(std::size_t bytes);
void free(void* p) noexcept;
// Copies on the calling thread's stream; each returns once the copy is complete, so host memory
// may be reused at once (the transfers ETH does per step are small: tokens, losses).
void copy_to_device(void* dst, const void* src, std::size_t bytes);
void copy_to_host(void* dst, const void* src, std::size_t bytes);
// Device to device, asynchronous on the calling thread's stream (ordered with its kernels).
void copy_on_device(void* dst, const void* src, std::size_t bytes);
void memset_zero(void* p, std::size_t bytes);  // asynchronous, like copy_on_device
// Waits for everything the calling thread queued on its stream; throws CudaError for any
// failure of it (an asynchronous kernel error surfaces here).
void synchronize();

// One device allocation of `n` elements of T, owned: freed when the buffer goes, movable, not
// copyable (the stage arenas and the tests hold device memory only through this). Not
// initialized; zero() queues a memset on the calling thread's stream.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t n) : ptr_(static_cast<T*>(alloc(n * sizeof(T)))), size_(n) {}
  ~DeviceBuffer() { free(ptr_); }
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      free(ptr_);
      ptr_ = std::exchange(o.ptr_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* data() { return ptr_; }
  const T* data() const { return ptr_; }
  std::size_t size() const { return size_; }
  std::size_t bytes() const { return size_ * sizeof(T); }
  void zero() { memset_zero(ptr_, bytes()); }

 private:
  T* ptr_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace eth::cuda
