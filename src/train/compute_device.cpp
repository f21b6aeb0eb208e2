// See compute_device.h.
#include "train/compute_device.h"

#include <cstring>
#include <utility>

#include "core/error.h"
#include "kernels/cuda/api.h"
#include "kernels/emulated/api.h"
#include "train/gpu_kernels.h"
#include "train/state_backend.h"

namespace eth {

const char* compute_device_name(ComputeDevice d) {
  switch (d) {
    case ComputeDevice::Cpu:
      return "cpu";
    case ComputeDevice::Emulated:
      return "emulated";
    case ComputeDevice::Cuda:
      return "cuda";
  }
  return "?";
}

bool is_gpu_device(ComputeDevice d) { return d != ComputeDevice::Cpu; }

MakeStateBackend state_backend_maker(ComputeDevice d) {
  switch (d) {
    case ComputeDevice::Cpu:
      return &make_cpu_state_backend;
    case ComputeDevice::Emulated:
      return &make_state_backend<GpuKernels<EmulatedApi>>;
    case ComputeDevice::Cuda:
      return &make_state_backend<GpuKernels<CudaApi>>;
  }
  return &make_cpu_state_backend;
}

std::string compute_device_refusal(ComputeDevice d, Precision precision) {
  if (!is_gpu_device(d)) return "";
  if (precision != Precision::Bf16) {
    return std::string(compute_device_name(d)) +
           " trains in bf16 only (bf16 activations and weight copy, fp32 masters, moments and "
           "gradients: the GPU kernel set's types), not " +
           std::string(precision_name(precision));
  }
  if (d == ComputeDevice::Cuda && (!cuda::compiled() || cuda::device_count() == 0)) {
    return "cuda cannot run here: " + cuda::unavailable_reason();
  }
  return "";
}

DeviceMemoryInfo device_memory(ComputeDevice d) {
  DeviceMemoryInfo m;
  switch (d) {
    case ComputeDevice::Cpu:
      m.name = "cpu";
      return m;
    case ComputeDevice::Emulated: {
      const emu::DeviceInfo i = emu::device_info();
      m.name = i.name;
      m.total_bytes = i.memory_bytes;
      m.in_use_bytes = static_cast<double>(emu::allocated_bytes());
      m.free_bytes = i.memory_free_bytes;
      return m;
    }
    case ComputeDevice::Cuda: {
      const cuda::DeviceInfo i = cuda::device_info();
      m.name = i.name;
      m.total_bytes = i.memory_bytes;
      m.free_bytes = i.memory_free_bytes;
      m.in_use_bytes = i.memory_bytes - i.memory_free_bytes;
      return m;
    }
  }
  return m;
}

std::string gpu_device_type_preset(const std::string& gpu_name) {
  // Longest names first would matter only if one contained another; none of these does.
  static const char* const kPresets[][2] = {
      {"H200", "H200"}, {"H100", "H100"}, {"A100", "A100"}, {"RTX 3090", "RTX3090"}};
  for (const auto& [needle, preset] : kPresets) {
    if (gpu_name.find(needle) != std::string::npos) return preset;
  }
  return "";
}

void synchronize_device(ComputeDevice d) {
  if (d == ComputeDevice::Emulated) emu::synchronize();
  if (d == ComputeDevice::Cuda) cuda::synchronize();
}

DeviceBytes::DeviceBytes(ComputeDevice d, std::size_t bytes) : device_(d), bytes_(bytes) {
  if (bytes == 0) return;
  switch (d) {
    case ComputeDevice::Cpu:
      p_ = new std::byte[bytes]();
      return;
    case ComputeDevice::Emulated:
      p_ = static_cast<std::byte*>(emu::alloc(bytes));
      emu::memset_zero(p_, bytes);
      return;
    case ComputeDevice::Cuda:
      p_ = static_cast<std::byte*>(cuda::alloc(bytes));
      cuda::memset_zero(p_, bytes);
      return;
  }
}

DeviceBytes::~DeviceBytes() { release(); }

DeviceBytes::DeviceBytes(DeviceBytes&& o) noexcept
    : device_(o.device_),
      p_(std::exchange(o.p_, nullptr)),
      bytes_(std::exchange(o.bytes_, 0)) {}

DeviceBytes& DeviceBytes::operator=(DeviceBytes&& o) noexcept {
  if (this != &o) {
    release();
    device_ = o.device_;
    p_ = std::exchange(o.p_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void DeviceBytes::release() noexcept {
  if (p_ == nullptr) return;
  switch (device_) {
    case ComputeDevice::Cpu:
      delete[] p_;
      break;
    case ComputeDevice::Emulated:
      emu::free(p_);
      break;
    case ComputeDevice::Cuda:
      cuda::free(p_);
      break;
  }
  p_ = nullptr;
  bytes_ = 0;
}

void DeviceBytes::upload(const void* host_src, std::size_t bytes) {
  ETH_CHECK(bytes <= bytes_, "DeviceBytes::upload: more bytes than the allocation holds");
  if (bytes == 0) return;
  switch (device_) {
    case ComputeDevice::Cpu:
      std::memcpy(p_, host_src, bytes);
      return;
    case ComputeDevice::Emulated:
      emu::copy_to_device(p_, host_src, bytes);
      return;
    case ComputeDevice::Cuda:
      cuda::copy_to_device(p_, host_src, bytes);
      return;
  }
}

}  // namespace eth
