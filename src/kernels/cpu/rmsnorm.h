// Fast fp32 RMSNorm (OpenMP). Same contract as reference/rmsnorm.h.
#pragma once

#include <cstdint>

namespace eth::cpu {

// rstd = 1 / sqrt(mean_c(inp^2) + eps); out = inp * rstd * weight per row; saves rstd.
//   out (N,C), rstd (N), inp (N,C), weight (C)
void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, float eps,
                     std::int64_t N, std::int64_t C);

// dinp += (the input is the residual stream), dweight += (a parameter).
//   dinp (N,C), dweight (C), dout (N,C), inp (N,C), weight (C), rstd (N)
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                      const float* weight, const float* rstd, std::int64_t N, std::int64_t C);

}  // namespace eth::cpu
