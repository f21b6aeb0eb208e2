// The run-time choice between the fp32 and bf16 stage computations. See precision_stage.h.
#include "train/precision_stage.h"

#include "core/error.h"

namespace eth {

namespace {

template <class K>
const typename K::Param* weights_of(const ModelState& state);
template <>
const float* weights_of<CpuKernels>(const ModelState& state) {
  return state.params();
}
template <>
const Bf16* weights_of<CpuBf16Kernels>(const ModelState& state) {
  return state.params_bf16();
}

}  // namespace

PrecisionStage::PrecisionStage(Precision precision, const ModelSpec& model,
                               const StageComputeConfig& cfg, TpGroup* tp_group)
    : precision_(precision) {
  ETH_CHECK(runtime_precision(precision), "PrecisionStage: the runtime trains in fp32 or bf16");
  if (precision == Precision::Bf16) {
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
                                                const StageComputeConfig& cfg) {
  return precision == Precision::Bf16
             ? StageCompute<CpuBf16Kernels>::planned_arena_bytes(model, cfg)
             : StageCompute<CpuKernels>::planned_arena_bytes(model, cfg);
}

}  // namespace eth
