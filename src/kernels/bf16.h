// bfloat16, the storage type of mixed-precision training: the top half of an IEEE float (sign,
// 8 exponent bits, 7 stored mantissa bits; 8 bits of precision, unit roundoff 2^-8), and the
// scalar conversions every bf16 kernel inlines. Not an arithmetic type: kernels convert to float,
// compute and accumulate in float, and round once when they store. Bulk conversions with runtime
// ISA dispatch are in cpu/bf16/convert.h.
//
// Rounding contract (the same bits on every code path, scalar, AVX2 and VCVTNEPS2BF16):
//   - round to nearest, ties to even; finite values beyond the largest bf16 round to infinity;
//   - subnormal floats become a zero of the same sign (VCVTNEPS2BF16 treats them as zero, and
//     oneDNN's bf16 matmul outputs do the same);
//   - NaN stays NaN with its sign and top payload bits, quiet bit set; infinities stay.
// bf16 -> float is exact (a 16-bit shift), subnormal bf16 included.
#pragma once

#include <bit>
#include <cstdint>
#include <type_traits>

namespace eth {

// Trivial (no default member initializer) so arenas and vectors can hold it like a float.
struct Bf16 {
  std::uint16_t bits;
  friend constexpr bool operator==(Bf16, Bf16) = default;  // bitwise
};
static_assert(sizeof(Bf16) == 2 && std::is_trivial_v<Bf16>);

// Internal linkage on purpose, as in cpu/vec_math.h: the kernels are compiled with -march=native
// and other translation units are not, so each keeps its own copy (no ODR merge that could hand
// a baseline caller an AVX-512 body). Both are written as selects so `omp simd` loops vectorize.
namespace {

constexpr Bf16 bf16_from_float(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t rounded = u + 0x7FFFu + ((u >> 16) & 1u);  // RNE on the low 16 bits
  const bool is_nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
  const bool is_zero_or_subnormal = (u & 0x7F800000u) == 0;
  const std::uint32_t r =
      is_nan ? (u | 0x00400000u) : is_zero_or_subnormal ? (u & 0x80000000u) : rounded;
  return Bf16{static_cast<std::uint16_t>(r >> 16)};
}

constexpr float float_from_bf16(Bf16 x) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(x.bits) << 16);
}

// x rounded to the nearest bf16 and back: the value a bf16 store of x keeps.
constexpr float round_to_bf16(float x) { return float_from_bf16(bf16_from_float(x)); }

}  // namespace
}  // namespace eth
