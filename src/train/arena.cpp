// Arena mapping: mmap, madvise(MADV_HUGEPAGE), then touch every page once so no step pays a
// page fault (see /work/shared/notes/machine-figures.md: 0.2-0.34 GB/s first touch on 4 KiB
// pages versus 4-12 GB/s with transparent huge pages).
#include "train/arena.h"

#include <sys/mman.h>

#include <cstring>
#include <string>
#include <utility>

#include "kernels/cpu/threads.h"

namespace eth {

Arena::Arena(std::size_t bytes) : capacity_(bytes) {
  if (bytes == 0) return;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ETH_CHECK(p != MAP_FAILED,
            "arena: cannot map " + std::to_string(bytes) + " bytes: " + std::strerror(errno));
  // Advice only: a kernel without THP still gives working (slower to fault) memory.
  (void)::madvise(p, bytes, MADV_HUGEPAGE);
  base_ = static_cast<unsigned char*>(p);
  // Pre-fault: write one byte per 4 KiB page (zero, which the mapping already holds), on every
  // thread: each fault has the kernel zero a whole (huge) page, the slow part of start-up.
  cpu::prefault_zero_pages(base_, bytes);
}

Arena::Arena(Arena&& o) noexcept { *this = std::move(o); }

Arena& Arena::operator=(Arena&& o) noexcept {
  if (this != &o) {
    release();
    base_ = std::exchange(o.base_, nullptr);
    capacity_ = std::exchange(o.capacity_, 0);
    used_ = std::exchange(o.used_, 0);
  }
  return *this;
}

Arena::~Arena() { release(); }

void Arena::release() noexcept {
  if (base_ != nullptr) ::munmap(base_, capacity_);
  base_ = nullptr;
}

}  // namespace eth
