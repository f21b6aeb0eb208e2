// Fast fp32 SwiGLU (OpenMP over elements, the vectorizable sigmoid of vec_math.h). Same
// contract as reference/swiglu.h.
#pragma once

#include <cstdint>

namespace eth::cpu {

// out = silu(gate) * up, silu(x) = x / (1 + exp(-x)); out may alias gate or up.
//   out (N,F), gate (N,F), up (N,F)
void swiglu_forward(float* out, const float* gate, const float* up, std::int64_t N, std::int64_t F);

// dgate = dout * up * silu'(gate), dup = dout * silu(gate) (both =); each element is read
// before either output is stored, so dgate and dup may alias dout, gate or up.
//   dgate (N,F), dup (N,F), dout (N,F), gate (N,F), up (N,F)
void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate,
                     const float* up, std::int64_t N, std::int64_t F);

}  // namespace eth::cpu
