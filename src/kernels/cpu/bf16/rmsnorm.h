// bf16 RMSNorm: bf16 input, output and weight (the compute copy); rstd and every sum in fp32;
// the weight gradient fp32. Same contract as cpu/rmsnorm.h; defined in cpu/rmsnorm.cpp as the
// same template as the fp32 kernel (cpu/storage.h).
#pragma once

#include <cstdint>

#include "kernels/bf16.h"

namespace eth::cpu::bf16 {

// out = inp * rstd * weight per row, rounded once; saves rstd (fp32).
//   out (N,C), rstd (N) fp32, inp (N,C), weight (C)
void rmsnorm_forward(Bf16* out, float* rstd, const Bf16* inp, const Bf16* weight, float eps,
                     std::int64_t N, std::int64_t C);

// dinp += (the residual stream; the sum is formed in fp32 and rounded once), dweight += (fp32).
//   dinp (N,C), dweight (C) fp32, dout (N,C), inp (N,C), weight (C), rstd (N) fp32
void rmsnorm_backward(Bf16* dinp, float* dweight, const Bf16* dout, const Bf16* inp,
                      const Bf16* weight, const float* rstd, std::int64_t N, std::int64_t C);

}  // namespace eth::cpu::bf16
