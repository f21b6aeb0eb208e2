// Internal to cpu_features.cpp and build_isa.cpp: which ISA extensions the kernel library was
// compiled for, as a bitmask. build_isa.cpp is compiled with the kernels' own flags
// (-march=native by default) and reads the compiler's predefined macros; it returns a constant,
// so calling it cannot execute an instruction the CPU lacks.
#pragma once

#include <cstdint>

namespace eth::cpu::detail {

enum BuildIsaBit : std::uint32_t {
  kIsaAvx2 = 1u << 0,
  kIsaFma = 1u << 1,
  kIsaAvx512f = 1u << 2,
  kIsaAvx512dq = 1u << 3,
  kIsaAvx512bw = 1u << 4,
  kIsaAvx512vl = 1u << 5,
  kIsaAvx512Bf16 = 1u << 6,
};

std::uint32_t build_isa_bits();

}  // namespace eth::cpu::detail
