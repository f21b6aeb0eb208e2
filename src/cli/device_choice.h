// `--device cpu|emulated|cuda` of `eth train`, `eth launch` and `eth profile --measure`: which
// kernels a run uses, decided before any work.
//   cpu: the CPU kernel sets (fp32 or bf16).
//   emulated: the GPU trainer on the host-emulated GPU (kernels/emulated/: device memory the
//     host cannot touch, the CUDA set's semantics on the CPU), bf16 only; it exists so the GPU
//     trainer's every path runs in CI.
//   cuda: the same trainer on the CUDA kernels, bf16 only. Refused, before any file is read or
//     written, where it cannot run, with the reason in words (a build without CUDA: rebuild with
//     the toolkit; no GPU: what the driver reported).
// `eth train` (single-process and --plan) and `eth launch` run all three; `eth profile --measure`
// runs on the CPU only so far and refuses emulated and cuda with that reason (docs/gpu.md, "Not
// built yet").
#pragma once

#include <string>
#include <vector>

#include "cli/precision_choice.h"
#include "train/compute_device.h"

namespace eth::cli {

enum class Device { Cpu, Emulated, Cuda };

// The flag's accepted values, for CLI11's IsMember.
extern const std::vector<std::string> kDeviceNames;

// `flag`: "cpu", "emulated" or "cuda" ("" is cpu). Throws InputError naming `flag_name` for any
// other value, and for cuda where it cannot run here (with the reason).
Device choose_device(const std::string& flag, const std::string& flag_name);

// choose_device for a command that runs on the CPU only so far (`what`: "eth launch"): emulated
// and cuda are refused, naming `flag_name`, as not built yet for it.
Device choose_cpu_device(const std::string& flag, const std::string& flag_name,
                         const std::string& what);
// The same refusal for a device already chosen.
void refuse_gpu_device(Device d, const std::string& flag_name, const std::string& what);

ComputeDevice compute_device(Device d);

// The precision of a run on `d`: choose_precision's on the CPU; on a GPU device bf16 (the
// default, and the only one: `precision_flag` "fp32" is an InputError naming `precision_flag_name`).
PrecisionChoice choose_device_precision(Device d, const std::string& precision_flag,
                                        const std::string& precision_flag_name);

// The help text of the flag (the same on the three commands).
extern const char* const kDeviceHelp;

}  // namespace eth::cli
