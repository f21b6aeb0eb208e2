// The single-process trainer on llama-tiny: it learns (the successor sequence), a resumed run
// continues bit-identically (checkpoints hold the Llama tensors), the initialization is the
// stated one, and the GPU trainer on the host-emulated device takes the CPU bf16 trainer's step
// within the bf16 tolerance (tests/train/emulated_train_test.cpp states it: 2 u L).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "train/checkpoint.h"
#include "train/optimizer.h"
#include "train/state_backend.h"
#include "train/trainer.h"
#include "llama_test_util.h"
#include "train_test_util.h"

namespace eth {
namespace {

namespace fs = std::filesystem;

TrainConfig llama_config(const fs::path& data) {
  TrainConfig c;
  c.model = test::llama_tiny();
  c.data = data;
  c.steps = 6;
  c.global_batch = 4;
  c.micro_batch = 2;
  c.seq_len = 32;
  c.lr = LrSchedule{1e-3, 1e-4, 2, 6};
  c.dropout = 0.1f;
  c.seed = 4;
  return c;
}

TEST(LlamaState, InitializationIsNormalMatricesAndUnitNorms) {
  const ModelSpec m = test::llama_tiny();
  ModelState s(m, 0, m.num_units() - 1);
  s.init(3);
  for (const UnitSlot& u : s.layout().units()) {
    for (const TensorSlot& t : u.tensors) {
      const float* p = s.params() + t.offset;
      const std::int64_t n = t.desc.numel();
      if (t.desc.shape.size() == 1) {  // RMSNorm weights; the model has no biases
        for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(p[i], 1.0f) << t.desc.name;
        continue;
      }
      double sum = 0, sq = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        sum += p[i];
        sq += static_cast<double>(p[i]) * p[i];
      }
      const double mean = sum / static_cast<double>(n);
      const double sd = std::sqrt(sq / static_cast<double>(n) - mean * mean);
      // n >= 4096 draws: the sample deviation is within 4% of 0.02 (its standard error is
      // 0.02 / sqrt(2 n) < 1.2%), the mean within 4 standard errors of 0.
      EXPECT_NEAR(sd, 0.02, 0.02 * 0.04) << "unit " << u.unit << " " << t.desc.name;
      EXPECT_LT(std::abs(mean), 4 * 0.02 / std::sqrt(static_cast<double>(n))) << t.desc.name;
    }
  }
  // Every Llama tensor is in the layout, in model/arithmetic.h's order, and no other.
  std::vector<std::string> block;
  for (const TensorSlot& t : s.layout().unit(1).tensors) block.push_back(t.desc.name);
  EXPECT_EQ(block, (std::vector<std::string>{"ln1_w", "qkv_w", "proj_w", "ln2_w", "gate_w", "up_w",
                                             "down_w"}));
  EXPECT_EQ(s.layout().unit(0).tensors.size(), 1u);  // wte: no position table under RoPE
  EXPECT_EQ(s.numel(), total_params(m));
}

TEST(LlamaTrainer, ResumeContinuesBitIdentically) {
  const test::OneThread one_thread;
  const fs::path dir = test::temp_dir("llama_resume");
  const TrainConfig c = llama_config(test::synthetic_file(dir, 20000, 256));
  Trainer straight(c);
  std::vector<double> losses;
  while (!straight.done()) losses.push_back(straight.step().loss);
  fs::path ckpt;
  {
    Trainer first(c);
    for (int i = 0; i < 3; ++i) first.step();
    ckpt = first.save_checkpoint(dir / "ckpt");
  }
  EXPECT_EQ(read_checkpoint_meta(ckpt).model, c.model);
  Trainer resumed(c, ckpt);
  for (std::size_t i = 3; i < losses.size(); ++i) EXPECT_EQ(resumed.step().loss, losses[i]) << i;
  const std::size_t bytes = static_cast<std::size_t>(straight.state().numel()) * 4;
  EXPECT_EQ(0, std::memcmp(resumed.state().params(), straight.state().params(), bytes));
  EXPECT_EQ(0, std::memcmp(resumed.state().adam_v(), straight.state().adam_v(), bytes));
}

// A checkpoint holds whole tensors: a tp 2 rank of another plan's stage loads exactly its rows
// (of qkv_w: its key/value group's q, k and v rows, one contiguous range).
TEST(LlamaCheckpoint, ATp2RankLoadsItsRowsOfEveryTensor) {
  const test::OneThread one_thread;
  const fs::path dir = test::temp_dir("llama_ckpt_tp");
  const TrainConfig c = llama_config(test::synthetic_file(dir, 20000, 256));
  Trainer t(c);
  t.step();
  const fs::path ckpt = t.save_checkpoint(dir);
  const ModelSpec& m = c.model;
  const ParamLayout& whole = t.state().layout();
  for (std::int64_t rank = 0; rank < 2; ++rank) {
    ModelState shard(m, 1, m.num_units() - 1, 2, rank);  // the blocks and the head
    load_checkpoint(ckpt, shard);
    for (const UnitSlot& u : shard.layout().units()) {
      for (std::size_t i = 0; i < u.tensors.size(); ++i) {
        const TensorSlot& ts = u.tensors[i];
        const TensorSlot& tw = whole.unit(u.unit).tensors[i];
        ASSERT_EQ(ts.desc.name, tw.desc.name);
        const float* a = shard.params() + ts.offset;
        const float* b = t.state().params() + tw.offset + ts.rows.begin * ts.row_size();
        EXPECT_EQ(0, std::memcmp(a, b, static_cast<std::size_t>(ts.desc.numel()) * 4))
            << "rank " << rank << " unit " << u.unit << " " << ts.desc.name;
        if (ts.desc.split == TpSplit::Sharded) {
          EXPECT_LT(ts.rows.size(), ts.full_rows);
        }
      }
    }
  }
}

// The successor sequence (tests/train/trainer_test.cpp explains it): starting at about ln 256 =
// 5.55, a loss below 0.5 is reachable only by reading the input, through attention under
// rotary positions.
TEST(LlamaTrainer, LlamaTinyLearnsTheSuccessorSequence) {
  const test::OneThread one_thread;
  const fs::path dir = test::temp_dir("llama_learn");
  TrainConfig c;
  c.model = test::llama_tiny();
  c.data = test::synthetic_file(dir, 64 * 2000, 256);
  c.steps = 100;
  c.global_batch = 8;
  c.micro_batch = 8;
  c.lr = LrSchedule{3e-3, 3e-4, 10, c.steps};
  c.adamw.weight_decay = 0.0f;
  c.seed = 1;
  Trainer t(c);
  const double first = t.step().loss;
  EXPECT_NEAR(first, std::log(256.0), 0.3);
  double last = first;
  while (!t.done()) last = t.step().loss;
  std::printf("llama-tiny: loss %.4f -> %.4f in %lld steps\n", first, last,
              static_cast<long long>(c.steps));
  EXPECT_LT(last, 0.5) << "after " << c.steps << " steps, starting from " << first;
}

constexpr double kU = 1.0 / 256.0;  // bf16 unit roundoff

TEST(LlamaEmulatedTrainer, OneStepMatchesTheCpuBf16Trainer) {
  const test::OneThread one_thread;
  const fs::path dir = test::temp_dir("llama_emu");
  const ModelSpec m = test::llama_tiny();
  const fs::path data = test::synthetic_file(dir, 20000, m.vocab);
  TrainConfig c = llama_config(data);
  c.dropout = 0;
  c.precision = Precision::Bf16;
  Trainer cpu(c);
  c.device = ComputeDevice::Emulated;
  Trainer emu(c);
  std::vector<float> emu_init(static_cast<std::size_t>(emu.state().numel()));
  emu.state().backend().download(emu_init.data(), emu.state().params(), emu.state().numel());
  EXPECT_EQ(emu_init, std::vector<float>(cpu.state().params(),
                                          cpu.state().params() + cpu.state().numel()));
  const double tol = 2.0 * kU * static_cast<double>(m.layers);
  for (int step = 0; step < 2; ++step) {
    const StepStats e = emu.step(), s = cpu.step();
    std::printf("llama-tiny step %d: loss cpu %.6f emulated %.6f; grad norm cpu %.6f emulated "
                "%.6f; tolerance %.2e\n",
                step, s.loss, e.loss, s.grad_norm, e.grad_norm, tol);
    EXPECT_NEAR(e.loss, s.loss, tol * s.loss) << "step " << step;
    EXPECT_NEAR(e.grad_norm / s.grad_norm, 1.0, tol) << "step " << step;
  }
}

}  // namespace
}  // namespace eth
