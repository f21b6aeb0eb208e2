// StageCompute in the precision and on the device a run chooses at start-up (eth train
// --precision, --device): fp32 (StageCompute<CpuKernels>) or bf16 mixed precision
// (StageCompute<CpuBf16Kernels>) on the CPU, or bf16 on a GPU set (GpuKernels<EmulatedApi>,
// GpuKernels<CudaApi>: activations in device memory, the state's weights read on the device)
// behind one interface, so the trainer, the runtime and the profiler hold one object whatever
// the precision and device. On a GPU set x_in / x_out / dx_in / dx_out are device pointers
// (null on a single stage: the tokens and targets of a MicroBatch stay host arrays, uploaded by
// the stage).
// Activations between stages travel as raw bytes of activation_element_bytes() each (4 or 2);
// the weights come from the ModelState (its fp32 parameters, or its bf16 compute copy), the
// gradients go to its fp32 gradient buffer in both precisions. Not a kernel dispatch: each
// instantiation is the plain template.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <variant>

#include "core/precision.h"
#include "kernels/cuda/api.h"
#include "kernels/emulated/api.h"
#include "train/compute_device.h"
#include "train/gpu_kernels.h"
#include "train/kernel_set.h"
#include "train/kernel_set_bf16.h"
#include "train/model_state.h"
#include "train/stage_compute.h"

namespace eth {

class PrecisionStage {
 public:
  // `precision` Fp32 or Bf16 (ETH_CHECK; Bf16 only on a GPU device); `tp_group` as
  // StageCompute's.
  PrecisionStage(Precision precision, const ModelSpec& model, const StageComputeConfig& cfg,
                 TpGroup* tp_group = nullptr, ComputeDevice device = ComputeDevice::Cpu);
  ~PrecisionStage();
  PrecisionStage(const PrecisionStage&) = delete;
  PrecisionStage& operator=(const PrecisionStage&) = delete;

  Precision precision() const { return precision_; }
  ComputeDevice device() const { return device_; }
  // Bytes of one activation element (x_in, x_out, dx_in, dx_out): 4 in fp32, 2 in bf16.
  std::size_t activation_element_bytes() const;
  const StageComputeConfig& config() const;
  const ParamLayout& layout() const;

  // StageCompute::forward / backward with the weights and gradients of `state` (same layout and
  // precision as this stage: ETH_CHECK). x_in, x_out, dx_out, dx_in: (B,T,C) activation elements.
  void forward(int slot, const ModelState& state, const MicroBatch& mb, const std::byte* x_in,
               std::byte* x_out);
  double take_loss();  // StageCompute::take_loss: once per step
  void backward(int slot, ModelState& state, const MicroBatch& mb, const std::byte* dx_out,
                std::byte* dx_in, const std::function<void(std::int64_t)>& unit_done = {});

  const ActivationBytes& activation_bytes(std::int64_t u) const;
  double held_bytes_per_slot() const;
  std::size_t arena_bytes_total() const;
  static std::size_t planned_arena_bytes(Precision precision, const ModelSpec& model,
                                         const StageComputeConfig& cfg,
                                         ComputeDevice device = ComputeDevice::Cpu);

 private:
  Precision precision_;
  ComputeDevice device_;
  std::variant<std::unique_ptr<StageCompute<CpuKernels>>,
               std::unique_ptr<StageCompute<CpuBf16Kernels>>,
               std::unique_ptr<StageCompute<GpuKernels<EmulatedApi>>>,
               std::unique_ptr<StageCompute<GpuKernels<CudaApi>>>>
      impl_;
};

}  // namespace eth
