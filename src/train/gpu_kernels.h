// The GPU kernel set, written once over an `Api` struct of the backend's functions
// (kernels/cuda/api.h CudaApi; the host-emulated device's EmulatedApi has the same form): every
// kernel of kernels/cuda/kernels.h under its name, AttnDropout, and the memory functions of
// kernels/cuda/runtime.h (alloc, free, copy_to_device, copy_to_host, copy_on_device,
// memset_zero, synchronize). Nothing here is CUDA-specific.
//   - element types: bf16 activations and weight copies, fp32 gradients, statistics, partial
//     sums, masters and moments (the CPU bf16 set's, kernel_set_bf16.h);
//   - memory: DeviceMemory<Api> (memory.h): one device allocation per arena, copies explicit;
//   - attention: FusedAttention (only lse saved; the attention recompute classes hold nothing);
//   - the loss: Api::crossentropy_forward_add / vocab_ce_finish_add add into a device scalar,
//     read once per step by StageCompute::take_loss() (one transfer);
//   - the optimizer on the device: Api::adamw_update (masters, moments and the bf16 copy in one
//     pass), Api::sum_squares, Api::convert_to_bf16.
// Instantiated as StageCompute<GpuKernels<CudaApi>> in train/stage_compute_gpu.cpp in every build
// (without CUDA, kernels/cuda/no_cuda.cpp's definitions throw at run time).
#pragma once

#include <cstdint>

#include "kernels/bf16.h"
#include "train/attention_fused.h"
#include "train/memory.h"

namespace eth {

template <class Api>
struct GpuKernels : DeviceMemory<Api> {
  using Act = Bf16;
  using Param = Bf16;
  using Grad = float;
  using Stat = float;
  using Acc = float;
  using Memory = DeviceMemory<Api>;
  using Attention = FusedAttention<GpuKernels<Api>>;
  using AttnDropout = typename Api::AttnDropout;

  static constexpr auto encoder_forward = Api::encoder_forward;
  static constexpr auto encoder_backward = Api::encoder_backward;
  static constexpr auto layernorm_forward = Api::layernorm_forward;
  static constexpr auto layernorm_backward = Api::layernorm_backward;
  // Llama blocks (kernels/README.md; the stage calls them where the model says so).
  static constexpr auto rmsnorm_forward = Api::rmsnorm_forward;
  static constexpr auto rmsnorm_backward = Api::rmsnorm_backward;
  static constexpr auto rope_forward = Api::rope_forward;
  static constexpr auto rope_backward = Api::rope_backward;
  static constexpr auto swiglu_forward = Api::swiglu_forward;
  static constexpr auto swiglu_backward = Api::swiglu_backward;
  static constexpr auto matmul_nt_forward = Api::matmul_nt_forward;
  static constexpr auto matmul_nt_backward = Api::matmul_nt_backward;
  static constexpr auto matmul_nn_forward = Api::matmul_nn_forward;
  static constexpr auto matmul_nn_backward = Api::matmul_nn_backward;
  static constexpr auto matmul_nt_backward_rows = Api::matmul_nt_backward_rows;
  static constexpr auto matmul_nn_backward_rows = Api::matmul_nn_backward_rows;
  static constexpr auto attention_forward = Api::attention_forward;
  static constexpr auto attention_backward = Api::attention_backward;
  static constexpr auto gelu_forward = Api::gelu_forward;
  static constexpr auto gelu_backward = Api::gelu_backward;
  static constexpr auto residual_forward = Api::residual_forward;
  static constexpr auto residual_backward = Api::residual_backward;
  static constexpr auto dropout_forward = Api::dropout_forward;
  static constexpr auto dropout_backward = Api::dropout_backward;
  static constexpr auto crossentropy_forward_add = Api::crossentropy_forward_add;
  static constexpr auto crossentropy_backward = Api::crossentropy_backward;

  // tp > 1 stages: fp32 partial sums, rounded once, and the vocabulary-parallel shares.
  static constexpr auto matmul_nn_forward_partial = Api::matmul_nn_forward_partial;
  static constexpr auto matmul_nt_backward_partial = Api::matmul_nt_backward_partial;
  static constexpr auto matmul_nt_backward_partial_rows = Api::matmul_nt_backward_partial_rows;
  static void store_partial(Bf16* out, const float* sum, std::int64_t n) {
    Api::convert_to_bf16(out, sum, n);
  }
  static constexpr auto vocab_embedding_forward = Api::vocab_embedding_forward;
  static constexpr auto vocab_embedding_backward = Api::vocab_embedding_backward;
  static constexpr auto position_forward = Api::position_forward;
  static constexpr auto position_backward = Api::position_backward;
  static constexpr auto vocab_ce_max = Api::vocab_ce_max;
  static constexpr auto vocab_ce_sums = Api::vocab_ce_sums;
  static constexpr auto vocab_ce_finish_add = Api::vocab_ce_finish_add;
  static constexpr auto vocab_ce_backward = Api::vocab_ce_backward;

  // The optimizer and the model state on the device.
  static constexpr auto adamw_update = Api::adamw_update;
  static constexpr auto sum_squares = Api::sum_squares;
  static constexpr auto convert_to_bf16 = Api::convert_to_bf16;
};

}  // namespace eth
