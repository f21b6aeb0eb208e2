// Fast fp32 element-wise kernels: GELU (tanh form), residual add, dropout with a given mask.
// Same contracts as reference/pointwise.h. OpenMP over elements.
#pragma once

#include <cstdint>

namespace eth::cpu {

// out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); out may alias inp.
//   out (N), inp (N)
void gelu_forward(float* out, const float* inp, std::int64_t N);

// dinp = dout * gelu'(inp) (=); dinp may alias dout.
//   dinp (N), dout (N), inp (N)
void gelu_backward(float* dinp, const float* dout, const float* inp, std::int64_t N);

// out = res + branch
//   out (N), res (N), branch (N)
void residual_forward(float* out, const float* res, const float* branch, std::int64_t N);

// dres += dout (the residual stream accumulates); dbranch = dout.
//   dres (N), dbranch (N), dout (N)
void residual_backward(float* dres, float* dbranch, const float* dout, std::int64_t N);

// out = inp * mask / (1 - p); out may alias inp. The mask comes from dropout_mask_fill (rng.h).
//   out (N), inp (N), mask (N) bytes 0/1
void dropout_forward(float* out, const float* inp, const std::uint8_t* mask, float p,
                     std::int64_t N);

// dinp = dout * mask / (1 - p) (=); dinp may alias dout.
//   dinp (N), dout (N), mask (N)
void dropout_backward(float* dinp, const float* dout, const std::uint8_t* mask, float p,
                      std::int64_t N);

}  // namespace eth::cpu
