// Which kernel set a single-process run computes on: the CPU sets of its precision, the
// host-emulated GPU (GpuKernels<EmulatedApi>, kernels/emulated/), or CUDA (GpuKernels<CudaApi>).
// The two GPU sets share every line of the trainer (the stage, the model state in device
// memory, the optimizer on the device); only the Api differs. GPU sets train in bf16 only
// (bf16 activations and weight copy, fp32 masters, moments and gradients), as the CUDA kernels
// do. A library header: the CLI maps --device onto it (cli/device_choice.h).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "core/precision.h"
#include "train/model_state.h"

namespace eth {

enum class ComputeDevice { Cpu, Emulated, Cuda };

const char* compute_device_name(ComputeDevice d);  // "cpu", "emulated", "cuda"
bool is_gpu_device(ComputeDevice d);                // emulated or cuda

// The model state's backend for a run on `d` (ModelState's make_backend): the CPU set of the
// precision, or the device's GpuKernels.
MakeStateBackend state_backend_maker(ComputeDevice d);

// Empty when `d` can train in `precision` in this build and on this machine; otherwise the
// reason in words (a GPU set and fp32; cuda without a build or a GPU).
std::string compute_device_refusal(ComputeDevice d, Precision precision);

// The memory of a GPU device as its own allocator and driver report it (what a stage, a model
// state and the memory checks draw on), bytes. Cuda: cudaMemGetInfo of the calling thread's
// device, so in_use counts the context, cuBLASLt's workspaces and every allocation of every
// process on the GPU. Emulated: its arena's allocator (in_use = the bytes allocated now; total
// = the host's physical memory, which the emulated device's pages come from). Cpu: all zero (the
// host's memory is the CLI's to read: cli/resources.h). Throws (CudaError) for cuda without a
// GPU; ask compute_device_refusal first.
struct DeviceMemoryInfo {
  std::string name;  // "NVIDIA H200", "ETH emulated GPU (host CPU)", "cpu"
  double total_bytes = 0;
  double free_bytes = 0;
  double in_use_bytes = 0;
};
DeviceMemoryInfo device_memory(ComputeDevice d);

// The device type preset (cluster/cluster_spec.h) of a GPU by the name its driver reports
// ("NVIDIA H200" -> "H200", "NVIDIA H100 80GB HBM3" -> "H100", also A100 and RTX3090); "" for a
// GPU without a preset (the caller then asks for the type by name).
std::string gpu_device_type_preset(const std::string& gpu_name);

// Waits until everything the calling thread queued on `d` is done (cuda: its stream; the
// emulated device and the CPU run every call to completion, so nothing to wait for). Timing a
// GPU op means synchronizing before reading the clock.
void synchronize_device(ComputeDevice d);

// One allocation on `d` (device memory on a GPU, host memory on the CPU) of `bytes`, zeroed, for
// callers that hand a stage device pointers of their own (the profiler's boundary tensors).
// Move-only; freed when it goes.
class DeviceBytes {
 public:
  DeviceBytes() = default;
  DeviceBytes(ComputeDevice d, std::size_t bytes);
  ~DeviceBytes();
  DeviceBytes(DeviceBytes&& o) noexcept;
  DeviceBytes& operator=(DeviceBytes&& o) noexcept;
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;

  std::byte* data() const { return p_; }
  std::size_t size() const { return bytes_; }
  // Copies `bytes` (at most size()) from host memory to the start of the allocation.
  void upload(const void* host_src, std::size_t bytes);

 private:
  void release() noexcept;
  ComputeDevice device_ = ComputeDevice::Cpu;
  std::byte* p_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace eth
