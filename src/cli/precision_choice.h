// The training precision of `eth train`, `eth launch` (through eth train) and `eth profile
// --measure`: the --precision flag, or bf16 where the CPU has bf16 matrix instructions and fp32
// elsewhere (kernels/cpu/cpu_features.h), with the sentence the command prints first saying
// which runs and why. Also the refusal, before any work, of a binary compiled for ISA extensions
// this CPU lacks (its kernels would die with SIGILL in the first step).
#pragma once

#include <string>

#include "core/precision.h"

namespace eth::cli {

struct PrecisionChoice {
  Precision precision = Precision::Fp32;
  // "precision bf16 (default: this CPU has bf16 matrix instructions; AMD EPYC 9B45: avx2 ...)"
  std::string line;
};

// `flag`: "fp32", "bf16" or "" (the CPU's default). Throws InputError naming `flag_name` for any
// other value, and InputError naming the CPU when the kernels were built for extensions it lacks.
PrecisionChoice choose_precision(const std::string& flag, const std::string& flag_name);

// Only the build-extension check (for commands that run kernels without a precision choice).
void check_build_runs_here();

}  // namespace eth::cli
