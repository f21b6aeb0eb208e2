// Fast fp32 layer norm (OpenMP). Same contract as reference/layernorm.h.
#pragma once

#include <cstdint>

namespace eth::cpu {

// out = (inp - mean) * rstd * weight + bias per row; saves mean and rstd for backward.
//   out (N,C), mean (N), rstd (N), inp (N,C), weight (C), bias (C)
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, std::int64_t N, std::int64_t C);

// dinp += (the input is the residual stream), dweight += and dbias += (parameters).
//   dinp (N,C), dweight (C), dbias (C), dout (N,C), inp (N,C), weight (C), mean (N), rstd (N)
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean,
                        const float* rstd, std::int64_t N, std::int64_t C);

}  // namespace eth::cpu
