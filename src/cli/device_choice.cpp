// See device_choice.h.
#include "cli/device_choice.h"

#include "core/error.h"
#include "kernels/cuda/runtime.h"

namespace eth::cli {

const std::vector<std::string> kDeviceNames = {"cpu", "emulated", "cuda"};

const char* const kDeviceHelp =
    "cpu (default), emulated (the GPU trainer on a host-emulated GPU: device memory the host "
    "cannot touch, bf16 only; for CI), or cuda (the GPU trainer on the CUDA kernels, bf16 only; "
    "refused with the reason where there is no CUDA build or no GPU). eth train (with or "
    "without --plan) and eth launch run all three; eth profile --measure runs on cpu only so "
    "far (docs/gpu.md)";

Device choose_device(const std::string& flag, const std::string& flag_name) {
  if (flag.empty() || flag == "cpu") return Device::Cpu;
  if (flag == "emulated") return Device::Emulated;
  if (flag != "cuda") {
    throw InputError("cli", flag_name, "", "expected cpu, emulated or cuda, got '" + flag + "'");
  }
  if (!cuda::compiled() || cuda::device_count() == 0) {
    throw InputError("cli", flag_name, "",
                     "cuda cannot run here: " + cuda::unavailable_reason() +
                         "; use --device cpu (or emulated, the same trainer on the CPU)");
  }
  return Device::Cuda;
}

void refuse_gpu_device(Device d, const std::string& flag_name, const std::string& what) {
  if (d == Device::Cpu) return;
  const std::string name = d == Device::Emulated ? "emulated" : "cuda";
  throw InputError("cli", flag_name, "",
                   name + ": " + what +
                       " on a GPU device is not built yet (single-process eth train runs on "
                       "emulated and cuda: docs/gpu.md, \"Not built yet\"); use --device cpu");
}

Device choose_cpu_device(const std::string& flag, const std::string& flag_name,
                         const std::string& what) {
  // emulated is refused before cuda's availability is asked: both would be refused anyway.
  if (flag == "emulated") refuse_gpu_device(Device::Emulated, flag_name, what);
  const Device d = choose_device(flag, flag_name);
  refuse_gpu_device(d, flag_name, what);
  return d;
}

ComputeDevice compute_device(Device d) {
  switch (d) {
    case Device::Cpu:
      return ComputeDevice::Cpu;
    case Device::Emulated:
      return ComputeDevice::Emulated;
    case Device::Cuda:
      return ComputeDevice::Cuda;
  }
  return ComputeDevice::Cpu;
}

PrecisionChoice choose_device_precision(Device d, const std::string& precision_flag,
                                        const std::string& precision_flag_name) {
  if (d == Device::Cpu) return choose_precision(precision_flag, precision_flag_name);
  const std::string name = compute_device_name(compute_device(d));
  if (!precision_flag.empty() && precision_flag != "bf16") {
    throw InputError("cli", precision_flag_name, "",
                     "--device " + name + " trains in bf16 only (bf16 activations and weight "
                     "copy, fp32 master weights, moments and gradients), got '" +
                         precision_flag + "'; use --precision bf16 or leave it out");
  }
  PrecisionChoice c;
  c.precision = Precision::Bf16;
  c.line = "precision bf16 (" + std::string(precision_flag.empty() ? "default" : "asked") +
           ": the GPU kernel set on --device " + name + " trains in bf16)";
  return c;
}

}  // namespace eth::cli
