// The CUDA backend as one struct: every function of kernels.h and the memory functions of
// runtime.h, under their own names, for train/gpu_kernels.h's GpuKernels<CudaApi> (the stage,
// the model state and the optimizer on the GPU). Written once over such an Api struct, the GPU
// kernel set needs nothing CUDA-specific: the host-emulated device (kernels/emulated/) provides
// an EmulatedApi of the same form. Function pointers (static constexpr) except the overloaded
// add_inplace / max_inplace, which are overloaded static functions (called alike:
// Api::add_inplace(x, y, n) picks the overload by argument type). A plain C++ header.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/kernels.h"
#include "kernels/cuda/runtime.h"

namespace eth {

struct CudaApi {
  // The types a kernel set's callers name.
  using Error = cuda::CudaError;
  using DeviceInfo = cuda::DeviceInfo;
  using AttnDropout = cuda::AttnDropout;
  template <typename T>
  using DeviceBuffer = cuda::DeviceBuffer<T>;

  // ---- kernels.h ----
  static constexpr auto encoder_forward = &cuda::encoder_forward;
  static constexpr auto encoder_backward = &cuda::encoder_backward;
  static constexpr auto vocab_embedding_forward = &cuda::vocab_embedding_forward;
  static constexpr auto vocab_embedding_backward = &cuda::vocab_embedding_backward;
  static constexpr auto position_forward = &cuda::position_forward;
  static constexpr auto position_backward = &cuda::position_backward;
  static constexpr auto layernorm_forward = &cuda::layernorm_forward;
  static constexpr auto layernorm_backward = &cuda::layernorm_backward;
  static constexpr auto rmsnorm_forward = &cuda::rmsnorm_forward;
  static constexpr auto rmsnorm_backward = &cuda::rmsnorm_backward;
  static constexpr auto rope_forward = &cuda::rope_forward;
  static constexpr auto rope_backward = &cuda::rope_backward;
  static constexpr auto swiglu_forward = &cuda::swiglu_forward;
  static constexpr auto swiglu_backward = &cuda::swiglu_backward;
  static constexpr auto matmul_nt_forward = &cuda::matmul_nt_forward;
  static constexpr auto matmul_nt_backward = &cuda::matmul_nt_backward;
  static constexpr auto matmul_nn_forward = &cuda::matmul_nn_forward;
  static constexpr auto matmul_nn_backward = &cuda::matmul_nn_backward;
  static constexpr auto matmul_nn_forward_partial = &cuda::matmul_nn_forward_partial;
  static constexpr auto matmul_nt_backward_partial = &cuda::matmul_nt_backward_partial;
  static constexpr auto matmul_nt_backward_rows = &cuda::matmul_nt_backward_rows;
  static constexpr auto matmul_nn_backward_rows = &cuda::matmul_nn_backward_rows;
  static constexpr auto matmul_nt_backward_partial_rows = &cuda::matmul_nt_backward_partial_rows;
  static constexpr auto attention_forward = &cuda::attention_forward;
  static constexpr auto attention_backward = &cuda::attention_backward;
  static constexpr auto gelu_forward = &cuda::gelu_forward;
  static constexpr auto gelu_backward = &cuda::gelu_backward;
  static constexpr auto residual_forward = &cuda::residual_forward;
  static constexpr auto residual_backward = &cuda::residual_backward;
  static constexpr auto dropout_forward = &cuda::dropout_forward;
  static constexpr auto dropout_backward = &cuda::dropout_backward;
  static constexpr auto dropout_mask_fill = &cuda::dropout_mask_fill;
  static constexpr auto convert_to_bf16 = &cuda::convert_to_bf16;
  static constexpr auto crossentropy_forward = &cuda::crossentropy_forward;
  static constexpr auto crossentropy_forward_add = &cuda::crossentropy_forward_add;
  static constexpr auto crossentropy_backward = &cuda::crossentropy_backward;
  static constexpr auto vocab_ce_max = &cuda::vocab_ce_max;
  static constexpr auto vocab_ce_sums = &cuda::vocab_ce_sums;
  static constexpr auto vocab_ce_finish = &cuda::vocab_ce_finish;
  static constexpr auto vocab_ce_finish_add = &cuda::vocab_ce_finish_add;
  static constexpr auto vocab_ce_backward = &cuda::vocab_ce_backward;
  static constexpr auto adamw_update = &cuda::adamw_update;
  static constexpr auto sum_squares = &cuda::sum_squares;
  static void add_inplace(float* x, const float* y, std::int64_t n) { cuda::add_inplace(x, y, n); }
  static void add_inplace(double* x, const double* y, std::int64_t n) {
    cuda::add_inplace(x, y, n);
  }
  static void max_inplace(float* x, const float* y, std::int64_t n) { cuda::max_inplace(x, y, n); }
  static void max_inplace(double* x, const double* y, std::int64_t n) {
    cuda::max_inplace(x, y, n);
  }

  // ---- runtime.h: the device, its memory and the stream ----
  static constexpr auto compiled = &cuda::compiled;
  static constexpr auto device_count = &cuda::device_count;
  static constexpr auto unavailable_reason = &cuda::unavailable_reason;
  static constexpr auto device_info = &cuda::device_info;
  static constexpr auto set_device = &cuda::set_device;
  static constexpr auto alloc = &cuda::alloc;
  static constexpr auto free = &cuda::free;
  static constexpr auto copy_to_device = &cuda::copy_to_device;
  static constexpr auto copy_to_host = &cuda::copy_to_host;
  static constexpr auto copy_on_device = &cuda::copy_on_device;
  static constexpr auto memset_zero = &cuda::memset_zero;
  static constexpr auto synchronize = &cuda::synchronize;
};

}  // namespace eth
