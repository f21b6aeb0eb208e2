// Fast fp32 matrix products with bias, through sgemm (gemm.h). Same contracts as
// reference/matmul.h: "nt" for weights stored (OC, C) (qkv_w, fc_w, lm_head_w), "nn" for
// weights stored transposed (C, OC) (proj_w, fcproj_w, the row-parallel ones).
#pragma once

#include <cstdint>

namespace eth::cpu {

// out = inp W^T + bias
//   out (N,OC), inp (N,C), weight (OC,C), bias (OC) or nullptr
void matmul_nt_forward(float* out, const float* inp, const float* weight, const float* bias,
                       std::int64_t N, std::int64_t C, std::int64_t OC);

// dinp = dout W (=); dweight += dout^T inp; dbias += column sums of dout (if dbias).
//   dinp (N,C), dweight (OC,C), dbias (OC) or nullptr, dout (N,OC), inp (N,C), weight (OC,C)
void matmul_nt_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, std::int64_t N, std::int64_t C,
                        std::int64_t OC);

// out = inp W + bias
//   out (N,OC), inp (N,C), weight (C,OC), bias (OC) or nullptr
void matmul_nn_forward(float* out, const float* inp, const float* weight, const float* bias,
                       std::int64_t N, std::int64_t C, std::int64_t OC);

// dinp = dout W^T (=); dweight += inp^T dout; dbias += column sums of dout (if dbias).
//   dinp (N,C), dweight (C,OC), dbias (OC) or nullptr, dout (N,OC), inp (N,C), weight (C,OC)
void matmul_nn_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, std::int64_t N, std::int64_t C,
                        std::int64_t OC);

}  // namespace eth::cpu
