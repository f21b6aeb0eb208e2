// The kernels' compile-time ISA (see build_isa.h). Must stay compiled with eth_kernels' flags.
#include "kernels/cpu/build_isa.h"

namespace eth::cpu::detail {

std::uint32_t build_isa_bits() {
  std::uint32_t bits = 0;
#ifdef __AVX2__
  bits |= kIsaAvx2;
#endif
#ifdef __FMA__
  bits |= kIsaFma;
#endif
#ifdef __AVX512F__
  bits |= kIsaAvx512f;
#endif
#ifdef __AVX512DQ__
  bits |= kIsaAvx512dq;
#endif
#ifdef __AVX512BW__
  bits |= kIsaAvx512bw;
#endif
#ifdef __AVX512VL__
  bits |= kIsaAvx512vl;
#endif
#ifdef __AVX512BF16__
  bits |= kIsaAvx512Bf16;
#endif
  return bits;
}

}  // namespace eth::cpu::detail
