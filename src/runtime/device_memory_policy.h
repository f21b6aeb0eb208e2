// Where the distributed runtime's own buffers live and how it touches them: the activation and
// gradient messages between stages (stage_runner.h), the packing buffers of gradient
// collectives that are not one range of the layout, and the padding of an in-place device-wise
// buffer (grad_sync.h). The runtime is written once over this policy, chosen from the run's
// ComputeDevice as the model state's backend is (train/state_backend.h): host memory for the
// CPU sets (plain memcpy / memset, exactly what the runtime did before the GPU sets), device
// memory for GpuKernels<Api> (one Api::alloc per buffer, Api's copies), so on a GPU set no
// runtime line reads or writes device memory from the host.
//
// It also gives the communicator layer the device's copy and reduction (comm/device_memory.h),
// which LocalWorld (ranks as threads sharing the device: messages and reductions device to
// device) and the host-staged communicator (MPI on the emulated device: explicit downloads and
// uploads) use. A GPU per rank uses NCCL (comm/nccl/nccl_comm.h), which takes device buffers itself.
#pragma once

#include <cstddef>
#include <utility>

#include "comm/device_memory.h"
#include "train/compute_device.h"

namespace eth {

class RuntimeMemory {
 public:
  virtual ~RuntimeMemory() = default;
  virtual bool on_device() const = 0;
  virtual void* alloc(std::size_t bytes) const = 0;  // zeroed
  virtual void free(void* p) const = 0;
  virtual void zero(void* p, std::size_t bytes) const = 0;
  // dst = src within this memory (dst == src is nothing to do); queued on the calling thread's
  // stream on a GPU, as the kernels are.
  virtual void copy(void* dst, const void* src, std::size_t bytes) const = 0;
  // The table communicators use (comm/device_memory.h); null for host memory.
  virtual const DeviceMemoryOps* comm_ops() const = 0;
};

// The policy of a run on `d` (a process-wide object, stateless).
const RuntimeMemory& runtime_memory(ComputeDevice d);

// A buffer of `bytes` in a RuntimeMemory, zeroed; move-only.
class RuntimeBuffer {
 public:
  RuntimeBuffer() = default;
  RuntimeBuffer(const RuntimeMemory& memory, std::size_t bytes)
      : memory_(&memory), size_(bytes), data_(bytes ? memory.alloc(bytes) : nullptr) {}
  RuntimeBuffer(RuntimeBuffer&& o) noexcept { *this = std::move(o); }
  RuntimeBuffer& operator=(RuntimeBuffer&& o) noexcept {
    if (this != &o) {
      release();
      memory_ = std::exchange(o.memory_, nullptr);
      size_ = std::exchange(o.size_, 0);
      data_ = std::exchange(o.data_, nullptr);
    }
    return *this;
  }
  RuntimeBuffer(const RuntimeBuffer&) = delete;
  RuntimeBuffer& operator=(const RuntimeBuffer&) = delete;
  ~RuntimeBuffer() { release(); }

  std::byte* data() const { return static_cast<std::byte*>(data_); }
  std::size_t size() const { return size_; }  // bytes
  bool empty() const { return size_ == 0; }

 private:
  void release() {
    if (data_ != nullptr) memory_->free(data_);
    data_ = nullptr;
  }
  const RuntimeMemory* memory_ = nullptr;
  std::size_t size_ = 0;
  void* data_ = nullptr;
};

}  // namespace eth
