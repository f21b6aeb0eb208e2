// The training loop: gradient accumulation equals one big batch, a resumed run continues
// bit-identically, the tiny model learns a learnable sequence, and damaged data files are
// refused by name (damaged checkpoints: checkpoint_test.cpp).
#include "train/trainer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "train/checkpoint.h"
#include "train_test_util.h"

namespace eth {
namespace {

namespace fs = std::filesystem;

TrainConfig tiny_config(const fs::path& data) {
  TrainConfig c;
  c.model = model_preset("tiny");
  c.data = data;
  c.steps = 6;
  c.global_batch = 6;
  c.micro_batch = 2;
  c.lr = LrSchedule{1e-3, 1e-4, 2, 6};
  c.dropout = 0.1f;
  c.seed = 4;
  return c;
}

TEST(Trainer, AccumulationOverMicroBatchesEqualsOneBigBatch) {
  const test::OneThread one_thread;
  const fs::path dir = test::temp_dir("accumulate");
  TrainConfig c = tiny_config(test::synthetic_file(dir, 20000, 256));
  c.micro_batch = 6;
  Trainer one(c);
  const double loss_one = one.compute_gradients();
  for (std::int64_t mbs : {1, 2, 4}) {  // 6 x 1, 3 x 2, and 4 + a partial 2
    c.micro_batch = mbs;
    Trainer acc(c);
    const double loss = acc.compute_gradients();
    EXPECT_NEAR(loss, loss_one, 1e-6 * loss_one) << "micro-batch " << mbs;
    // fp32 sums in another order: each gradient agrees to a few ulp of the largest one
    // (6 partial sums of ~1e-2-sized terms, float epsilon 1.2e-7).
    const float* a = acc.state().grads();
    const float* b = one.state().grads();
    double gmax = 0, worst = 0;
    for (std::int64_t i = 0; i < acc.state().numel(); ++i)
      gmax = std::max(gmax, std::abs(double(b[i])));
    for (std::int64_t i = 0; i < acc.state().numel(); ++i)
      worst = std::max(worst, std::abs(double(a[i]) - b[i]));
    EXPECT_LT(worst, 1e-5 * gmax) << "micro-batch " << mbs;
    EXPECT_GT(gmax, 0);
  }
}

TEST(Trainer, ResumeContinuesBitIdentically) {
  const fs::path dir = test::temp_dir("resume");
  const TrainConfig c = tiny_config(test::synthetic_file(dir, 20000, 256));
  Trainer straight(c);
  std::vector<double> losses;
  while (!straight.done()) losses.push_back(straight.step().loss);

  fs::path ckpt;
  {
    Trainer first(c);
    for (int i = 0; i < 3; ++i) first.step();
    ckpt = first.save_checkpoint(dir / "ckpt");
  }
  EXPECT_EQ(ckpt, checkpoint_path(dir / "ckpt", 3));
  EXPECT_EQ(latest_checkpoint(dir / "ckpt"), ckpt);
  Trainer resumed(c, ckpt);
  EXPECT_EQ(resumed.next_step(), 3);
  for (std::size_t i = 3; i < losses.size(); ++i) EXPECT_EQ(resumed.step().loss, losses[i]) << i;
  const std::size_t bytes = static_cast<std::size_t>(straight.state().numel()) * 4;
  EXPECT_EQ(0, std::memcmp(resumed.state().params(), straight.state().params(), bytes));
  EXPECT_EQ(0, std::memcmp(resumed.state().adam_m(), straight.state().adam_m(), bytes));
  EXPECT_EQ(0, std::memcmp(resumed.state().adam_v(), straight.state().adam_v(), bytes));
}

TEST(Trainer, ResumeRefusesAnotherBatchOrSeed) {
  const fs::path dir = test::temp_dir("resume_mismatch");
  TrainConfig c = tiny_config(test::synthetic_file(dir, 20000, 256));
  c.steps = 1;
  Trainer t(c);
  t.step();
  const fs::path ckpt = t.save_checkpoint(dir);
  c.steps = 4;
  c.global_batch = 4;
  c.micro_batch = 4;
  EXPECT_NE(test::error_of([&] { Trainer r(c, ckpt); }).find("data.global_batch"),
            std::string::npos);
  c.global_batch = 6;
  c.seed = 5;
  EXPECT_NE(test::error_of([&] { Trainer r(c, ckpt); }).find("seed"), std::string::npos);
  TrainConfig other = c;
  other.model.layers = 3;
  EXPECT_NE(test::error_of([&] { Trainer r(other, ckpt); }).find("__metadata__.model"),
            std::string::npos);
}

// The successor sequence makes every token a fixed function of the one before, with all 256
// tokens equally frequent: a model that ignores its input cannot beat the unigram entropy
// ln 256 = 5.55 nats, and the initial loss is about that. A loss below 0.5 means the model
// puts on average more than e^-0.5 = 61% on the right next token, which only reading the input
// allows. 100 steps of 512 tokens at lr 3e-3 reach it with a margin of 6x (0.084 when this
// test was written; 80 steps gave 0.26).
TEST(Trainer, TinyModelLearnsTheSuccessorSequence) {
  const test::OneThread one_thread;
  const fs::path dir = test::temp_dir("learn");
  TrainConfig c;
  c.model = model_preset("tiny");
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
  EXPECT_LT(last, 0.5) << "after " << c.steps << " steps, starting from " << first;
}

TEST(Trainer, RefusesDataOutsideTheVocabularyOrTooShort) {
  const fs::path dir = test::temp_dir("data_errors");
  TrainConfig c = tiny_config(test::synthetic_file(dir, 20000, 300));  // ids up to 299 > 255
  std::string e = test::error_of([&] { Trainer t(c); });
  EXPECT_NE(e.find(c.data.string()), std::string::npos) << e;
  EXPECT_NE(e.find("vocabulary of 256"), std::string::npos) << e;
  c.data = test::synthetic_file(dir, 50, 256);  // fewer than T + 1 = 65 tokens
  EXPECT_NE(test::error_of([&] { Trainer t(c); }).find("too few tokens"), std::string::npos);
  std::ofstream(dir / "junk.bin") << "not a token file";
  c.data = dir / "junk.bin";
  e = test::error_of([&] { Trainer t(c); });
  EXPECT_NE(e.find("junk.bin"), std::string::npos) << e;
}

}  // namespace
}  // namespace eth
