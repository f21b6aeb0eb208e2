// The emulated device's arena and its page protection (runtime.h). One mutex guards the regions,
// the allocation maps and the scope count; every operation under it is O(log allocations) or
// one mprotect per region, so the device layer costs microseconds per call on a tiny model.
#include "kernels/emulated/runtime.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <exception>
#include <iterator>
#include <map>
#include <mutex>
#include <vector>

#include "kernels/cpu/threads.h"

namespace eth::emu {
namespace {

constexpr std::size_t kAlign = 256;               // cudaMalloc's alignment
constexpr std::size_t kPage = std::size_t{2} << 20;  // protect and release in huge pages
constexpr std::size_t kRegionBytes = std::size_t{4} << 30;  // virtual; backed only when used

std::size_t round_up(std::size_t x, std::size_t to) { return (x + to - 1) / to * to; }

// One mmap'd region. [base, base + top) is carved (allocations and free holes below top);
// [base, base + open) is PROT_READ|WRITE while a scope is open, open = 0 otherwise.
struct Region {
  char* base = nullptr;
  std::size_t size = 0;
  std::size_t top = 0;
  std::size_t open = 0;
  std::map<std::size_t, std::size_t> holes;  // offset -> bytes, coalesced, all below top
};

struct Live {
  std::size_t region;
  std::size_t bytes;      // carved (aligned)
  std::size_t requested;  // what alloc was asked for: the bounds of the argument checks
};

class Device {
 public:
  void enter() {
    const std::lock_guard lock(mu_);
    if (depth_ == 0) {
      for (Region& r : regions_) open_to(r, r.top);
    }
    ++depth_;
  }

  void leave() noexcept {
    const std::lock_guard lock(mu_);
    if (--depth_ > 0) return;
    for (Region& r : regions_) {
      if (r.open > 0 && mprotect(r.base, r.open, PROT_NONE) != 0) std::terminate();
      r.open = 0;
    }
  }

  void* alloc(std::size_t bytes) {
    if (bytes == 0) return nullptr;
    const std::size_t n = round_up(bytes, kAlign);
    const std::lock_guard lock(mu_);
    for (std::size_t i = 0; i < regions_.size(); ++i) {
      if (char* p = carve(i, n, bytes)) return p;
    }
    Region r;
    r.size = std::max(kRegionBytes, round_up(n, kPage));
    r.base = reserve(r.size);
    regions_.push_back(std::move(r));
    return carve(regions_.size() - 1, n, bytes);
  }

  void free(void* p) noexcept {
    if (p == nullptr) return;
    const std::lock_guard lock(mu_);
    const auto it = live_.find(static_cast<char*>(p));
    if (it == live_.end()) std::terminate();  // not ours: a double free or a host pointer
    Region& r = regions_[it->second.region];
    std::size_t off = static_cast<std::size_t>(static_cast<char*>(p) - r.base);
    std::size_t n = it->second.bytes;
    allocated_ -= n;
    live_.erase(it);
    // Coalesce with the holes on either side.
    auto next = r.holes.lower_bound(off);
    if (next != r.holes.end() && next->first == off + n) {
      n += next->second;
      next = r.holes.erase(next);
    }
    if (next != r.holes.begin()) {
      const auto prev = std::prev(next);
      if (prev->first + prev->second == off) {
        off = prev->first;
        n += prev->second;
        r.holes.erase(prev);
      }
    }
    release_pages(r, off, n);
    if (off + n == r.top) {
      r.top = off;  // the carved extent shrinks; open pages stay open until the scope closes
    } else {
      r.holes.emplace(off, n);
    }
  }

  bool contains(const void* p, std::size_t bytes) const {
    const std::lock_guard lock(mu_);
    return find(static_cast<const char*>(p), bytes);
  }

  std::size_t allocated() const {
    const std::lock_guard lock(mu_);
    return allocated_;
  }

  std::size_t reserved() const {
    const std::lock_guard lock(mu_);
    std::size_t s = 0;
    for (const Region& r : regions_) s += r.size;
    return s;
  }

 private:
  // n bytes from region i's holes (first fit) or its top; nullptr when it has no room.
  char* carve(std::size_t i, std::size_t n, std::size_t requested) {
    Region& r = regions_[i];
    std::size_t off = r.size;
    for (auto h = r.holes.begin(); h != r.holes.end(); ++h) {
      if (h->second < n) continue;
      off = h->first;
      const std::size_t rest = h->second - n;
      r.holes.erase(h);
      if (rest > 0) r.holes.emplace(off + n, rest);
      break;
    }
    if (off == r.size) {
      if (r.size - r.top < n) return nullptr;
      off = r.top;
      r.top += n;
      if (depth_ > 0) open_to(r, r.top);  // a scope is open: the new block must be reachable
    }
    char* p = r.base + off;
    live_.emplace(p, Live{i, n, requested});
    allocated_ += n;
    return p;
  }

