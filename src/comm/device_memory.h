// How a communicator reaches buffers that live in a device's memory, without depending on any
// device library: the runtime hands a table of the device's own copy and reduction (built over a
// kernel set's Api, runtime/device_memory_policy.h) to
//   - LocalWorld (local/local_comm.h): ranks as threads sharing one device; every buffer of its
//     messages, all-reduces and broadcasts is then device memory, moved and reduced by the
//     device itself (device to device; on the emulated device inside its DeviceScope, so the
//     host never reads device memory);
//   - make_host_staged_communicator (staged_comm.h): a host communicator (MPI) carrying device
//     buffers through host copies made explicitly (download before, upload after).
// Gathers stay host memory on every communicator (timings, counters), as with NCCL.
#pragma once

#include <cstddef>

#include "comm/communicator.h"

namespace eth {

struct DeviceMemoryOps {
  const char* name = "";  // "emulated", "cuda": for error messages
  // dst = src, `bytes` of device memory each; done and visible to every thread on return.
  void (*copy)(void* dst, const void* src, std::size_t bytes) = nullptr;
  // acc = acc (op) x element-wise, `count` elements of `type` (F32 or F64), device memory; done
  // on return.
  void (*reduce)(void* acc, const void* x, std::size_t count, DType type, ReduceOp op) = nullptr;
  // Device memory to host memory and back; done on return.
  void (*download)(void* host, const void* device, std::size_t bytes) = nullptr;
  void (*upload)(void* device, const void* host, std::size_t bytes) = nullptr;
  // Waits for the work the calling thread queued on its stream: a buffer it wrote is complete
  // before another thread reads it.
  void (*synchronize)() = nullptr;
};

}  // namespace eth
