// `--device cpu|cuda` of `eth train`, `eth launch` and `eth profile --measure`: which kernels a
// run would use, decided before any work. cpu is what runs today. cuda is refused, before any
// file is read or written, with the reason in words: a build without CUDA says so (rebuild with
// the toolkit); a machine without a GPU says what the driver reported; a machine with a GPU is
// told that training on it is not built yet (the CUDA kernels and the NCCL communicator are; the
// stage computation on them and the GPU profile are not: docs/gpu.md).
#pragma once

#include <string>

namespace eth::cli {

enum class Device { Cpu, Cuda };

// `flag`: "cpu" or "cuda" (CLI11 checks the set). Returns Cpu for "cpu"; throws InputError
// naming `flag_name` for "cuda" with the reason it cannot run here.
Device choose_device(const std::string& flag, const std::string& flag_name);

// The help text of the flag (the same on the three commands).
extern const char* const kDeviceHelp;

}  // namespace eth::cli