  // size bytes of PROT_NONE address space on a huge-page boundary, asked to be backed by huge
  // pages: the scopes' mprotect calls then touch 512 times fewer page-table entries.
  static char* reserve(std::size_t size) {
    void* m = mmap(nullptr, size + kPage, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (m == MAP_FAILED) {
      throw EmuError("[emulated] alloc: cannot reserve " + std::to_string(size) +
                     " bytes of device memory: " + std::strerror(errno));
    }
    char* raw = static_cast<char*>(m);
    char* base = raw + (kPage - reinterpret_cast<std::uintptr_t>(raw) % kPage) % kPage;
    if (base > raw) munmap(raw, static_cast<std::size_t>(base - raw));
    const std::size_t tail = static_cast<std::size_t>(raw + size + kPage - (base + size));
    if (tail > 0) munmap(base + size, tail);
    madvise(base, size, MADV_HUGEPAGE);  // a hint: without it the protection still holds
    return base;
  }

  void open_to(Region& r, std::size_t top) {
    const std::size_t want = std::min(r.size, round_up(top, kPage));
    if (want <= r.open) return;
    if (mprotect(r.base + r.open, want - r.open, PROT_READ | PROT_WRITE) != 0) {
      throw EmuError(std::string("[emulated] cannot open device pages: ") + std::strerror(errno));
    }
    r.open = want;
  }

  // Gives the whole huge pages inside a freed range back to the host (they read as zeros when
  // carved again, which no caller relies on: device memory is uninitialized, as on a GPU).
  static void release_pages(Region& r, std::size_t off, std::size_t n) {
    const std::size_t a = round_up(off, kPage), b = (off + n) / kPage * kPage;
    if (b > a) madvise(r.base + a, b - a, MADV_DONTNEED);
  }

  bool find(const char* p, std::size_t bytes) const {
    auto it = live_.upper_bound(p);
    if (it == live_.begin()) return false;
    --it;
    const char* end = it->first + it->second.requested;
    return p >= it->first && p <= end && bytes <= static_cast<std::size_t>(end - p);
  }

  mutable std::mutex mu_;
  std::vector<Region> regions_;
  std::map<const char*, Live> live_;  // allocation start -> where and how big (aligned size)
  std::size_t allocated_ = 0;
  int depth_ = 0;
};

// Never destroyed: thread ranks and static DeviceBuffers may free after main returns.
Device& device() {
  static Device* d = new Device;
  return *d;
}

void require_device(const char* fn, const void* p, std::size_t bytes) {
  if (!device().contains(p, bytes)) {
    throw EmuError(std::string("[emulated] ") + fn + ": " + std::to_string(bytes) +
                   " bytes at a pointer that is not inside one device allocation");
  }
}

void require_host(const char* fn, const void* p, std::size_t bytes) {
  if (device().contains(p, 0)) {
    throw EmuError(std::string("[emulated] ") + fn + ": the host side (" +
                   std::to_string(bytes) + " bytes) is device memory");
  }
}

}  // namespace

DeviceScope::DeviceScope() { device().enter(); }
DeviceScope::~DeviceScope() { device().leave(); }

bool compiled() { return true; }
int device_count() { return 1; }
std::string unavailable_reason() { return {}; }

DeviceInfo device_info() {
  DeviceInfo info;
  info.name = "ETH emulated GPU (host CPU)";
  info.multiprocessors = cpu::max_threads();
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  info.memory_bytes = pages > 0 && page > 0 ? static_cast<double>(pages) * page : 0.0;
  info.memory_free_bytes =
      std::max(0.0, info.memory_bytes - static_cast<double>(device().allocated()));
  return info;
}

void set_device(int dev) {
  if (dev != 0) {
    throw EmuError("[emulated] set_device(" + std::to_string(dev) +
                   "): the emulated device is device 0, the only one");
  }
}

void* alloc(std::size_t bytes) { return device().alloc(bytes); }
void free(void* p) noexcept { device().free(p); }

void copy_to_device(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  require_device("copy_to_device", dst, bytes);
  require_host("copy_to_device", src, bytes);
  const DeviceScope scope;
  std::memcpy(dst, src, bytes);
}

void copy_to_host(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  require_device("copy_to_host", src, bytes);
  require_host("copy_to_host", dst, bytes);
  const DeviceScope scope;
  std::memcpy(dst, src, bytes);
}

void copy_on_device(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  require_device("copy_on_device", dst, bytes);
  require_device("copy_on_device", src, bytes);
  const DeviceScope scope;
  std::memmove(dst, src, bytes);
}

void memset_zero(void* p, std::size_t bytes) {
  if (bytes == 0) return;
  require_device("memset_zero", p, bytes);
  const DeviceScope scope;
  std::memset(p, 0, bytes);
}

void synchronize() {}

bool is_device_memory(const void* p, std::size_t bytes) { return device().contains(p, bytes); }
std::size_t allocated_bytes() { return device().allocated(); }
std::size_t reserved_bytes() { return device().reserved(); }

}  // namespace eth::emu
