// One big allocation per run, carved into aligned buffers: on these machines a first-touch page
// fault costs 12-20 us per 4 KiB page, so every parameter, gradient, optimizer and activation
// buffer is taken from an arena that is mapped once, advised to use huge pages and pre-faulted,
// then reused every step. Not a general allocator: nothing is ever freed before the arena dies.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/error.h"

namespace eth {

inline constexpr std::size_t kArenaAlign = 64;  // one cache line, an AVX-512 vector

// Bytes an arena needs for n elements of T (rounded up to the alignment).
template <typename T>
constexpr std::size_t arena_bytes(std::int64_t n) {
  const std::size_t b = static_cast<std::size_t>(n) * sizeof(T);
  return (b + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
}

// Sums buffer sizes before the arena exists (plan, then allocate).
class ArenaSize {
 public:
  template <typename T>
  void add(std::int64_t n) {
    bytes_ += arena_bytes<T>(n);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  std::size_t bytes_ = 0;
};

// Move-only owner of an anonymous mapping of `bytes`, zero-filled and pre-faulted.
class Arena {
 public:
  Arena() = default;
  explicit Arena(std::size_t bytes);
  Arena(Arena&& o) noexcept;
  Arena& operator=(Arena&& o) noexcept;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  ~Arena();

  // n elements of T, 64-byte aligned, zero on first use. ETH_CHECKs the capacity.
  template <typename T>
  T* take(std::int64_t n) {
    const std::size_t b = arena_bytes<T>(n);
    ETH_CHECK(used_ + b <= capacity_, "arena overflow: its size was planned too small");
    T* p = reinterpret_cast<T*>(base_ + used_);
    used_ += b;
    return p;
  }
  std::size_t capacity() const { return capacity_; }
  std::size_t used() const { return used_; }

 private:
  void release() noexcept;
  unsigned char* base_ = nullptr;
  std::size_t capacity_ = 0;
  std::size_t used_ = 0;
};

}  // namespace eth
