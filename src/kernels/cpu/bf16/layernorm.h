// bf16 layer norm: bf16 input, output and parameters' compute copy; mean, rstd and every sum in
// fp32; parameter gradients fp32. Same contract as cpu/layernorm.h; defined in cpu/layernorm.cpp
// as the same template as the fp32 kernel (cpu/storage.h).
#pragma once

#include <cstdint>

#include "kernels/bf16.h"

namespace eth::cpu::bf16 {

// out = (inp - mean) * rstd * weight + bias per row, rounded once; saves mean and rstd (fp32).
//   out (N,C), mean (N) fp32, rstd (N) fp32, inp (N,C), weight (C), bias (C)
void layernorm_forward(Bf16* out, float* mean, float* rstd, const Bf16* inp, const Bf16* weight,
                       const Bf16* bias, std::int64_t N, std::int64_t C);

// dinp += (the input is the residual stream; the sum is formed in fp32 and rounded once),
// dweight += and dbias += (fp32 parameter gradients).
//   dinp (N,C), dweight (C) fp32, dbias (C) fp32, dout (N,C), inp (N,C), weight (C), mean (N),
//   rstd (N)
void layernorm_backward(Bf16* dinp, float* dweight, float* dbias, const Bf16* dout,
                        const Bf16* inp, const Bf16* weight, const float* mean, const float* rstd,
                        std::int64_t N, std::int64_t C);

}  // namespace eth::cpu::bf16
