// CPU kinds for the dispatch tests (the ones of shared/notes/machine-figures.md, plus the two
// other x86 cases the dispatch must get right: AVX-512 without bf16, Skylake-X, and AMX, Sapphire
// Rapids), as cpu_features would report them. Test-only.
#pragma once

#include "kernels/cpu/cpu_features.h"

namespace eth::test {

inline cpu::CpuFeatures zen3() {
  cpu::CpuFeatures f;
  f.avx2 = f.fma = true;
  return f;
}
inline cpu::CpuFeatures skylake_x() {
  cpu::CpuFeatures f = zen3();
  f.avx512f = f.avx512dq = f.avx512bw = f.avx512vl = true;
  return f;
}
inline cpu::CpuFeatures zen5() {
  cpu::CpuFeatures f = skylake_x();
  f.avx512_bf16 = true;
  return f;
}
inline cpu::CpuFeatures sapphire_rapids() {
  cpu::CpuFeatures f = zen5();
  f.amx_bf16 = true;
  return f;
}

}  // namespace eth::test
