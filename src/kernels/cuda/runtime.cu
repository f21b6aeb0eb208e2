// Device queries, memory and copies on the calling thread's stream. See runtime.h.
#include <string>

#include "kernels/cuda/common.cuh"

namespace eth::cuda {

void check(cudaError_t err, const char* call, const char* file, int line) {
  if (err == cudaSuccess) return;
  throw CudaError(std::string("[cuda] ") + call + " at " + file + ":" + std::to_string(line) +
                  ": " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err));
}

bool compiled() { return true; }

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

std::string unavailable_reason() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string("no usable CUDA driver or GPU (") + cudaGetErrorName(err) + ": " +
           cudaGetErrorString(err) + ")";
  }
  if (n == 0) return "no GPU (the CUDA driver reports 0 devices)";
  return "";
}

DeviceInfo device_info() {
  int dev = 0;
  ETH_CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  ETH_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  std::size_t free_b = 0, total_b = 0;
  ETH_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  DeviceInfo info;
  info.name = prop.name;
  info.major = prop.major;
  info.minor = prop.minor;
  info.multiprocessors = prop.multiProcessorCount;
  info.memory_bytes = static_cast<double>(total_b);
  info.memory_free_bytes = static_cast<double>(free_b);
  return info;
}

void set_device(int device) { ETH_CUDA_CHECK(cudaSetDevice(device)); }

void* alloc(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  ETH_CUDA_CHECK(cudaMalloc(&p, bytes));
  return p;
}

void free(void* p) noexcept {
  if (p != nullptr) (void)cudaFree(p);
}

void copy_to_device(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  ETH_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream()));
  ETH_CUDA_CHECK(cudaStreamSynchronize(stream()));
}

void copy_to_host(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  ETH_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream()));
  ETH_CUDA_CHECK(cudaStreamSynchronize(stream()));
}

void copy_on_device(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0 || dst == src) return;
  ETH_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream()));
}

void memset_zero(void* p, std::size_t bytes) {
  if (bytes == 0) return;
  ETH_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream()));
}

void synchronize() { ETH_CUDA_CHECK(cudaStreamSynchronize(stream())); }

}  // namespace eth::cuda
