// The emulated device's kernels: every function of cuda/kernels.h, with the same names, the same
// signatures and the CUDA set's semantics, on device memory of the emulated device (runtime.h).
// Each runs on the calling thread inside a DeviceScope and returns when done. They are the CPU
// bf16 kernels (cpu/bf16/, cpu/) wherever those have the CUDA kernel's contract, so their
// results are those kernels' bit for bit; what the GPU does differently is done here the GPU's
// way:
//   - attention is fused (attention.cpp): online softmax over key blocks, no T x T tensor, the
//     output and lse saved, P recomputed in backward, dropout of P drawn from philox.h inside;
//   - dropout masks, AdamW, the sum of squares and the bf16 refresh take device pointers;
//   - crossentropy_forward / vocab_ce_finish write the loss to a host double, as the CUDA
//     set's do (synchronous there too); the _add forms add into a device scalar instead.
// Every device pointer argument is checked to be device memory (EmuError otherwise): a host
// buffer handed to a kernel would be a crash on a GPU. `rows` (GradRows) and `loss` are host
// memory, as in the CUDA set (except the _add forms' device `loss`); the pointers inside `rows`
// are checked.
#pragma once

#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/cuda/kernels.h"
#include "kernels/cpu/optimizer.h"
#include "kernels/grad_rows.h"
#include "kernels/rng.h"

