// The emulated device as one type: EmulatedApi, the shared DeviceApi (kernels/device_api.inc)
// over eth::emu with the emulated device's error type, so the trainer's GPU kernel set is written
// once over an Api (GpuKernels<EmulatedApi>, GpuKernels<CudaApi>). The emulated-only functions
// (is_device_memory, allocated_bytes, reserved_bytes, DeviceScope) are not listed: a GPU has
// none of them.
#pragma once

#include <cstdint>

#include "kernels/emulated/kernels.h"
#include "kernels/emulated/runtime.h"

namespace eth::emu {

namespace api_backend = ::eth::emu;  // the namespace device_api.inc's members are taken from
#include "kernels/device_api.inc"

}  // namespace eth::emu

namespace eth {

struct EmulatedApi : emu::DeviceApi {
  using Error = emu::EmuError;  // cuda::CudaError
};

}  // namespace eth
