// bf16 SwiGLU: each element widened to fp32, computed as in cpu/swiglu.h, rounded once when
// stored. Same contract and aliasing as cpu/swiglu.h; defined in cpu/swiglu.cpp as the same
// templates as the fp32 kernels (cpu/storage.h).
#pragma once

#include <cstdint>

#include "kernels/bf16.h"

namespace eth::cpu::bf16 {

// out = silu(gate) * up; out may alias gate or up.
//   out (N,F), gate (N,F), up (N,F)
void swiglu_forward(Bf16* out, const Bf16* gate, const Bf16* up, std::int64_t N, std::int64_t F);

// dgate = dout * up * silu'(gate), dup = dout * silu(gate) (both =); may alias the inputs.
//   dgate (N,F), dup (N,F), dout (N,F), gate (N,F), up (N,F)
void swiglu_backward(Bf16* dgate, Bf16* dup, const Bf16* dout, const Bf16* gate, const Bf16* up,
                     std::int64_t N, std::int64_t F);

}  // namespace eth::cpu::bf16
