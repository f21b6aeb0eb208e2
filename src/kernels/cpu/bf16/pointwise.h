// bf16 element-wise kernels: GELU (tanh form), residual add, dropout with a given mask. Each
// element is widened to fp32, computed as in cpu/pointwise.h, and rounded once when stored.
// Same contracts (and the same in-place permissions) as cpu/pointwise.h; defined in
// cpu/pointwise.cpp as the same templates as the fp32 kernels (cpu/storage.h).
#pragma once

#include <cstdint>

#include "kernels/bf16.h"

namespace eth::cpu::bf16 {

// out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); out may alias inp.
//   out (N), inp (N)
void gelu_forward(Bf16* out, const Bf16* inp, std::int64_t N);

// dinp = dout * gelu'(inp) (=); dinp may alias dout.
//   dinp (N), dout (N), inp (N)
void gelu_backward(Bf16* dinp, const Bf16* dout, const Bf16* inp, std::int64_t N);

// out = res + branch
//   out (N), res (N), branch (N)
void residual_forward(Bf16* out, const Bf16* res, const Bf16* branch, std::int64_t N);

// dres += dout (the residual stream accumulates; the sum rounded once); dbranch = dout.
//   dres (N), dbranch (N), dout (N)
void residual_backward(Bf16* dres, Bf16* dbranch, const Bf16* dout, std::int64_t N);

// out = inp * mask / (1 - p); out may alias inp. The mask comes from dropout_mask_fill (rng.h).
//   out (N), inp (N), mask (N) bytes 0/1
void dropout_forward(Bf16* out, const Bf16* inp, const std::uint8_t* mask, float p,
                     std::int64_t N);

// dinp = dout * mask / (1 - p) (=); dinp may alias dout.
//   dinp (N), dout (N), mask (N)
void dropout_backward(Bf16* dinp, const Bf16* dout, const std::uint8_t* mask, float p,
                      std::int64_t N);

}  // namespace eth::cpu::bf16
