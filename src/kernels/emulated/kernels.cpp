// The emulated kernels that are the CPU bf16 kernels (kernels.h): each checks its device
// pointers, opens the device for the call and runs the CPU kernel on the device memory. The
// fused attention is attention.cpp.
#include "kernels/emulated/kernels.h"

#include <algorithm>
#include <initializer_list>
#include <string>

#include "kernels/cpu/bf16/convert.h"
#include "kernels/cpu/bf16/crossentropy.h"
#include "kernels/cpu/bf16/encoder.h"
#include "kernels/cpu/bf16/layernorm.h"
#include "kernels/cpu/bf16/matmul.h"
#include "kernels/cpu/bf16/optimizer.h"
#include "kernels/cpu/bf16/pointwise.h"
#include "kernels/cpu/bf16/rmsnorm.h"
#include "kernels/cpu/bf16/rope.h"
#include "kernels/cpu/bf16/swiglu.h"
#include "kernels/cpu/bf16/vocab_parallel.h"
#include "kernels/cpu/optimizer.h"
#include "kernels/cpu/vocab_parallel.h"
#include "kernels/emulated/check.h"
#include "kernels/emulated/runtime.h"

namespace eth::emu {
namespace bf = cpu::bf16;
using detail::device_args;

namespace {

// The host array of row chunks, with every chunk's pointers checked.
void rows_args(const char* fn, const GradRows<float>* rows, std::int64_t num_rows) {
  for (std::int64_t i = 0; i < num_rows; ++i) device_args(fn, {rows[i].dweight, rows[i].dbias});
}

template <typename T>
void add_into(T* x, const T* y, std::int64_t n) {
  device_args("add_inplace", {x, y});
  const DeviceScope scope;
  for (std::int64_t i = 0; i < n; ++i) x[i] += y[i];
}

// The CUDA kernel's select (x < y ? y : x), so a NaN in x stays and one in y is ignored.
template <typename T>
void max_into(T* x, const T* y, std::int64_t n) {
  device_args("max_inplace", {x, y});
  const DeviceScope scope;
  for (std::int64_t i = 0; i < n; ++i) x[i] = x[i] < y[i] ? y[i] : x[i];
}

}  // namespace

// ---- embedding ------------------------------------------------------------------------------
void encoder_forward(Bf16* out, const std::int32_t* tokens, const Bf16* wte, const Bf16* wpe,
                     std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t V) {
  device_args("encoder_forward", {out, tokens, wte, wpe});
  const DeviceScope scope;
  bf::encoder_forward(out, tokens, wte, wpe, B, T, C, V);
}
void encoder_backward(float* dwte, float* dwpe, const Bf16* dout, const std::int32_t* tokens,
                      std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t V) {
  device_args("encoder_backward", {dwte, dwpe, dout, tokens});
  const DeviceScope scope;
  bf::encoder_backward(dwte, dwpe, dout, tokens, B, T, C, V);
}
void vocab_embedding_forward(float* out, const std::int32_t* tokens, const Bf16* wte_rows,
                             std::int64_t v0, std::int64_t Vr, std::int64_t N, std::int64_t C,
                             std::int64_t V) {
  device_args("vocab_embedding_forward", {out, tokens, wte_rows});
  const DeviceScope scope;
  bf::vocab_embedding_forward(out, tokens, wte_rows, v0, Vr, N, C, V);
}
void vocab_embedding_backward(float* dwte_rows, const Bf16* dout, const std::int32_t* tokens,
                              std::int64_t v0, std::int64_t Vr, std::int64_t N, std::int64_t C) {
  device_args("vocab_embedding_backward", {dwte_rows, dout, tokens});
  const DeviceScope scope;
  bf::vocab_embedding_backward(dwte_rows, dout, tokens, v0, Vr, N, C);
}
void position_forward(Bf16* out, const float* lookup, const Bf16* wpe, std::int64_t B,
                      std::int64_t T, std::int64_t C) {
  device_args("position_forward", {out, lookup, wpe});
  const DeviceScope scope;
  bf::position_forward(out, lookup, wpe, B, T, C);
}
void position_backward(float* dwpe, const Bf16* dout, std::int64_t B, std::int64_t T,
                       std::int64_t C) {
  device_args("position_backward", {dwpe, dout});
  const DeviceScope scope;
  bf::position_backward(dwpe, dout, B, T, C);
}

// ---- layer norm -----------------------------------------------------------------------------
void layernorm_forward(Bf16* out, float* mean, float* rstd, const Bf16* inp, const Bf16* weight,
                       const Bf16* bias, std::int64_t N, std::int64_t C) {
  device_args("layernorm_forward", {out, mean, rstd, inp, weight, bias});
  const DeviceScope scope;
  bf::layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
}
void layernorm_backward(Bf16* dinp, float* dweight, float* dbias, const Bf16* dout,
                        const Bf16* inp, const Bf16* weight, const float* mean, const float* rstd,
                        std::int64_t N, std::int64_t C) {
  device_args("layernorm_backward", {dinp, dweight, dbias, dout, inp, weight, mean, rstd});
  const DeviceScope scope;
  bf::layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}

// ---- Llama blocks: RMSNorm, rotary positions, SwiGLU ----------------------------------------
void rmsnorm_forward(Bf16* out, float* rstd, const Bf16* inp, const Bf16* weight, float eps,
                     std::int64_t N, std::int64_t C) {
  device_args("rmsnorm_forward", {out, rstd, inp, weight});
  const DeviceScope scope;
  bf::rmsnorm_forward(out, rstd, inp, weight, eps, N, C);
}
void rmsnorm_backward(Bf16* dinp, float* dweight, const Bf16* dout, const Bf16* inp,
                      const Bf16* weight, const float* rstd, std::int64_t N, std::int64_t C) {
  device_args("rmsnorm_backward", {dinp, dweight, dout, inp, weight, rstd});
  const DeviceScope scope;
  bf::rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd, N, C);
}
void rope_forward(Bf16* qkv, std::int64_t B, std::int64_t T, std::int64_t NH, std::int64_t NKV,
                  std::int64_t hd, float theta) {
  device_args("rope_forward", {qkv});
  const DeviceScope scope;
  bf::rope_forward(qkv, B, T, NH, NKV, hd, theta);
}
void rope_backward(Bf16* dqkv, std::int64_t B, std::int64_t T, std::int64_t NH,
                   std::int64_t NKV, std::int64_t hd, float theta) {
  device_args("rope_backward", {dqkv});
  const DeviceScope scope;
  bf::rope_backward(dqkv, B, T, NH, NKV, hd, theta);
}
void swiglu_forward(Bf16* out, const Bf16* gate, const Bf16* up, std::int64_t N,
                    std::int64_t F) {
  device_args("swiglu_forward", {out, gate, up});
  const DeviceScope scope;
  bf::swiglu_forward(out, gate, up, N, F);
}
void swiglu_backward(Bf16* dgate, Bf16* dup, const Bf16* dout, const Bf16* gate, const Bf16* up,
                     std::int64_t N, std::int64_t F) {
  device_args("swiglu_backward", {dgate, dup, dout, gate, up});
  const DeviceScope scope;
  bf::swiglu_backward(dgate, dup, dout, gate, up, N, F);
}

