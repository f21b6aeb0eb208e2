// Fast fp32 matrix products with bias, through sgemm (gemm.h). Same contracts as
// reference/matmul.h: "nt" for weights stored (OC, C) (qkv_w, fc_w, lm_head_w), "nn" for
// weights stored transposed (C, OC) (proj_w, fcproj_w, the row-parallel ones).
#pragma once

#include <cstdint>

#include "kernels/grad_rows.h"

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

// matmul_nt_backward with the weight (and bias) gradient in row chunks stored apart: dinp =
// dout W (=); for each chunk, rows [b, e) of dweight += dout[:, b:e]^T inp (one GEMM writing the
// chunk in place) and of dbias += column sums of dout[:, b:e].
//   dinp (N,C), rows[i].dweight (e-b,C), rows[i].dbias (e-b) or nullptr, dout (N,OC),
//   inp (N,C), weight (OC,C)
void matmul_nt_backward_rows(float* dinp, const GradRows<float>* rows, std::int64_t num_rows,
                             const float* dout, const float* inp, const float* weight,
                             std::int64_t N, std::int64_t C, std::int64_t OC);

// out = inp W + bias
//   out (N,OC), inp (N,C), weight (C,OC), bias (OC) or nullptr
void matmul_nn_forward(float* out, const float* inp, const float* weight, const float* bias,
                       std::int64_t N, std::int64_t C, std::int64_t OC);

// dinp = dout W^T (=); dweight += inp^T dout; dbias += column sums of dout (if dbias).
//   dinp (N,C), dweight (C,OC), dbias (OC) or nullptr, dout (N,OC), inp (N,C), weight (C,OC)
void matmul_nn_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, std::int64_t N, std::int64_t C,
                        std::int64_t OC);

// matmul_nn_backward with the weight gradient in row chunks (input channels) stored apart, the
// bias whole (rows[i].dbias null): dinp = dout W^T (=); for each chunk, rows [b, e) of dweight
// += inp[:, b:e]^T dout; dbias += column sums of dout (if dbias).
//   dinp (N,C), rows[i].dweight (e-b,OC), dbias (OC) or nullptr, dout (N,OC), inp (N,C),
//   weight (C,OC)
void matmul_nn_backward_rows(float* dinp, const GradRows<float>* rows, std::int64_t num_rows,
                             float* dbias, const float* dout, const float* inp,
                             const float* weight, std::int64_t N, std::int64_t C, std::int64_t OC);

}  // namespace eth::cpu
