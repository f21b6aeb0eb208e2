// Choosing the training precision from the flag and the CPU. See precision_choice.h.
#include "cli/precision_choice.h"

#include "core/error.h"
#include "kernels/cpu/bf16/gemm.h"
#include "kernels/cpu/cpu_features.h"

namespace eth::cli {

void check_build_runs_here() {
  const cpu::CpuFeatures& f = cpu::cpu_features();
  const std::vector<std::string> missing = cpu::missing_build_extensions(f);
  if (missing.empty()) return;
  std::string names;
  for (const auto& m : missing) names += (names.empty() ? "" : " ") + m;
  throw InputError("cpu", f.model, "",
                   "this eth was compiled for ISA extensions this CPU lacks (" + names +
                       "; it has: " + f.extensions() +
                       "), so its kernels would die with an illegal instruction: rebuild on this "
                       "machine, or configure with -DETH_KERNELS_NATIVE=OFF for a portable binary");
}

PrecisionChoice choose_precision(const std::string& flag, const std::string& flag_name) {
  std::optional<Precision> asked;
  if (!flag.empty()) {
    asked = parse_precision(flag);
    if (!asked || !runtime_precision(*asked)) {
      throw InputError("cli", flag_name, "", "expected fp32 or bf16, got \"" + flag + "\"");
    }
  }
  check_build_runs_here();
  const cpu::CpuFeatures& f = cpu::cpu_features();
  const bool native = f.has_bf16_matmul();
  PrecisionChoice c;
  c.precision = asked ? *asked : cpu::default_precision(f);
  std::string why;
  if (!asked) {
    why = native ? "default: this CPU has bf16 matrix instructions"
                 : "default: this CPU has no bf16 matrix instructions";
  } else {
    why = "requested with " + flag_name + " " + flag;
    if (c.precision == Precision::Bf16 && !native) {
      why += "; no bf16 matrix instructions here, so bf16 storage with fp32 compute";
    }
  }
  if (c.precision == Precision::Bf16) {
    why += ", GEMMs " + std::string(cpu::bf16::gemm_path_name(cpu::bf16::gemm_path()));
  }
  c.line = "precision " + std::string(precision_name(c.precision)) + " (" + why + "; CPU " +
           f.model + ": " + f.extensions() + ")";
  return c;
}

}  // namespace eth::cli
