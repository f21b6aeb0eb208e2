// See device_choice.h.
#include "cli/device_choice.h"

#include "core/error.h"
#include "kernels/cuda/runtime.h"

namespace eth::cli {

const char* const kDeviceHelp =
    "cpu (default), or cuda: checked before any work; GPU training is not built yet, so cuda "
    "says why it cannot run here (a build without CUDA, no GPU, or the missing GPU trainer: "
    "docs/gpu.md)";

Device choose_device(const std::string& flag, const std::string& flag_name) {
  if (flag.empty() || flag == "cpu") return Device::Cpu;
  if (flag != "cuda") {
    throw InputError("cli", flag_name, "", "expected cpu or cuda, got '" + flag + "'");
  }
  if (!cuda::compiled() || cuda::device_count() == 0) {
    throw InputError("cli", flag_name, "",
                     "cuda cannot run here: " + cuda::unavailable_reason() + "; use --device cpu");
  }
  throw InputError("cli", flag_name, "",
                   "cuda: this machine has a GPU, but GPU training is not built yet (the CUDA "
                   "kernels are, the stage computation on them is not: docs/gpu.md); use "
                   "--device cpu");
}

}  // namespace eth::cli
