// bf16 matrix products with bias through bf16::gemm (oneDNN bf16 matmul or fp32 compute):
// activations and the weights' compute copy in bf16, parameter gradients in fp32. Same contracts
// and storage forms as cpu/matmul.h: "nt" for weights stored (OC, C) (qkv_w, fc_w, lm_head_w),
// "nn" for weights stored transposed (C, OC) (proj_w, fcproj_w). Every product accumulates in
// fp32; a bf16 output is rounded once, after the bias. Defined in cpu/matmul.cpp beside the fp32
// kernels (the bias gradient is one template for both).
#pragma once

#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/grad_rows.h"

namespace eth::cpu::bf16 {

// out = inp W^T + bias
//   out (N,OC), inp (N,C), weight (OC,C), bias (OC) or nullptr
void matmul_nt_forward(Bf16* out, const Bf16* inp, const Bf16* weight, const Bf16* bias,
                       std::int64_t N, std::int64_t C, std::int64_t OC);

// dinp = dout W (=); dweight += dout^T inp and dbias += column sums of dout (if dbias), in fp32.
//   dinp (N,C), dweight (OC,C) fp32, dbias (OC) fp32 or nullptr, dout (N,OC), inp (N,C),
//   weight (OC,C)
void matmul_nt_backward(Bf16* dinp, float* dweight, float* dbias, const Bf16* dout,
                        const Bf16* inp, const Bf16* weight, std::int64_t N, std::int64_t C,
                        std::int64_t OC);

// matmul_nt_backward with the fp32 weight (and bias) gradient in row chunks stored apart, as
// cpu::matmul_nt_backward_rows.
void matmul_nt_backward_rows(Bf16* dinp, const GradRows<float>* rows, std::int64_t num_rows,
                             const Bf16* dout, const Bf16* inp, const Bf16* weight,
                             std::int64_t N, std::int64_t C, std::int64_t OC);

// out = inp W + bias
//   out (N,OC), inp (N,C), weight (C,OC), bias (OC) or nullptr
void matmul_nn_forward(Bf16* out, const Bf16* inp, const Bf16* weight, const Bf16* bias,
                       std::int64_t N, std::int64_t C, std::int64_t OC);

// dinp = dout W^T (=); dweight += inp^T dout and dbias += column sums of dout (if dbias), fp32.
//   dinp (N,C), dweight (C,OC) fp32, dbias (OC) fp32 or nullptr, dout (N,OC), inp (N,C),
//   weight (C,OC)
void matmul_nn_backward(Bf16* dinp, float* dweight, float* dbias, const Bf16* dout,
                        const Bf16* inp, const Bf16* weight, std::int64_t N, std::int64_t C,
                        std::int64_t OC);

// matmul_nn_backward with the fp32 weight gradient in row chunks stored apart, the bias whole,
// as cpu::matmul_nn_backward_rows.
void matmul_nn_backward_rows(Bf16* dinp, const GradRows<float>* rows, std::int64_t num_rows,
                             float* dbias, const Bf16* dout, const Bf16* inp, const Bf16* weight,
                             std::int64_t N, std::int64_t C, std::int64_t OC);

// A tensor-parallel rank's partial sums, kept in fp32 for the tp all-reduce (the caller rounds
// the group's sum once, so a tp stage rounds where one process does: kernels/README.md,
// "Precision"). The row-parallel forward product (proj, fcproj):
// out = inp W + bias in fp32 (=), bias (OC) bf16 or nullptr (only tp rank 0 adds it).
//   out (N,OC) fp32, inp (N,C), weight (C,OC), bias (OC) or nullptr
void matmul_nn_forward_partial(float* out, const Bf16* inp, const Bf16* weight, const Bf16* bias,
                               std::int64_t N, std::int64_t C, std::int64_t OC);

// The column-parallel input gradient (qkv, fc, LM head): matmul_nt_backward with dinp in fp32.
//   dinp (N,C) fp32 (=), dweight (OC,C) fp32 (+=), dbias (OC) fp32 or nullptr (+=), dout (N,OC),
//   inp (N,C), weight (OC,C)
void matmul_nt_backward_partial(float* dinp, float* dweight, float* dbias, const Bf16* dout,
                                const Bf16* inp, const Bf16* weight, std::int64_t N,
                                std::int64_t C, std::int64_t OC);
// The same with the weight gradient (and bias) in row chunks stored apart, as
// matmul_nt_backward_rows.
void matmul_nt_backward_partial_rows(float* dinp, const GradRows<float>* rows,
                                     std::int64_t num_rows, const Bf16* dout, const Bf16* inp,
                                     const Bf16* weight, std::int64_t N, std::int64_t C,
                                     std::int64_t OC);

}  // namespace eth::cpu::bf16
