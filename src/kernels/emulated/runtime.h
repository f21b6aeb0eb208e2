// The host-emulated GPU: cuda/runtime.h's device, memory and stream functions (same names, same
// signatures) on a device that is the CPU, with device memory the host cannot touch. It exists
// so that the GPU trainer's every path (explicit uploads and downloads, device-side zero and
// copy, device scalars) runs in CI on machines without a GPU (docs/gpu.md, "The emulated
// device").
//
// Device memory is a separate arena: a few large anonymous mmap regions carved by a first-fit
// allocator, 256-byte aligned like cudaMalloc. Outside the device layer its pages are PROT_NONE,
// so a host read or write of a device pointer is a SIGSEGV, not a silent success. Every function
// here and in kernels.h opens the pages for its call through a DeviceScope and closes them
// after: a handful of mprotect calls per call (one per region), whatever the number of
// allocations. The protection is process-wide, not per thread: while any thread is inside the
// device layer, every thread can reach device memory (ranks that are threads share the one
// emulated device, as they share one GPU).
//
// Streams: every call runs to completion on the calling thread before it returns, so
// synchronize() has nothing to wait for. Code that would read a result on a real GPU before
// synchronizing is therefore not caught here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

namespace eth::emu {

// A device call failed: a pointer that is not device memory, a size past an allocation, an
// argument the CUDA kernels refuse too. The message names the function.
class EmuError : public std::runtime_error {
 public:
  explicit EmuError(const std::string& message) : std::runtime_error(message) {}
};

// The device layer's own access to device memory: while a DeviceScope lives, the device's pages
// are readable and writable from every thread. Reference-counted and thread-safe (the first
// scope opens the pages, the last one closes them); scopes nest. Only the device layer uses it:
// this file's functions, the emulated kernels, and the emulated interconnect that moves
// messages device to device (as NCCL or a peer copy would on a GPU). Host code that opens a
// scope to read device memory defeats the check this device exists for.
class DeviceScope {
 public:
  DeviceScope();
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
};

// Always true / 1 / "": the emulated device is built into every build.
bool compiled();
int device_count();
std::string unavailable_reason();

struct DeviceInfo {
  std::string name;             // "ETH emulated GPU (host CPU)"
  int major = 0, minor = 0;     // 0.0: no compute capability
  int multiprocessors = 0;      // the OpenMP threads the kernels use
  double memory_bytes = 0;      // the host's physical memory
  double memory_free_bytes = 0; // that less the device memory allocated now
};
DeviceInfo device_info();
// Only device 0 exists; EmuError for any other.
void set_device(int device);

// Device memory (the arena). alloc(0) is nullptr; free(nullptr) does nothing. free() of a
// pointer alloc did not return is our bug (std::terminate, as free is noexcept).
void* alloc(std::size_t bytes);
void free(void* p) noexcept;
// Copies; each checks that its device side lies inside one allocation (EmuError otherwise), and
// that its host side is not device memory.
void copy_to_device(void* dst, const void* src, std::size_t bytes);
void copy_to_host(void* dst, const void* src, std::size_t bytes);
void copy_on_device(void* dst, const void* src, std::size_t bytes);
void memset_zero(void* p, std::size_t bytes);
void synchronize();

// Whether [p, p + bytes) lies inside one live allocation (bytes = 0: p is inside or one past
// the end of one). For the device layer's argument checks and for tests.
bool is_device_memory(const void* p, std::size_t bytes = 0);
// Device bytes allocated now (alignment included), and the virtual bytes the arena holds.
std::size_t allocated_bytes();
std::size_t reserved_bytes();

// One device allocation of `n` elements of T, owned (cuda::DeviceBuffer's twin).
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

}  // namespace eth::emu
