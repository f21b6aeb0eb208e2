// The kernel set a model state lives on, behind one small interface: ModelState is not a
// template (the checkpoint code, the trainers and the runtime hold one whatever the set), so it
// holds a StateBackend made from a training set K (StateBackendOf<K>): the arena its buffers
// are carved from (K::Arena: host mmap, or one device allocation), the memory operations on them
// (zero, upload, download), the bf16 weight refresh (K::convert_to_bf16), the gradient norm
// (K::sum_squares) and AdamW (K::adamw_update, over the layout's runs). Virtual calls cost one
// per run of the layout per step, nothing per element.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <type_traits>

#include "core/error.h"
#include "core/precision.h"
#include "kernels/bf16.h"
#include "kernels/cpu/optimizer.h"
#include "train/kernel_set_concept.h"
#include "train/model_state.h"

namespace eth {

class StateBackend {
 public:
  virtual ~StateBackend() = default;
  // Whether host code may read and write the buffers (checkpoints, initialization) directly.
  virtual bool host_visible() const = 0;
  virtual std::size_t capacity() const = 0;  // bytes of the arena
  virtual float* take_f32(std::int64_t n) = 0;
  virtual Bf16* take_bf16(std::int64_t n) = 0;
  virtual void zero(float* p, std::int64_t n) = 0;
  virtual void upload(float* dst, const float* host_src, std::int64_t n) = 0;
  virtual void download(float* host_dst, const float* src, std::int64_t n) = 0;
  virtual void convert_to_bf16(Bf16* out, const float* in, std::int64_t n) = 0;
  // The gradient norm's sum: K::sum_squares (fixed 4096-element blocks, added in order).
  virtual double sum_squares(const float* x, std::int64_t n) = 0;
  // One AdamW pass over `runs` (ParamLayout::runs()): masters p, moments m and v, gradients
  // g; p_bf16, the compute copy, is written in the same pass in bf16 precision (null in fp32).
  // `decay_rate` is the weight decay per unit learning rate, applied to runs marked decay.
  virtual void adamw_update(float* p, Bf16* p_bf16, float* m, float* v, const float* g,
                            std::span<const StateRun> runs, cpu::AdamWScalars sc,
                            float decay_rate) = 0;
};

template <class K>
class StateBackendOf final : public StateBackend {
  static_assert(TrainingKernelSet<K>, "a model state needs a training kernel set");

 public:
  explicit StateBackendOf(std::size_t bytes) : arena_(bytes) {}
  bool host_visible() const override { return K::host_visible; }
  std::size_t capacity() const override { return arena_.capacity(); }
  float* take_f32(std::int64_t n) override { return arena_.template take<float>(n); }
  Bf16* take_bf16(std::int64_t n) override { return arena_.template take<Bf16>(n); }
  void zero(float* p, std::int64_t n) override { K::zero(p, n); }
  void upload(float* dst, const float* src, std::int64_t n) override { K::upload(dst, src, n); }
  void download(float* dst, const float* src, std::int64_t n) override {
    K::download(dst, src, n);
  }
  void convert_to_bf16(Bf16* out, const float* in, std::int64_t n) override {
    K::convert_to_bf16(out, in, n);
  }
  double sum_squares(const float* x, std::int64_t n) override { return K::sum_squares(x, n); }
  void adamw_update(float* p, Bf16* p_bf16, float* m, float* v, const float* g,
                    std::span<const StateRun> runs, cpu::AdamWScalars sc,
                    float decay_rate) override {
    for (const StateRun& r : runs) {
      sc.decay = r.decay ? sc.lr * decay_rate : 0.0f;
      const std::int64_t o = r.param_offset;
      if constexpr (std::is_same_v<typename K::Param, float>) {
        K::adamw_update(p + o, p + o, m + o, v + o, g + r.grad_offset, r.count, sc);
      } else {
        K::adamw_update(p + o, p_bf16 + o, m + o, v + o, g + r.grad_offset, r.count, sc);
      }
    }
  }

 private:
  typename K::Arena arena_;
};

// A MakeStateBackend (model_state.h) for set K: its Param is the state's precision (fp32 weights,
// or the bf16 compute copy), ETH_CHECKed.
template <class K>
std::unique_ptr<StateBackend> make_state_backend(Precision precision, std::size_t bytes) {
  constexpr bool fp32 = std::is_same_v<typename K::Param, float>;
  ETH_CHECK(fp32 == (precision == Precision::Fp32),
            "model state: the kernel set does not train in this precision");
  return std::make_unique<StateBackendOf<K>>(bytes);
}
// The runtime's default: the CPU set of the precision (CpuKernels or CpuBf16Kernels).
std::unique_ptr<StateBackend> make_cpu_state_backend(Precision precision, std::size_t bytes);

}  // namespace eth
