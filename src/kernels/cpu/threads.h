// The OpenMP thread count of the CPU kernels (and of oneDNN, which shares the libgomp pool), for
// callers outside kernels/ that must not include omp.h themselves (STYLE.md: OpenMP stays in
// kernels/cpu). Process-wide, like omp_set_num_threads: set it before work, not during.
#pragma once

#include <cstddef>

namespace eth::cpu {

int max_threads();            // threads the next parallel region will use
void set_max_threads(int n);  // n >= 1 (ETH_CHECKed)

// Writes a zero byte at every 4 KiB page of [p, p + bytes), pages split between the threads:
// the first-touch faults (and the kernel's zeroing of each huge page) run in parallel.
// For freshly mapped, zero-filled memory only (it writes zeros).
void prefault_zero_pages(unsigned char* p, std::size_t bytes);

}  // namespace eth::cpu
