// Bulk fp32 <-> bf16 conversion of flat buffers, dispatched at run time on what the CPU has:
// VCVTNEPS2BF16 (AVX-512 BF16), AVX2 integer rounding, or scalar code. Every path gives the bits
// of bf16_from_float / float_from_bf16 (kernels/bf16.h), so results never depend on the machine.
// Compiled for the baseline ISA with per-function target attributes, so a binary runs on any
// x86-64 and uses what it finds. OpenMP over chunks for large buffers (element-wise: any thread
// count gives the same bytes). Not the kernels' own rounding: those inline bf16_from_float.
#pragma once

#include <cstdint>
#include <string_view>

#include "kernels/bf16.h"
#include "kernels/cpu/cpu_features.h"

namespace eth::cpu::bf16 {

enum class ConvertIsa { Scalar, Avx2, Avx512Bf16 };

std::string_view convert_isa_name(ConvertIsa isa);
// The fastest path `f` can run.
ConvertIsa convert_isa_for(const CpuFeatures& f);
// Whether this CPU can run `isa` (tests exercise every path the machine allows).
bool convert_isa_supported(ConvertIsa isa);

// out[i] = bf16_from_float(in[i]); out and in must not overlap.
//   out (n), in (n)
void convert_to_bf16(Bf16* out, const float* in, std::int64_t n);
// out[i] = float_from_bf16(in[i]) (exact).
//   out (n), in (n)
void convert_to_float(float* out, const Bf16* in, std::int64_t n);

// The same through a named path (ETH_CHECKs convert_isa_supported(isa)).
void convert_to_bf16(Bf16* out, const float* in, std::int64_t n, ConvertIsa isa);
void convert_to_float(float* out, const Bf16* in, std::int64_t n, ConvertIsa isa);

}  // namespace eth::cpu::bf16
