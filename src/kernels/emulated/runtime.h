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

// The shared runtime interface (kernels/device_runtime.inc, as cuda/runtime.h's). Here:
// compiled() is always true, device_count() 1 and unavailable_reason() "" (the emulated device is
// built into every build); DeviceInfo's name is "ETH emulated GPU (host CPU)", its compute
// capability 0.0, its multiprocessors the OpenMP threads the kernels use, its memory the host's
// physical memory (free: that less the device memory allocated now); only device 0 exists
// (set_device: EmuError for any other); alloc and free use the arena, and free() of a pointer
// alloc did not return is our bug (std::terminate, as free is noexcept); each copy checks that
// its device side lies inside one allocation (EmuError otherwise) and that its host side is not
// device memory.
#include "kernels/device_runtime.inc"

// Whether [p, p + bytes) lies inside one live allocation (bytes = 0: p is inside or one past
// the end of one). For the device layer's argument checks and for tests.
bool is_device_memory(const void* p, std::size_t bytes = 0);
// Device bytes allocated now (alignment included), and the virtual bytes the arena holds.
std::size_t allocated_bytes();
std::size_t reserved_bytes();

}  // namespace eth::emu