// ---- matmuls --------------------------------------------------------------------------------
void matmul_nt_forward(Bf16* out, const Bf16* inp, const Bf16* weight, const Bf16* bias,
                       std::int64_t N, std::int64_t C, std::int64_t OC) {
  device_args("matmul_nt_forward", {out, inp, weight, bias});
  const DeviceScope scope;
  bf::matmul_nt_forward(out, inp, weight, bias, N, C, OC);
}
void matmul_nt_backward(Bf16* dinp, float* dweight, float* dbias, const Bf16* dout,
                        const Bf16* inp, const Bf16* weight, std::int64_t N, std::int64_t C,
                        std::int64_t OC) {
  device_args("matmul_nt_backward", {dinp, dweight, dbias, dout, inp, weight});
  const DeviceScope scope;
  bf::matmul_nt_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
}
void matmul_nn_forward(Bf16* out, const Bf16* inp, const Bf16* weight, const Bf16* bias,
                       std::int64_t N, std::int64_t C, std::int64_t OC) {
  device_args("matmul_nn_forward", {out, inp, weight, bias});
  const DeviceScope scope;
  bf::matmul_nn_forward(out, inp, weight, bias, N, C, OC);
}
void matmul_nn_backward(Bf16* dinp, float* dweight, float* dbias, const Bf16* dout,
                        const Bf16* inp, const Bf16* weight, std::int64_t N, std::int64_t C,
                        std::int64_t OC) {
  device_args("matmul_nn_backward", {dinp, dweight, dbias, dout, inp, weight});
  const DeviceScope scope;
  bf::matmul_nn_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
}
void matmul_nn_forward_partial(float* out, const Bf16* inp, const Bf16* weight, const Bf16* bias,
                               std::int64_t N, std::int64_t C, std::int64_t OC) {
  device_args("matmul_nn_forward_partial", {out, inp, weight, bias});
  const DeviceScope scope;
  bf::matmul_nn_forward_partial(out, inp, weight, bias, N, C, OC);
}
void matmul_nt_backward_partial(float* dinp, float* dweight, float* dbias, const Bf16* dout,
                                const Bf16* inp, const Bf16* weight, std::int64_t N,
                                std::int64_t C, std::int64_t OC) {
  device_args("matmul_nt_backward_partial", {dinp, dweight, dbias, dout, inp, weight});
  const DeviceScope scope;
  bf::matmul_nt_backward_partial(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
}
void matmul_nt_backward_rows(Bf16* dinp, const GradRows<float>* rows, std::int64_t num_rows,
                             const Bf16* dout, const Bf16* inp, const Bf16* weight,
                             std::int64_t N, std::int64_t C, std::int64_t OC) {
  device_args("matmul_nt_backward_rows", {dinp, dout, inp, weight});
  rows_args("matmul_nt_backward_rows", rows, num_rows);
  const DeviceScope scope;
  bf::matmul_nt_backward_rows(dinp, rows, num_rows, dout, inp, weight, N, C, OC);
}
void matmul_nn_backward_rows(Bf16* dinp, const GradRows<float>* rows, std::int64_t num_rows,
                             float* dbias, const Bf16* dout, const Bf16* inp, const Bf16* weight,
                             std::int64_t N, std::int64_t C, std::int64_t OC) {
  device_args("matmul_nn_backward_rows", {dinp, dbias, dout, inp, weight});
  rows_args("matmul_nn_backward_rows", rows, num_rows);
  const DeviceScope scope;
  bf::matmul_nn_backward_rows(dinp, rows, num_rows, dbias, dout, inp, weight, N, C, OC);
}
void matmul_nt_backward_partial_rows(float* dinp, const GradRows<float>* rows,
                                     std::int64_t num_rows, const Bf16* dout, const Bf16* inp,
                                     const Bf16* weight, std::int64_t N, std::int64_t C,
                                     std::int64_t OC) {
  device_args("matmul_nt_backward_partial_rows", {dinp, dout, inp, weight});
  rows_args("matmul_nt_backward_partial_rows", rows, num_rows);
  const DeviceScope scope;
  bf::matmul_nt_backward_partial_rows(dinp, rows, num_rows, dout, inp, weight, N, C, OC);
}

// ---- point-wise -----------------------------------------------------------------------------
void gelu_forward(Bf16* out, const Bf16* inp, std::int64_t N) {
  device_args("gelu_forward", {out, inp});
  const DeviceScope scope;
  bf::gelu_forward(out, inp, N);
}
void gelu_backward(Bf16* dinp, const Bf16* dout, const Bf16* inp, std::int64_t N) {
  device_args("gelu_backward", {dinp, dout, inp});
  const DeviceScope scope;
  bf::gelu_backward(dinp, dout, inp, N);
}
void residual_forward(Bf16* out, const Bf16* res, const Bf16* branch, std::int64_t N) {
  device_args("residual_forward", {out, res, branch});
  const DeviceScope scope;
  bf::residual_forward(out, res, branch, N);
}
void residual_backward(Bf16* dres, Bf16* dbranch, const Bf16* dout, std::int64_t N) {
  device_args("residual_backward", {dres, dbranch, dout});
  const DeviceScope scope;
  bf::residual_backward(dres, dbranch, dout, N);
}
void dropout_forward(Bf16* out, const Bf16* inp, const std::uint8_t* mask, float p,
                     std::int64_t N) {
  device_args("dropout_forward", {out, inp, mask});
  detail::dropout_p("dropout_forward", p);
  const DeviceScope scope;
  bf::dropout_forward(out, inp, mask, p, N);
}
void dropout_backward(Bf16* dinp, const Bf16* dout, const std::uint8_t* mask, float p,
                      std::int64_t N) {
  device_args("dropout_backward", {dinp, dout, mask});
  detail::dropout_p("dropout_backward", p);
  const DeviceScope scope;
  bf::dropout_backward(dinp, dout, mask, p, N);
}
void dropout_mask_fill(std::uint8_t* mask, const RngStream& s, float p, std::int64_t sample0,
                       std::int64_t elem0, std::int64_t B, std::int64_t n) {
  device_args("dropout_mask_fill", {mask});
  detail::dropout_p("dropout_mask_fill", p);
  const DeviceScope scope;
  eth::dropout_mask_fill(mask, s, p, sample0, elem0, B, n);
}
void convert_to_bf16(Bf16* out, const float* in, std::int64_t n) {
  device_args("convert_to_bf16", {out, in});
  const DeviceScope scope;
  bf::convert_to_bf16(out, in, n);
}
void add_inplace(float* x, const float* y, std::int64_t n) { add_into(x, y, n); }
void add_inplace(double* x, const double* y, std::int64_t n) { add_into(x, y, n); }
void max_inplace(float* x, const float* y, std::int64_t n) { max_into(x, y, n); }
void max_inplace(double* x, const double* y, std::int64_t n) { max_into(x, y, n); }

// ---- cross-entropy --------------------------------------------------------------------------
void crossentropy_forward(double* loss, float* losses, float* lse, const Bf16* logits,
                          const std::int32_t* targets, double scale, std::int64_t N,
                          std::int64_t V) {
  device_args("crossentropy_forward", {losses, lse, logits, targets});
  detail::host_arg("crossentropy_forward", loss);
  const DeviceScope scope;
  bf::crossentropy_forward(loss, losses, lse, logits, targets, scale, N, V);
}
// The scaled sum is the CPU kernel's (token order, double), formed in a host double inside the
// scope and added to the device scalar: the CUDA kernel's one-thread add_scaled_sum_in_order.
void crossentropy_forward_add(double* loss, float* losses, float* lse, const Bf16* logits,
                              const std::int32_t* targets, double scale, std::int64_t N,
                              std::int64_t V) {
  device_args("crossentropy_forward_add", {loss, losses, lse, logits, targets});
  if (loss == nullptr) throw EmuError("[emulated] crossentropy_forward_add: loss is null");
  if (N == 0) return;
  const DeviceScope scope;
  double sum = 0;
  bf::crossentropy_forward(&sum, losses, lse, logits, targets, scale, N, V);
  *loss += sum;
}
void crossentropy_backward(Bf16* dlogits, const Bf16* logits, const float* lse,
                           const std::int32_t* targets, double scale, std::int64_t N,
                           std::int64_t V) {
  device_args("crossentropy_backward", {dlogits, logits, lse, targets});
  const DeviceScope scope;
  bf::crossentropy_backward(dlogits, logits, lse, targets, scale, N, V);
}
void vocab_ce_max(float* mx, const Bf16* logits, std::int64_t N, std::int64_t Vr) {
  device_args("vocab_ce_max", {mx, logits});
  const DeviceScope scope;
  bf::vocab_ce_max(mx, logits, N, Vr);
}
void vocab_ce_sums(float* stats, const Bf16* logits, const float* mx, const std::int32_t* targets,
                   std::int64_t v0, std::int64_t N, std::int64_t Vr) {
  device_args("vocab_ce_sums", {stats, logits, mx, targets});
  const DeviceScope scope;
  bf::vocab_ce_sums(stats, logits, mx, targets, v0, N, Vr);
}
void vocab_ce_finish(double* loss, float* losses, float* lse, const float* mx, const float* stats,
                     double scale, std::int64_t N) {
  device_args("vocab_ce_finish", {losses, lse, mx, stats});
  detail::host_arg("vocab_ce_finish", loss);
  const DeviceScope scope;
  cpu::vocab_ce_finish(loss, losses, lse, mx, stats, scale, N);
}
void vocab_ce_finish_add(double* loss, float* losses, float* lse, const float* mx,
                         const float* stats, double scale, std::int64_t N) {
  device_args("vocab_ce_finish_add", {loss, losses, lse, mx, stats});
  if (loss == nullptr) throw EmuError("[emulated] vocab_ce_finish_add: loss is null");
  if (N == 0) return;
  const DeviceScope scope;
  double sum = 0;
  cpu::vocab_ce_finish(&sum, losses, lse, mx, stats, scale, N);
  *loss += sum;
}
void vocab_ce_backward(Bf16* dlogits, const Bf16* logits, const float* lse,
                       const std::int32_t* targets, std::int64_t v0, double scale, std::int64_t N,
                       std::int64_t Vr) {
  device_args("vocab_ce_backward", {dlogits, logits, lse, targets});
  const DeviceScope scope;
  bf::vocab_ce_backward(dlogits, logits, lse, targets, v0, scale, N, Vr);
}

// ---- optimizer ------------------------------------------------------------------------------
void adamw_update(float* p, Bf16* p_bf16, float* m, float* v, const float* grads, std::int64_t n,
                  const cpu::AdamWScalars& s) {
  device_args("adamw_update", {p, p_bf16, m, v, grads});
  const DeviceScope scope;
  bf::adamw_update(p, p_bf16, m, v, grads, n, s);
}
double sum_squares(const float* x, std::int64_t n) {
  device_args("sum_squares", {x});
  const DeviceScope scope;
  return cpu::sum_squares(x, n);
}

}  // namespace eth::emu
