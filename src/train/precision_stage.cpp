// The run-time choice between the fp32 and bf16 stage computations. See precision_stage.h.
#include "train/precision_stage.h"

#include <string>
#include <type_traits>

#include "core/error.h"
#include "train/state_backend.h"

namespace eth {

namespace {

// The weights set K reads: the fp32 parameters, or the bf16 compute copy (on a GPU set in
// device memory, where the state's backend put it).
template <class K>
const typename K::Param* weights_of(const ModelState& state) {
  if constexpr (std::is_same_v<typename K::Param, float>) {
    return state.params();
  } else {
    return state.params_bf16();
  }
}

// The state must live where set K reads it: host memory for the CPU sets, device memory for a
// GPU set (a host state handed to a GPU stage would be a crash on a GPU).
void check_state_device(const ModelState& state, ComputeDevice device, const char* what) {
  ETH_CHECK(state.backend().host_visible() == !is_gpu_device(device),
            std::string(what) + ": the model state lives on another device than the stage");
}

}  // namespace

PrecisionStage::PrecisionStage(Precision precision, const ModelSpec& model,
                               const StageComputeConfig& cfg, TpGroup* tp_group,
                               ComputeDevice device)
    : precision_(precision), device_(device) {
  ETH_CHECK(runtime_precision(precision), "PrecisionStage: the runtime trains in fp32 or bf16");
  ETH_CHECK(!is_gpu_device(device) || precision == Precision::Bf16,
            "PrecisionStage: a GPU set trains in bf16 only");
  if (device == ComputeDevice::Emulated) {
    impl_ = std::make_unique<StageCompute<GpuKernels<EmulatedApi>>>(model, cfg, tp_group);
  } else if (device == ComputeDevice::Cuda) {
    impl_ = std::make_unique<StageCompute<GpuKernels<CudaApi>>>(model, cfg, tp_group);
  } else if (precision == Precision::Bf16) {
    impl_ = std::make_unique<StageCompute<CpuBf16Kernels>>(model, cfg, tp_group);
  } else {
    impl_ = std::make_unique<StageCompute<CpuKernels>>(model, cfg, tp_group);
  }
}

PrecisionStage::~PrecisionStage() = default;

std::size_t PrecisionStage::activation_element_bytes() const {
  return std::visit(
      [](const auto& s) {
        using SC = std::remove_reference_t<decltype(*s)>;
        return sizeof(typename SC::Act);
      },
      impl_);
}

const StageComputeConfig& PrecisionStage::config() const {
  return std::visit([](const auto& s) -> const StageComputeConfig& { return s->config(); }, impl_);
}

const ParamLayout& PrecisionStage::layout() const {
  return std::visit([](const auto& s) -> const ParamLayout& { return s->layout(); }, impl_);
}

void PrecisionStage::forward(int slot, const ModelState& state, const MicroBatch& mb,
                             const std::byte* x_in, std::byte* x_out) {
  ETH_CHECK(state.precision() == precision_, "stage forward: the state is of another precision");
  check_state_device(state, device_, "stage forward");
  std::visit(
      [&](auto& s) {
        using SC = std::remove_reference_t<decltype(*s)>;
        using Act = typename SC::Act;
        s->forward(slot, weights_of<typename SC::Kernels>(state), mb,
                          reinterpret_cast<const Act*>(x_in), reinterpret_cast<Act*>(x_out));
      },
      impl_);
}

double PrecisionStage::take_loss() {
  return std::visit([](auto& s) { return s->take_loss(); }, impl_);
}

void PrecisionStage::backward(int slot, ModelState& state, const MicroBatch& mb,
                              const std::byte* dx_out, std::byte* dx_in,
                              const std::function<void(std::int64_t)>& unit_done) {
  ETH_CHECK(state.precision() == precision_, "stage backward: the state is of another precision");
  check_state_device(state, device_, "stage backward");
  std::visit(
      [&](auto& s) {
        using SC = std::remove_reference_t<decltype(*s)>;
        using Act = typename SC::Act;
        s->backward(slot, weights_of<typename SC::Kernels>(state), state.grads(), mb,
                    reinterpret_cast<const Act*>(dx_out), reinterpret_cast<Act*>(dx_in),
                    unit_done);
      },
      impl_);
}

const ActivationBytes& PrecisionStage::activation_bytes(std::int64_t u) const {
  return std::visit([u](const auto& s) -> const ActivationBytes& { return s->activation_bytes(u); },
                    impl_);
}

double PrecisionStage::held_bytes_per_slot() const {
  return std::visit([](const auto& s) { return s->held_bytes_per_slot(); }, impl_);
}

std::size_t PrecisionStage::arena_bytes_total() const {
  return std::visit([](const auto& s) { return s->arena_bytes_total(); }, impl_);
}

std::size_t PrecisionStage::planned_arena_bytes(Precision precision, const ModelSpec& model,
                                                const StageComputeConfig& cfg,
                                                ComputeDevice device) {
  if (device == ComputeDevice::Emulated) {
    return StageCompute<GpuKernels<EmulatedApi>>::planned_arena_bytes(model, cfg);
  }
  if (device == ComputeDevice::Cuda) {
    return StageCompute<GpuKernels<CudaApi>>::planned_arena_bytes(model, cfg);
  }
  return precision == Precision::Bf16
             ? StageCompute<CpuBf16Kernels>::planned_arena_bytes(model, cfg)
             : StageCompute<CpuKernels>::planned_arena_bytes(model, cfg);
}

}  // namespace eth
