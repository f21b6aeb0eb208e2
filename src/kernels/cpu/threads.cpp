// OpenMP thread count. See threads.h.
#include "kernels/cpu/threads.h"

#include <omp.h>

#include <algorithm>

#include "core/error.h"

namespace eth::cpu {

int max_threads() { return omp_get_max_threads(); }

void set_max_threads(int n) {
  ETH_CHECK(n >= 1, "set_max_threads: need at least one thread");
  omp_set_num_threads(n);
}

void prefault_zero_pages(unsigned char* p, std::size_t bytes) {
  constexpr std::size_t kPage = 4096;
  constexpr std::size_t kHuge = std::size_t{2} << 20;  // one transparent huge page per task
  const std::size_t chunks = (bytes + kHuge - 1) / kHuge;
#pragma omp parallel for schedule(dynamic, 8) if (chunks > 8)
  for (std::size_t c = 0; c < chunks; ++c) {
    const std::size_t end = std::min(bytes, (c + 1) * kHuge);
    for (std::size_t off = c * kHuge; off < end; off += kPage) p[off] = 0;
  }
}

}  // namespace eth::cpu
