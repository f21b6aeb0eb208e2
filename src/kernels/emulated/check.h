// The emulated kernels' argument checks (internal to kernels/emulated/): a device pointer must be
// device memory, a host result must not be, and a dropout probability must be one the CUDA
// kernels accept. Each failure is an EmuError naming the kernel.
#pragma once

#include <initializer_list>
#include <string>

#include "kernels/emulated/runtime.h"

namespace eth::emu::detail {

// Every non-null pointer is inside a device allocation (only its first byte is checked: the
// kernels' extents follow from their shapes, which the CPU kernels trust too).
inline void device_args(const char* fn, std::initializer_list<const void*> ptrs) {
  int i = 0;
  for (const void* p : ptrs) {
    if (p != nullptr && !is_device_memory(p)) {
      throw EmuError(std::string("[emulated] ") + fn + ": pointer argument " +
                     std::to_string(i) + " is not device memory");
    }
    ++i;
  }
}

inline void host_arg(const char* fn, const void* p) {
  if (p == nullptr || is_device_memory(p)) {
    throw EmuError(std::string("[emulated] ") + fn +
                   ": the loss must be a host double, as on the GPU");
  }
}

inline void dropout_p(const char* fn, float p) {
  if (!(p >= 0.0f && p < 1.0f)) {
    throw EmuError(std::string("[emulated] ") + fn + ": dropout probability must be in [0, 1)");
  }
}

}  // namespace eth::emu::detail
