// The runtime's memory policies: host memory, and device memory over a GPU Api (the emulated
// device's and CUDA's, one template). See device_memory_policy.h.
#include "runtime/device_memory_policy.h"

#include <cstdint>
#include <cstring>
#include <new>

#include "core/error.h"
#include "kernels/cuda/api.h"
#include "kernels/emulated/api.h"

namespace eth {

namespace {

class HostRuntimeMemory final : public RuntimeMemory {
 public:
  bool on_device() const override { return false; }
  void* alloc(std::size_t bytes) const override { return new std::byte[bytes](); }
  void free(void* p) const override { delete[] static_cast<std::byte*>(p); }
  void zero(void* p, std::size_t bytes) const override {
    if (bytes > 0) std::memset(p, 0, bytes);
  }
  void copy(void* dst, const void* src, std::size_t bytes) const override {
    if (dst != src && bytes > 0) std::memmove(dst, src, bytes);
  }
  const DeviceMemoryOps* comm_ops() const override { return nullptr; }
};

// The device's functions the communicators call, each done on return (a copy or a reduction
// another thread reads next must not be merely queued on this thread's stream).
template <class Api>
struct ApiOps {
  static void copy(void* dst, const void* src, std::size_t bytes) {
    if (dst == src || bytes == 0) return;
    Api::copy_on_device(dst, src, bytes);
    Api::synchronize();
  }
  template <class T>
  static void reduce_as(void* acc, const void* x, std::size_t count, ReduceOp op) {
    const auto n = static_cast<std::int64_t>(count);
    if (op == ReduceOp::Sum) {
      Api::add_inplace(static_cast<T*>(acc), static_cast<const T*>(x), n);
    } else {
      Api::max_inplace(static_cast<T*>(acc), static_cast<const T*>(x), n);
    }
  }
  static void reduce(void* acc, const void* x, std::size_t count, DType type, ReduceOp op) {
    if (count == 0) return;
    ETH_CHECK(type == DType::F32 || type == DType::F64, "a device reduction of i64");
    if (type == DType::F32) {
      reduce_as<float>(acc, x, count, op);
    } else {
      reduce_as<double>(acc, x, count, op);
    }
    Api::synchronize();
  }
  static void download(void* host, const void* device, std::size_t bytes) {
    Api::copy_to_host(host, device, bytes);
  }
  static void upload(void* device, const void* host, std::size_t bytes) {
    Api::copy_to_device(device, host, bytes);
  }
  static void synchronize() { Api::synchronize(); }
};

template <class Api>
class DeviceRuntimeMemory final : public RuntimeMemory {
 public:
  explicit DeviceRuntimeMemory(const char* name)
      : ops_{name, &ApiOps<Api>::copy, &ApiOps<Api>::reduce, &ApiOps<Api>::download,
             &ApiOps<Api>::upload, &ApiOps<Api>::synchronize} {}
  bool on_device() const override { return true; }
  void* alloc(std::size_t bytes) const override {
    void* p = Api::alloc(bytes);
    Api::memset_zero(p, bytes);
    return p;
  }
  void free(void* p) const override { Api::free(p); }
  void zero(void* p, std::size_t bytes) const override {
    if (bytes > 0) Api::memset_zero(p, bytes);
  }
  void copy(void* dst, const void* src, std::size_t bytes) const override {
    if (dst != src && bytes > 0) Api::copy_on_device(dst, src, bytes);
  }
  const DeviceMemoryOps* comm_ops() const override { return &ops_; }

 private:
  DeviceMemoryOps ops_;
};

}  // namespace

const RuntimeMemory& runtime_memory(ComputeDevice d) {
  static const HostRuntimeMemory host;
  static const DeviceRuntimeMemory<EmulatedApi> emulated("emulated");
  static const DeviceRuntimeMemory<CudaApi> cuda("cuda");
  switch (d) {
    case ComputeDevice::Cpu:
      return host;
    case ComputeDevice::Emulated:
      return emulated;
    case ComputeDevice::Cuda:
      return cuda;
  }
  ETH_CHECK(false, "runtime_memory: unknown device");
  return host;
}

}  // namespace eth
