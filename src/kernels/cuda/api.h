// The CUDA backend as one type: CudaApi, the shared DeviceApi (kernels/device_api.inc: every
// function of kernels.h and the memory functions of runtime.h, under their own names) over
// eth::cuda, with CUDA's error type, for train/gpu_kernels.h's GpuKernels<CudaApi> (the stage,
// the model state and the optimizer on the GPU). Written once over such an Api, the GPU kernel
// set needs nothing CUDA-specific: the host-emulated device (kernels/emulated/) provides an
// EmulatedApi from the same list. A plain C++ header.
#pragma once

#include <cstdint>

#include "kernels/cuda/kernels.h"
#include "kernels/cuda/runtime.h"

namespace eth::cuda {

namespace api_backend = ::eth::cuda;  // the namespace device_api.inc's members are taken from
#include "kernels/device_api.inc"

}  // namespace eth::cuda

namespace eth {

struct CudaApi : cuda::DeviceApi {
  using Error = cuda::CudaError;
};

}  // namespace eth
