// bf16 mixed precision in the trainer: the compute copy is the rounded fp32 masters (after init,
// an optimizer step and a checkpoint load), operator recompute and stage splits are bitwise in
// bf16 as in fp32, a slot holds the bytes the memory model charges (half of fp32's except masks
// and statistics), the bf16 gradient is the fp32 one to bf16 rounding, and checkpoints resume
// across precisions in both directions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "kernels/bf16.h"
#include "train/checkpoint.h"
#include "train/kernel_set.h"
#include "train/kernel_set_bf16.h"
#include "train/stage_compute.h"
#include "train/trainer.h"
#include "train_test_util.h"

namespace eth::bf16_train_test {
namespace {

namespace fs = std::filesystem;
using test::micro_batch;

StageComputeConfig whole(const ModelSpec& m, std::int64_t B, RecomputeSet rc, float p) {
  StageComputeConfig c;
  c.last_unit = m.num_units() - 1;
  c.max_micro_batch = B;
  c.seq_len = m.seq_len;
  c.recompute = rc;
  c.dropout = p;
  c.seed = 99;
  return c;
}

std::vector<float> copy_of(const float* p, std::int64_t n) { return {p, p + n}; }

// Every element of the compute copy is bf16_from_float of its master.
::testing::AssertionResult copy_is_rounded_masters(const ModelState& st) {
  if (st.params_bf16() == nullptr) return ::testing::AssertionFailure() << "no bf16 copy";
  for (std::int64_t i = 0; i < st.numel(); ++i) {
    if (!(st.params_bf16()[i] == bf16_from_float(st.params()[i]))) {
      return ::testing::AssertionFailure() << "element " << i << " of " << st.numel();
    }
  }
  return ::testing::AssertionSuccess();
}

TrainConfig tiny_config(const fs::path& data, Precision p) {
  TrainConfig c;
  c.model = model_preset("tiny");
  c.data = data;
  c.steps = 6;
  c.global_batch = 4;
  c.micro_batch = 2;
  c.lr = LrSchedule{1e-3, 1e-4, 2, 6};
  c.dropout = 0.1f;
  c.seed = 4;
  c.precision = p;
  return c;
}

TEST(Bf16State, TheComputeCopyIsTheRoundedMastersAfterInitStepAndLoad) {
  const test::OneThread one_thread;
  const fs::path dir = test::temp_dir("bf16_copy");
  const TrainConfig c = tiny_config(test::synthetic_file(dir, 20000, 256), Precision::Bf16);
  Trainer t(c);
  EXPECT_TRUE(copy_is_rounded_masters(t.state()));
  t.step();
  EXPECT_TRUE(copy_is_rounded_masters(t.state()));
  // fp32 and bf16 states of one model hold the same masters after the same init.
  ModelState s32(c.model, 0, c.model.num_units() - 1);
  s32.init(c.seed);
  EXPECT_EQ(s32.params_bf16(), nullptr);
  const fs::path ckpt = t.save_checkpoint(dir);
  ModelState loaded(c.model, 0, c.model.num_units() - 1, 1, 0, Precision::Bf16);
  load_checkpoint(ckpt, loaded);
  EXPECT_TRUE(copy_is_rounded_masters(loaded));
  EXPECT_EQ(copy_of(loaded.params(), loaded.numel()), copy_of(t.state().params(), loaded.numel()));
  EXPECT_EQ(loaded.state_bytes(), s32.state_bytes() + arena_bytes<Bf16>(s32.numel()));
}

struct Result {
  double loss = 0;
  std::vector<float> grads;
};

Result run_bf16(const ModelSpec& m, const ModelState& st, RecomputeSet rc, float p,
                std::int64_t B) {
  const auto tokens = test::random_tokens(3, static_cast<std::size_t>(B * m.seq_len), m.vocab);
  const auto targets = test::random_tokens(4, static_cast<std::size_t>(B * m.seq_len), m.vocab);
  StageCompute<CpuBf16Kernels> sc(m, whole(m, B, rc, p));
  Result r;
  r.grads.assign(static_cast<std::size_t>(st.numel()), 0.0f);
  const MicroBatch mb = micro_batch(tokens, targets, B, m.seq_len);
  sc.forward(0, st.params_bf16(), mb, nullptr, nullptr);
  r.loss = sc.take_loss();
  sc.backward(0, st.params_bf16(), r.grads.data(), mb, nullptr, nullptr);
  return r;
}

TEST(Bf16Stage, EveryRecomputeSetGivesBitwiseIdenticalGradients) {
  const test::OneThread one_thread;
  const ModelSpec m = model_preset("tiny");
  ModelState st(m, 0, m.num_units() - 1, 1, 0, Precision::Bf16);
  st.init(5);
  for (float p : {0.0f, 0.1f}) {
    const Result base = run_bf16(m, st, {}, p, 2);
    for (unsigned bits = 1; bits < (1u << kNumRecomputeOps); ++bits) {
      const Result r = run_bf16(m, st, RecomputeSet::from_bits(static_cast<std::uint8_t>(bits)),
                                p, 2);
      EXPECT_EQ(r.loss, base.loss) << "recompute bits " << bits << " p " << p;
      EXPECT_EQ(0, std::memcmp(r.grads.data(), base.grads.data(), r.grads.size() * 4))
          << "recompute bits " << bits << " p " << p;
    }
  }
}

TEST(Bf16Stage, TwoStagesEqualTheWholeModelBitwise) {
  // The boundary carries the bf16 tensor the whole model keeps between the same units.
  const test::OneThread one_thread;
  const ModelSpec m = model_preset("tiny");
  const std::int64_t B = 3, T = m.seq_len, C = m.hidden;
  ModelState st(m, 0, m.num_units() - 1, 1, 0, Precision::Bf16);
  st.init(9);
  const Result whole_run = run_bf16(m, st, {}, 0.1f, B);
  StageComputeConfig ca = whole(m, B, {}, 0.1f), cb = whole(m, B, RecomputeSet::all_ops(), 0.1f);
  ca.last_unit = 2;
  cb.first_unit = 3;
  StageCompute<CpuBf16Kernels> a(m, ca), b(m, cb);
  const auto tokens = test::random_tokens(3, static_cast<std::size_t>(B * T), m.vocab);
  const auto targets = test::random_tokens(4, static_cast<std::size_t>(B * T), m.vocab);
  const MicroBatch mb = micro_batch(tokens, targets, B, T);
  const std::int64_t split = st.layout().offset(3, 0);  // unit-major: unit 3 starts here
  std::vector<Bf16> act(static_cast<std::size_t>(B * T * C)), dact(act.size());
  std::vector<float> grads(static_cast<std::size_t>(st.numel()), 0.0f);
  a.forward(0, st.params_bf16(), mb, nullptr, act.data());
  b.forward(0, st.params_bf16() + split, mb, act.data(), nullptr);
  const double loss = b.take_loss();
  b.backward(0, st.params_bf16() + split, grads.data() + split, mb, nullptr, dact.data());
  a.backward(0, st.params_bf16(), grads.data(), mb, dact.data(), nullptr);
  EXPECT_EQ(loss, whole_run.loss);
  EXPECT_EQ(0, std::memcmp(grads.data(), whole_run.grads.data(), grads.size() * 4));
}

TEST(Bf16Stage, SlotsHoldHalfTheFp32BytesExceptMasksAndStatistics) {
  const ModelSpec m = model_preset("tiny");
  const std::int64_t B = 2, T = m.seq_len, C = m.hidden, F = m.ffn, NH = m.heads, V = m.vocab;
  const double N = static_cast<double>(B * T), TT = static_cast<double>(B * NH * T * T);
  StageCompute<CpuBf16Kernels> sc(m, whole(m, B, {}, 0.1f));
  auto idx = [](RecomputeOp op) { return static_cast<std::size_t>(op); };
  const ActivationBytes& blk = sc.activation_bytes(1);
  EXPECT_EQ(blk.op[idx(RecomputeOp::Qkv)], 2 * N * 3 * C);
  EXPECT_EQ(blk.op[idx(RecomputeOp::AttnSoftmax)], 2 * TT);
  EXPECT_EQ(blk.op[idx(RecomputeOp::AttnScore)], 2 * TT);
  EXPECT_EQ(blk.op[idx(RecomputeOp::AttnDropout)], 1 * TT);
  EXPECT_EQ(blk.op[idx(RecomputeOp::MlpAct)], 2 * N * F);
  // x, ln1, atty, x2, ln2 and the GELU input in bf16; the four norm statistics fp32; the two
  // residual masks bytes.
  EXPECT_EQ(blk.other, 2 * (5 * N * C + N * F) + 4 * 4 * N + 2 * N * C);
  EXPECT_EQ(blk.unit_input, 2 * N * C);
  EXPECT_EQ(sc.activation_bytes(0).other, 4 * N + N * C);  // int32 tokens, byte mask
  // Head: x, lnf, logits in bf16; mean, rstd, lse, losses fp32.
  EXPECT_EQ(sc.activation_bytes(m.layers + 1).other,
            2 * (2 * N * C + N * static_cast<double>(V)) + 4 * 4 * N);
}

TEST(Bf16Stage, GradientIsTheFp32GradientToBf16Rounding) {
  // The same weights (bf16-representable, so both precisions start from one model) through both
  // kernel sets. Each bf16 tensor carries one rounding (2^-9 relative) per store; over the ~10
  // stores between the loss and a weight gradient, and through the softmax and layer norms that
  // amplify relative errors by O(1), the gradient moves by a few 2^-8 of its scale: we allow 2e-2
  // of the largest element (measured 6.4e-3). A wrong layout or a lost fp32 accumulation is off
  // by O(1).
  const test::OneThread one_thread;
  const ModelSpec m = model_preset("tiny");
  const std::int64_t B = 2;
  ModelState s16(m, 0, m.num_units() - 1, 1, 0, Precision::Bf16);
  s16.init(3);
  ModelState s32(m, 0, m.num_units() - 1);
  for (std::int64_t i = 0; i < s32.numel(); ++i) s32.params()[i] = float_from_bf16(s16.params_bf16()[i]);
  const Result r16 = run_bf16(m, s16, {}, 0.0f, B);
  const auto tokens = test::random_tokens(3, static_cast<std::size_t>(B * m.seq_len), m.vocab);
  const auto targets = test::random_tokens(4, static_cast<std::size_t>(B * m.seq_len), m.vocab);
  StageCompute<CpuKernels> sc(m, whole(m, B, {}, 0.0f));
  std::vector<float> g32(static_cast<std::size_t>(s32.numel()), 0.0f);
  const MicroBatch mb = micro_batch(tokens, targets, B, m.seq_len);
  sc.forward(0, s32.params(), mb, nullptr, nullptr);
  const double loss32 = sc.take_loss();
  sc.backward(0, s32.params(), g32.data(), mb, nullptr, nullptr);
  EXPECT_NEAR(r16.loss, loss32, 1e-2 * loss32);
  double gmax = 0, worst = 0;
  for (std::size_t i = 0; i < g32.size(); ++i) {
    gmax = std::max(gmax, std::abs(static_cast<double>(g32[i])));
    worst = std::max(worst, std::abs(static_cast<double>(g32[i]) - r16.grads[i]));
  }
  ASSERT_GT(gmax, 0);
  EXPECT_LT(worst, 2e-2 * gmax);
}

TEST(Bf16Trainer, CheckpointsResumeAcrossPrecisionsInBothDirections) {
  const test::OneThread one_thread;
  const fs::path dir = test::temp_dir("bf16_resume");
  const fs::path data = test::synthetic_file(dir, 20000, 256);
  const TrainConfig c16 = tiny_config(data, Precision::Bf16), c32 = tiny_config(data, Precision::Fp32);
  // bf16 for 6 steps straight, against bf16 3 steps -> fp32 (no step, saved again) -> bf16 3
  // steps: the fp32 run keeps the masters and moments it loaded, so nothing is lost.
  Trainer straight(c16);
  for (int i = 0; i < 6; ++i) straight.step();
  Trainer first(c16);
  for (int i = 0; i < 3; ++i) first.step();
  const fs::path a = first.save_checkpoint(dir / "a");
  const Trainer via32(c32, a);
  EXPECT_EQ(copy_of(via32.state().params(), via32.state().numel()),
            copy_of(first.state().params(), first.state().numel()));
  const fs::path b = via32.save_checkpoint(dir / "b");
  Trainer back(c16, b);
  for (int i = 0; i < 3; ++i) back.step();
  const std::int64_t n = straight.state().numel();
  EXPECT_EQ(copy_of(back.state().params(), n), copy_of(straight.state().params(), n));
  EXPECT_EQ(copy_of(back.state().adam_v(), n), copy_of(straight.state().adam_v(), n));
  // fp32 -> bf16 and bf16 -> fp32 continue the other precision's training: the next loss is
  // within the two precisions' difference (1e-2) of the loss the run would have had.
  Trainer f32(c32);
  for (int i = 0; i < 3; ++i) f32.step();
  const fs::path c = f32.save_checkpoint(dir / "c");
  Trainer as16(c16, c);
  EXPECT_TRUE(copy_is_rounded_masters(as16.state()));
  const double loss16 = as16.step().loss, loss32 = f32.step().loss;
  EXPECT_NEAR(loss16, loss32, 1e-2 * loss32);
  Trainer as32(c32, a);
  EXPECT_NEAR(as32.step().loss, first.step().loss, 1e-2 * loss32);
}

}  // namespace
}  // namespace eth::bf16_train_test
