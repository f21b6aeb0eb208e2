// The emulated device as one type: EmulatedApi names every function of runtime.h and kernels.h
// that the CUDA backend has too (cuda/runtime.h, cuda/kernels.h), as static constexpr function
// pointers called exactly like the functions, so the trainer's GPU kernel set is written once
// over an Api (GpuKernels<EmulatedApi>, GpuKernels<CudaApi>) and a name one set lacks is a
// compile error there. CudaApi is the same list over eth::cuda, name for name; keep the two in
// step. The emulated-only functions (is_device_memory, allocated_bytes, reserved_bytes,
// DeviceScope) are not listed: a GPU has none of them.
#pragma once

#include <cstdint>

#include "kernels/emulated/kernels.h"
#include "kernels/emulated/runtime.h"

namespace eth {

struct EmulatedApi {
  // The types a kernel set's callers name.
  using Error = emu::EmuError;  // cuda::CudaError
  using DeviceInfo = emu::DeviceInfo;
  using AttnDropout = emu::AttnDropout;  // cuda::AttnDropout itself
  template <typename T>
  using DeviceBuffer = emu::DeviceBuffer<T>;

  // ---- device, memory and stream (runtime.h) ----
  static constexpr auto compiled = &emu::compiled;
  static constexpr auto device_count = &emu::device_count;
  static constexpr auto unavailable_reason = &emu::unavailable_reason;
  static constexpr auto device_info = &emu::device_info;
  static constexpr auto set_device = &emu::set_device;
  static constexpr auto alloc = &emu::alloc;
  static constexpr auto free = &emu::free;
  static constexpr auto copy_to_device = &emu::copy_to_device;
  static constexpr auto copy_to_host = &emu::copy_to_host;
  static constexpr auto copy_on_device = &emu::copy_on_device;
  static constexpr auto memset_zero = &emu::memset_zero;
  static constexpr auto synchronize = &emu::synchronize;

  // ---- kernels (kernels.h) ----
  static constexpr auto encoder_forward = &emu::encoder_forward;
  static constexpr auto encoder_backward = &emu::encoder_backward;
  static constexpr auto vocab_embedding_forward = &emu::vocab_embedding_forward;
  static constexpr auto vocab_embedding_backward = &emu::vocab_embedding_backward;
  static constexpr auto position_forward = &emu::position_forward;
  static constexpr auto position_backward = &emu::position_backward;
  static constexpr auto layernorm_forward = &emu::layernorm_forward;
  static constexpr auto layernorm_backward = &emu::layernorm_backward;
  static constexpr auto rmsnorm_forward = &emu::rmsnorm_forward;
  static constexpr auto rmsnorm_backward = &emu::rmsnorm_backward;
  static constexpr auto rope_forward = &emu::rope_forward;
  static constexpr auto rope_backward = &emu::rope_backward;
  static constexpr auto swiglu_forward = &emu::swiglu_forward;
  static constexpr auto swiglu_backward = &emu::swiglu_backward;
  static constexpr auto matmul_nt_forward = &emu::matmul_nt_forward;
  static constexpr auto matmul_nt_backward = &emu::matmul_nt_backward;
  static constexpr auto matmul_nn_forward = &emu::matmul_nn_forward;
  static constexpr auto matmul_nn_backward = &emu::matmul_nn_backward;
  static constexpr auto matmul_nn_forward_partial = &emu::matmul_nn_forward_partial;
  static constexpr auto matmul_nt_backward_partial = &emu::matmul_nt_backward_partial;
  static constexpr auto matmul_nt_backward_rows = &emu::matmul_nt_backward_rows;
  static constexpr auto matmul_nn_backward_rows = &emu::matmul_nn_backward_rows;
  static constexpr auto matmul_nt_backward_partial_rows = &emu::matmul_nt_backward_partial_rows;
  static constexpr auto attention_forward = &emu::attention_forward;
  static constexpr auto attention_backward = &emu::attention_backward;
  static constexpr auto gelu_forward = &emu::gelu_forward;
  static constexpr auto gelu_backward = &emu::gelu_backward;
  static constexpr auto residual_forward = &emu::residual_forward;
  static constexpr auto residual_backward = &emu::residual_backward;
  static constexpr auto dropout_forward = &emu::dropout_forward;
  static constexpr auto dropout_backward = &emu::dropout_backward;
  static constexpr auto dropout_mask_fill = &emu::dropout_mask_fill;
  static constexpr auto convert_to_bf16 = &emu::convert_to_bf16;
  // Overloaded (float and double), so overloaded static functions, as in CudaApi: a function
  // pointer names one overload, and Api::add_inplace(x, y, n) must pick by argument type.
  static void add_inplace(float* x, const float* y, std::int64_t n) { emu::add_inplace(x, y, n); }
  static void add_inplace(double* x, const double* y, std::int64_t n) {
    emu::add_inplace(x, y, n);
  }
  static void max_inplace(float* x, const float* y, std::int64_t n) { emu::max_inplace(x, y, n); }
  static void max_inplace(double* x, const double* y, std::int64_t n) {
    emu::max_inplace(x, y, n);
  }
  static constexpr auto crossentropy_forward = &emu::crossentropy_forward;
  static constexpr auto crossentropy_forward_add = &emu::crossentropy_forward_add;
  static constexpr auto crossentropy_backward = &emu::crossentropy_backward;
  static constexpr auto vocab_ce_max = &emu::vocab_ce_max;
  static constexpr auto vocab_ce_sums = &emu::vocab_ce_sums;
  static constexpr auto vocab_ce_finish = &emu::vocab_ce_finish;
  static constexpr auto vocab_ce_finish_add = &emu::vocab_ce_finish_add;
  static constexpr auto vocab_ce_backward = &emu::vocab_ce_backward;
  static constexpr auto adamw_update = &emu::adamw_update;
  static constexpr auto sum_squares = &emu::sum_squares;
};

}  // namespace eth
