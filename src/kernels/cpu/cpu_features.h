// What this CPU can execute, read with cpuid (and xgetbv: the OS must save the AVX / AVX-512
// state), and what follows from it: the default training precision, and whether this binary's
// -march=native kernels can run here at all. The machines of this project are sometimes an AVX-512
// + bf16 Zen 5 and sometimes an AVX2-only Zen 3 (shared/notes/machine-figures.md), so every
// bf16 path dispatches on this at run time. Compiled for the baseline ISA (never -march=native),
// so the check itself cannot fault on an older CPU.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/precision.h"

namespace eth::cpu {

struct CpuFeatures {
  std::string model;  // the brand string, e.g. "AMD EPYC 9B45"
  bool avx2 = false, fma = false;
  bool avx512f = false, avx512dq = false, avx512bw = false, avx512vl = false;
  bool avx512_bf16 = false;  // VCVTNEPS2BF16, VDPBF16PS
  bool amx_bf16 = false;     // tile bf16 matrix multiply (Sapphire Rapids)

  // The extensions above that are present, space-separated ("avx2 fma avx512f ... avx512_bf16").
  std::string extensions() const;
  // Native bf16 matrix instructions (what makes bf16 compute faster than fp32).
  bool has_bf16_matmul() const { return avx512_bf16 || amx_bf16; }
};

// Read once per process (the CPU does not change under a running process).
const CpuFeatures& cpu_features();
// Reads cpuid now (tests; cpu_features() caches this).
CpuFeatures detect_cpu_features();

using eth::Precision;  // core/precision.h
using eth::precision_name;
// bf16 (bf16 compute, fp32 master weights) where the CPU has bf16 matrix instructions, fp32
// otherwise: without them bf16 only saves memory (bf16 storage, fp32 compute) at some speed.
Precision default_precision(const CpuFeatures& f);

// The ISA extensions the kernels were compiled to use (ETH_KERNELS_NATIVE builds them with
// -march=native for the build machine) that `f` lacks. Non-empty means the fast kernels would
// die with SIGILL here: a Zen 5 build run on a Zen 3. The CLI refuses to start and names them;
// rebuild on this machine or configure with -DETH_KERNELS_NATIVE=OFF for a portable binary (the
// bf16 conversions and GEMMs still dispatch to AVX-512 / oneDNN at run time there).
std::vector<std::string> missing_build_extensions(const CpuFeatures& f);

}  // namespace eth::cpu
