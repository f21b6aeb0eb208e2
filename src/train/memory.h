// Where a kernel set's buffers live and the only ways the stage code touches them: every buffer
// of a stage (train/stage_compute.*) and of the model state (train/state_backend.h) is carved
// from one arena of the set's Memory, and zeroing, copying, mask filling and the host <-> device
// transfers go through it, never through std::fill / std::copy on the pointers. So the same
// stage code runs on host memory (the CPU sets) and on device memory (GpuKernels, where such a
// host touch would be a crash).
//   HostMemory: the pre-faulted mmap arena (arena.h); copies are memcpy, "upload" and
//     "download" are plain copies too.
//   DeviceMemory<Api>: one device allocation (Api::alloc, zeroed once) carved the same way; the
//     copies are Api's (kernels/cuda/runtime.h's semantics: upload and download return once
//     done; zero and device-to-device copies are queued on the calling thread's stream).
// host_visible says whether host code may read the buffers directly (the tokens and targets of
// a micro-batch then need no device copy).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "core/error.h"
#include "kernels/rng.h"
#include "train/arena.h"

namespace eth {

struct HostMemory {
  using Arena = eth::Arena;
  static constexpr bool host_visible = true;
  template <typename T>
  static void zero(T* p, std::int64_t n) {
    std::fill(p, p + n, T{});
  }
  // dst = src, n elements; dst == src is nothing to do.
  template <typename T>
  static void copy(T* dst, const T* src, std::int64_t n) {
    if (dst != src) std::copy(src, src + n, dst);
  }
  template <typename T>
  static void upload(T* dst, const T* host_src, std::int64_t n) {
    std::copy(host_src, host_src + n, dst);
  }
  template <typename T>
  static void download(T* host_dst, const T* src, std::int64_t n) {
    std::copy(src, src + n, host_dst);
  }
  static void synchronize() {}
  static constexpr auto dropout_mask_fill = &eth::dropout_mask_fill;
};

// One device allocation of `bytes`, zeroed, carved like Arena (64-byte aligned, never freed
// before the arena goes). Move-only.
template <class Api>
class DeviceArena {
 public:
  DeviceArena() = default;
  explicit DeviceArena(std::size_t bytes) : capacity_(bytes) {
    if (bytes == 0) return;
    base_ = static_cast<unsigned char*>(Api::alloc(bytes));
    Api::memset_zero(base_, bytes);
  }
  DeviceArena(DeviceArena&& o) noexcept { *this = std::move(o); }
  DeviceArena& operator=(DeviceArena&& o) noexcept {
    if (this != &o) {
      Api::free(base_);
      base_ = std::exchange(o.base_, nullptr);
      capacity_ = std::exchange(o.capacity_, 0);
      used_ = std::exchange(o.used_, 0);
    }
    return *this;
  }
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;
  ~DeviceArena() { Api::free(base_); }

  template <typename T>
  T* take(std::int64_t n) {
    const std::size_t b = arena_bytes<T>(n);
    ETH_CHECK(used_ + b <= capacity_, "device arena overflow: its size was planned too small");
    T* p = reinterpret_cast<T*>(base_ + used_);
    used_ += b;
    return p;
  }
  std::size_t capacity() const { return capacity_; }
  std::size_t used() const { return used_; }

 private:
  unsigned char* base_ = nullptr;
  std::size_t capacity_ = 0;
  std::size_t used_ = 0;
};

template <class Api>
struct DeviceMemory {
  using Arena = DeviceArena<Api>;
  static constexpr bool host_visible = false;
  template <typename T>
  static void zero(T* p, std::int64_t n) {
    Api::memset_zero(p, static_cast<std::size_t>(n) * sizeof(T));
  }
  template <typename T>
  static void copy(T* dst, const T* src, std::int64_t n) {
    if (dst != src) Api::copy_on_device(dst, src, static_cast<std::size_t>(n) * sizeof(T));
  }
  template <typename T>
  static void upload(T* dst, const T* host_src, std::int64_t n) {
    Api::copy_to_device(dst, host_src, static_cast<std::size_t>(n) * sizeof(T));
  }
  template <typename T>
  static void download(T* host_dst, const T* src, std::int64_t n) {
    Api::copy_to_host(host_dst, src, static_cast<std::size_t>(n) * sizeof(T));
  }
  static void synchronize() { Api::synchronize(); }
  static constexpr auto dropout_mask_fill = Api::dropout_mask_fill;
};

}  // namespace eth
