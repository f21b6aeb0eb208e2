// See compute_device.h.
#include "train/compute_device.h"

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

}  // namespace eth
