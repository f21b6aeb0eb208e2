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

}  // namespace eth
