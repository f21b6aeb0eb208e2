// The run-time choice of stage computation (train/precision_stage.h) is the plain template it
// wraps: fp32 is StageCompute<CpuKernels> on the fp32 parameters and bf16 is
// StageCompute<CpuBf16Kernels> on the state's bf16 copy, bit for bit (loss, gradients, the
// activations a stage sends on); elements are 4 and 2 bytes; the planned arena is what the
// stage allocates; a state of the other precision is refused.
#include "train/precision_stage.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "train/kernel_set.h"
#include "train/kernel_set_bf16.h"
#include "train/stage_compute.h"
#include "train_test_util.h"

namespace eth::precision_stage_test {
namespace {

StageComputeConfig range(const ModelSpec& m, std::int64_t first, std::int64_t last) {
  StageComputeConfig c;
  c.first_unit = first;
  c.last_unit = last;
  c.max_micro_batch = 2;
  c.seq_len = m.seq_len;
  c.dropout = 0.1f;
  c.seed = 3;
  return c;
}

struct Outcome {
  std::vector<std::byte> x_out;
  double loss = 0;
  std::vector<float> grads;
  std::vector<std::byte> dx_in;
};

// The first stage (units 0..1: x_out, dx_in of a made-up gradient) and the rest (loss).
template <class Run>
Outcome run_both(const ModelSpec& m, std::size_t elem, Run run) {
  const std::int64_t B = 2, T = m.seq_len, C = m.hidden;
  const auto tokens = test::random_tokens(1, static_cast<std::size_t>(B * T), m.vocab);
  const auto targets = test::random_tokens(2, static_cast<std::size_t>(B * T), m.vocab);
  const MicroBatch mb = test::micro_batch(tokens, targets, B, T);
  Outcome o;
  const auto n = static_cast<std::size_t>(B * T * C) * elem;
  o.x_out.resize(n);
  std::vector<std::byte> dx(n);
  for (std::size_t i = 0; i < n; ++i) dx[i] = static_cast<std::byte>(i % 5 == 0 ? 0x3c : 0);
  o.dx_in.resize(n);
  run(mb, o, dx);
  return o;
}

TEST(PrecisionStage, Fp32IsStageComputeOfTheCpuKernelsBitForBit) {
  const test::OneThread one;
  const ModelSpec m = test::small_model();
  ModelState state(m, 0, m.num_units() - 1);
  state.init(4);
  const StageComputeConfig cfg = range(m, 0, m.num_units() - 1);
  PrecisionStage stage(Precision::Fp32, m, cfg);
  EXPECT_EQ(stage.activation_element_bytes(), 4u);
  EXPECT_EQ(stage.precision(), Precision::Fp32);
  EXPECT_EQ(stage.device(), ComputeDevice::Cpu);
  EXPECT_EQ(stage.layout().numel(), state.numel());
  const Outcome got = run_both(m, 4, [&](const MicroBatch& mb, Outcome& o, auto&) {
    stage.forward(0, state, mb, nullptr, nullptr);
    o.loss = stage.take_loss();
    state.zero_grads();
    stage.backward(0, state, mb, nullptr, nullptr);
    o.grads.assign(state.grads(), state.grads() + state.numel());
  });
  StageCompute<CpuKernels> plain(m, cfg);
  const Outcome want = run_both(m, 4, [&](const MicroBatch& mb, Outcome& o, auto&) {
    plain.forward(0, state.params(), mb, nullptr, nullptr);
    o.loss = plain.take_loss();
    o.grads.assign(static_cast<std::size_t>(state.numel()), 0.0f);
    plain.backward(0, state.params(), o.grads.data(), mb, nullptr, nullptr);
  });
  EXPECT_EQ(got.loss, want.loss);
  EXPECT_EQ(got.grads, want.grads);
  EXPECT_EQ(stage.arena_bytes_total(), plain.arena_bytes_total());
  EXPECT_EQ(PrecisionStage::planned_arena_bytes(Precision::Fp32, m, cfg),
            stage.arena_bytes_total());
  EXPECT_EQ(stage.held_bytes_per_slot(), plain.held_bytes_per_slot());
}

TEST(PrecisionStage, Bf16IsStageComputeOfTheBf16KernelsOnTheComputeCopyBitForBit) {
  const test::OneThread one;
  const ModelSpec m = test::small_model();
  ModelState state(m, 0, 1, 1, 0, Precision::Bf16);  // a first stage: sends its activations
  state.init(4);
  const StageComputeConfig cfg = range(m, 0, 1);
  PrecisionStage stage(Precision::Bf16, m, cfg);
  EXPECT_EQ(stage.activation_element_bytes(), 2u);
  const Outcome got = run_both(m, 2, [&](const MicroBatch& mb, Outcome& o, auto& dx) {
    stage.forward(0, state, mb, nullptr, o.x_out.data());
    state.zero_grads();
    stage.backward(0, state, mb, dx.data(), nullptr);
    o.grads.assign(state.grads(), state.grads() + state.numel());
  });
  StageCompute<CpuBf16Kernels> plain(m, cfg);
  const Outcome want = run_both(m, 2, [&](const MicroBatch& mb, Outcome& o, auto& dx) {
    plain.forward(0, state.params_bf16(), mb, nullptr, reinterpret_cast<Bf16*>(o.x_out.data()));
    o.grads.assign(static_cast<std::size_t>(state.numel()), 0.0f);
    plain.backward(0, state.params_bf16(), o.grads.data(), mb,
                   reinterpret_cast<const Bf16*>(dx.data()), nullptr);
  });
  EXPECT_EQ(got.x_out, want.x_out);
  EXPECT_EQ(got.grads, want.grads);
  EXPECT_EQ(PrecisionStage::planned_arena_bytes(Precision::Bf16, m, cfg),
            stage.arena_bytes_total());
  // Where the two precisions differ: bf16 activations take half the bytes of fp32's.
  EXPECT_LT(stage.arena_bytes_total(),
            PrecisionStage::planned_arena_bytes(Precision::Fp32, m, cfg));
}

TEST(PrecisionStageDeathTest, AStateOfTheOtherPrecisionIsRefused) {
  const ModelSpec m = test::small_model();
  ModelState fp32(m, 0, m.num_units() - 1);
  fp32.init(1);
  PrecisionStage stage(Precision::Bf16, m, range(m, 0, m.num_units() - 1));
  const auto tokens = test::random_tokens(1, static_cast<std::size_t>(2 * m.seq_len), m.vocab);
  const MicroBatch mb = test::micro_batch(tokens, tokens, 2, m.seq_len);
  EXPECT_DEATH(stage.forward(0, fp32, mb, nullptr, nullptr), "another precision");
}

}  // namespace
}  // namespace eth::precision_stage_test