namespace eth::emu {

// ---- embedding (cpu/bf16/encoder.h, cpu/bf16/vocab_parallel.h) ----------------------------
void encoder_forward(Bf16* out, const std::int32_t* tokens, const Bf16* wte, const Bf16* wpe,
                     std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t V);
void encoder_backward(float* dwte, float* dwpe, const Bf16* dout, const std::int32_t* tokens,
                      std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t V);
// A tp rank's share of the lookup (fp32, for the all-reduce) and the positions added after it.
void vocab_embedding_forward(float* out, const std::int32_t* tokens, const Bf16* wte_rows,
                             std::int64_t v0, std::int64_t Vr, std::int64_t N, std::int64_t C,
                             std::int64_t V);
void vocab_embedding_backward(float* dwte_rows, const Bf16* dout, const std::int32_t* tokens,
                              std::int64_t v0, std::int64_t Vr, std::int64_t N, std::int64_t C);
void position_forward(Bf16* out, const float* lookup, const Bf16* wpe, std::int64_t B,
                      std::int64_t T, std::int64_t C);
void position_backward(float* dwpe, const Bf16* dout, std::int64_t B, std::int64_t T,
                       std::int64_t C);

// ---- layer norm (cpu/bf16/layernorm.h) ----------------------------------------------------
void layernorm_forward(Bf16* out, float* mean, float* rstd, const Bf16* inp, const Bf16* weight,
                       const Bf16* bias, std::int64_t N, std::int64_t C);
void layernorm_backward(Bf16* dinp, float* dweight, float* dbias, const Bf16* dout,
                        const Bf16* inp, const Bf16* weight, const float* mean, const float* rstd,
                        std::int64_t N, std::int64_t C);

// ---- matmuls: bf16 operands, fp32 accumulation (cpu/bf16/matmul.h's GEMMs) ----------------
// Weight and bias gradients accumulate (+=) into fp32 (the GEMM's beta = 1 on an fp32 output).
void matmul_nt_forward(Bf16* out, const Bf16* inp, const Bf16* weight, const Bf16* bias,
                       std::int64_t N, std::int64_t C, std::int64_t OC);
void matmul_nt_backward(Bf16* dinp, float* dweight, float* dbias, const Bf16* dout,
                        const Bf16* inp, const Bf16* weight, std::int64_t N, std::int64_t C,
                        std::int64_t OC);
void matmul_nn_forward(Bf16* out, const Bf16* inp, const Bf16* weight, const Bf16* bias,
                       std::int64_t N, std::int64_t C, std::int64_t OC);
void matmul_nn_backward(Bf16* dinp, float* dweight, float* dbias, const Bf16* dout,
                        const Bf16* inp, const Bf16* weight, std::int64_t N, std::int64_t C,
                        std::int64_t OC);
void matmul_nn_forward_partial(float* out, const Bf16* inp, const Bf16* weight, const Bf16* bias,
                               std::int64_t N, std::int64_t C, std::int64_t OC);
void matmul_nt_backward_partial(float* dinp, float* dweight, float* dbias, const Bf16* dout,
                                const Bf16* inp, const Bf16* weight, std::int64_t N,
                                std::int64_t C, std::int64_t OC);
// The weight (and bias) gradients in row chunks stored apart, as cpu/bf16/matmul.h's *_rows
// (kernels/grad_rows.h): `rows` is host memory holding device pointers; one GEMM per chunk.
void matmul_nt_backward_rows(Bf16* dinp, const GradRows<float>* rows, std::int64_t num_rows,
                             const Bf16* dout, const Bf16* inp, const Bf16* weight,
                             std::int64_t N, std::int64_t C, std::int64_t OC);
void matmul_nn_backward_rows(Bf16* dinp, const GradRows<float>* rows, std::int64_t num_rows,
                             float* dbias, const Bf16* dout, const Bf16* inp, const Bf16* weight,
                             std::int64_t N, std::int64_t C, std::int64_t OC);
void matmul_nt_backward_partial_rows(float* dinp, const GradRows<float>* rows,
                                     std::int64_t num_rows, const Bf16* dout, const Bf16* inp,
                                     const Bf16* weight, std::int64_t N, std::int64_t C,
                                     std::int64_t OC);

// ---- fused attention ----------------------------------------------------------------------
// Dropout of the attention probabilities inside the fused kernels: cuda::AttnDropout itself (the
// same type, so the two kernel sets' attention signatures are identical): element (b, h, t, t2)
// is element (head0 + h) T T + t T + t2 of global sample sample0 + b, kept iff philox.h keeps it.
using AttnDropout = cuda::AttnDropout;
// out = softmax(causal(Q K^T / sqrt(hs))) (dropped out) V per head, and lse[b,h,t] =
// log sum_t2 exp(score) (fp32, undropped), which is all backward needs besides qkv and out.
//   out (B,T,C), lse (B,NH,T) fp32, qkv (B,T,3C) head-interleaved (kernels/README.md);
//   head size C/NH in [1, 128] (the CUDA kernels' range)
void attention_forward(Bf16* out, float* lse, const Bf16* qkv, const AttnDropout& drop,
                       std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH);
// dqkv (=, all of q, k, v) from dout; P is recomputed from qkv and lse. `dsum` is workspace
// (B,NH,T) fp32: the rows' sum_t2 P dP, formed in fp32 from P and dP themselves.
//   dqkv (B,T,3C), dout (B,T,C), lse (B,NH,T), qkv (B,T,3C), dsum (B,NH,T)
void attention_backward(Bf16* dqkv, float* dsum, const Bf16* dout, const float* lse,
                        const Bf16* qkv, const AttnDropout& drop, std::int64_t B, std::int64_t T,
                        std::int64_t C, std::int64_t NH);

// ---- point-wise (cpu/bf16/pointwise.h); in place where the CPU allows it -----------------
void gelu_forward(Bf16* out, const Bf16* inp, std::int64_t N);
void gelu_backward(Bf16* dinp, const Bf16* dout, const Bf16* inp, std::int64_t N);
void residual_forward(Bf16* out, const Bf16* res, const Bf16* branch, std::int64_t N);
void residual_backward(Bf16* dres, Bf16* dbranch, const Bf16* dout, std::int64_t N);
void dropout_forward(Bf16* out, const Bf16* inp, const std::uint8_t* mask, float p,
                     std::int64_t N);
void dropout_backward(Bf16* dinp, const Bf16* dout, const std::uint8_t* mask, float p,
                      std::int64_t N);
// rng.h's dropout_mask_fill on the device, bit for bit.   mask (B, n) bytes on the device
void dropout_mask_fill(std::uint8_t* mask, const RngStream& s, float p, std::int64_t sample0,
                       std::int64_t elem0, std::int64_t B, std::int64_t n);
// out = round(in) (bf16 contract of bf16.h).   out (n), in (n) fp32
void convert_to_bf16(Bf16* out, const float* in, std::int64_t n);
// Element-wise x = x + y or x = max(x, y) (the threads backend's device all-reduce).
void add_inplace(float* x, const float* y, std::int64_t n);
void add_inplace(double* x, const double* y, std::int64_t n);
void max_inplace(float* x, const float* y, std::int64_t n);
void max_inplace(double* x, const double* y, std::int64_t n);

// ---- cross-entropy (cpu/bf16/crossentropy.h, cpu/bf16/vocab_parallel.h) -------------------
// The losses are summed in token order in double (the CPU's order); loss is a host pointer.
void crossentropy_forward(double* loss, float* losses, float* lse, const Bf16* logits,
                          const std::int32_t* targets, double scale, std::int64_t N,
                          std::int64_t V);
// The same with `loss` a DEVICE scalar: *loss += scale * (the token-order sum), as
// cuda::crossentropy_forward_add (StageCompute's loss scalar, read once per step).
void crossentropy_forward_add(double* loss, float* losses, float* lse, const Bf16* logits,
                              const std::int32_t* targets, double scale, std::int64_t N,
                              std::int64_t V);
void crossentropy_backward(Bf16* dlogits, const Bf16* logits, const float* lse,
                           const std::int32_t* targets, double scale, std::int64_t N,
                           std::int64_t V);
// A tp rank's share of the loss: its row maxima (joined by a max all-reduce), its sums of
// exponentials and target logits (a sum all-reduce), the losses (vocab_ce_finish, summed like
// crossentropy_forward's) and its columns of the gradient.
void vocab_ce_max(float* mx, const Bf16* logits, std::int64_t N, std::int64_t Vr);
void vocab_ce_sums(float* stats, const Bf16* logits, const float* mx, const std::int32_t* targets,
                   std::int64_t v0, std::int64_t N, std::int64_t Vr);
void vocab_ce_finish(double* loss, float* losses, float* lse, const float* mx, const float* stats,
                     double scale, std::int64_t N);
// vocab_ce_finish with `loss` a device scalar, added to as crossentropy_forward_add does.
void vocab_ce_finish_add(double* loss, float* losses, float* lse, const float* mx,
                         const float* stats, double scale, std::int64_t N);
void vocab_ce_backward(Bf16* dlogits, const Bf16* logits, const float* lse,
                       const std::int32_t* targets, std::int64_t v0, double scale, std::int64_t N,
                       std::int64_t Vr);

// ---- optimizer (cpu/bf16/optimizer.h, cpu/optimizer.h) -------------------------------------
// The fused AdamW step: fp32 masters and moments updated, the bf16 compute copy written.
void adamw_update(float* p, Bf16* p_bf16, float* m, float* v, const float* grads, std::int64_t n,
                  const cpu::AdamWScalars& s);
// Sum of x[i]^2 in double: cpu::sum_squares (4096-element blocks, added in order).
double sum_squares(const float* x, std::int64_t n);

}  // namespace eth::emu
