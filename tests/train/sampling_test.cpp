// Generation (train/sampling.h): the token choice against its definition (greedy is the first
// arg-max, top-k never leaves the k largest, draws follow the tempered softmax of the top k, a
// seed repeats), the next-token logits against the double reference model's loss, and a tiny
// model trained on a successor sequence continues it greedily past its window.
#include "train/sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "train/kernel_set.h"
#include "train/stage_compute.h"
#include "train/trainer.h"
#include "train_test_util.h"

namespace eth::sampling_test {
namespace {

namespace fs = std::filesystem;

TEST(PickToken, GreedyTopKAndTheTemperedSoftmax) {
  const std::vector<float> logits{0.5f, 2.0f, -1.0f, 2.0f, 1.0f, 0.0f};
  SplitMix64 rng(1);
  GenerateConfig g;
  g.greedy = true;
  EXPECT_EQ(pick_token(logits, g, rng), 1);  // the first of the tied maxima
  GenerateConfig k1;
  k1.top_k = 1;
  k1.temperature = 3.0;
  for (int i = 0; i < 20; ++i) EXPECT_EQ(pick_token(logits, k1, rng), 1);
  // Draws among the top 3 (ids 1, 3, 4) at temperature 0.5: frequencies are the softmax of
  // those logits / 0.5, nothing else is drawn.
  GenerateConfig s;
  s.top_k = 3;
  s.temperature = 0.5;
  std::map<int, int> counts;
  constexpr int kDraws = 20000;
  for (int i = 0; i < kDraws; ++i) ++counts[pick_token(logits, s, rng)];
  const double z = 2 * std::exp(4.0) + std::exp(2.0);
  EXPECT_EQ(counts.size(), 3u);
  EXPECT_NEAR(counts[1] / double(kDraws), std::exp(4.0) / z, 0.015);
  EXPECT_NEAR(counts[3] / double(kDraws), std::exp(4.0) / z, 0.015);
  EXPECT_NEAR(counts[4] / double(kDraws), std::exp(2.0) / z, 0.015);
  // A seed repeats its draws.
  SplitMix64 a(9), b(9);
  GenerateConfig all;
  for (int i = 0; i < 50; ++i) EXPECT_EQ(pick_token(logits, all, a), pick_token(logits, all, b));
  GenerateConfig cold;
  cold.temperature = 0;
  EXPECT_THROW(pick_token(logits, cold, rng), InputError);
}

TEST(PickToken, TopKNeverLeavesTheKLargestAndGreedyIsTheFirstArgMax) {
  SplitMix64 gen(42), rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    // Logits from a coarse grid, so ties are common.
    std::vector<float> logits(17);
    for (float& x : logits) x = static_cast<float>(gen.next() % 9) * 0.5f - 2.0f;
    const std::int64_t k = 1 + trial % 5;
    std::vector<float> sorted = logits;
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    const float kth = sorted[static_cast<std::size_t>(k - 1)];
    GenerateConfig top;
    top.top_k = k;
    top.temperature = 0.3 + 0.2 * (trial % 4);
    for (int draw = 0; draw < 10; ++draw) {
      const std::int32_t t = pick_token(logits, top, rng);
      ASSERT_GE(logits[static_cast<std::size_t>(t)], kth) << "trial " << trial << " k " << k;
    }
    GenerateConfig greedy;
    greedy.greedy = true;
    const auto first_max = std::max_element(logits.begin(), logits.end()) - logits.begin();
    EXPECT_EQ(pick_token(logits, greedy, rng), first_max) << "trial " << trial;
  }
}

// The next-token logits at every prefix of a window give, through a log-softmax, the token
// losses whose mean the full model's forward computes for that window (attention is causal, so
// position k sees exactly the prefix of k + 1 tokens).
TEST(TextGenerator, NextLogitsAreTheModelsLastPositionAtEveryPrefix) {
  const test::OneThread one;
  const fs::path dir = test::temp_dir("sampling_logits");
  const ModelSpec m = test::small_model();  // T 8
  ModelState state(m, 0, m.num_units() - 1);
  state.init(13);
  CheckpointMeta meta;
  meta.model = m;
  meta.schedule = meta.data = meta.run = Json::object();
  write_checkpoint(dir / "c.safetensors", state, meta);
  const std::vector<std::int32_t> window{3, 17, 0, 31, 8, 8, 22, 5, 11};  // T + 1 tokens
  TextGenerator gen(dir / "c.safetensors");
  EXPECT_EQ(gen.model(), m);
  double sum = 0;
  for (std::size_t k = 1; k <= 8; ++k) {
    const std::vector<float> logits =
        gen.next_logits(std::span<const std::int32_t>(window.data(), k));
    ASSERT_EQ(logits.size(), static_cast<std::size_t>(m.vocab));
    double top = -INFINITY;
    for (float x : logits) top = std::max(top, double(x));
    double z = 0;
    for (float x : logits) z += std::exp(x - top);
    sum += top + std::log(z) - logits[static_cast<std::size_t>(window[k])];
  }
  StageComputeConfig sc;
  sc.first_unit = 0;
  sc.last_unit = m.num_units() - 1;
  sc.seq_len = m.seq_len;
  StageCompute<RefKernels<double>> ref(m, sc);
  const std::vector<double> p(state.params(), state.params() + state.numel());
  MicroBatch mb;
  mb.size = 1;
  mb.tokens = window.data();
  mb.targets = window.data() + 1;
  mb.loss_scale = 1.0 / 8;
  ref.forward(0, p.data(), mb, nullptr, nullptr);
  const double want = ref.take_loss();
  EXPECT_NEAR(sum / 8, want, 1e-5 * want);
  // A context longer than the window counts its last T tokens.
  std::vector<std::int32_t> longer{1, 2, 3};
  longer.insert(longer.end(), window.begin(), window.begin() + 8);
  EXPECT_EQ(gen.next_logits(longer), gen.next_logits(std::span(window.data(), 8)));
  EXPECT_THROW(gen.next_logits(std::vector<std::int32_t>{}), InputError);
  EXPECT_THROW(gen.next_logits(std::vector<std::int32_t>{-1}), InputError);
}

TEST(Generate, ATinyModelContinuesTheSuccessorSequencePastItsWindow) {
  const test::OneThread one;
  const fs::path dir = test::temp_dir("generate");
  // A vocabulary of 13, prime to the window of 16: windows start at every token, so the model
  // must learn the successor function, not the positions of one repeated window.
  const ModelSpec m{"tiny", 1, 32, 2, 16, 13, 128};
  const fs::path data = test::synthetic_file(dir, 4000, m.vocab);
  TrainConfig c = test::short_run(m, data, 80);
  c.global_batch = 8;
  c.micro_batch = 8;
  c.lr = LrSchedule{1e-2, 1e-2, 0, 80};
  Trainer t(c);
  StepStats last;
  while (!t.done()) last = t.step();
  ASSERT_LT(last.loss, 0.05);
  const fs::path ckpt = t.save_checkpoint(dir / "ckpt");
  // The pattern from the data itself: every token's successor.
  const TokenFile f = TokenFile::open(data);
  std::vector<std::int32_t> succ(static_cast<std::size_t>(m.vocab), -1);
  for (std::int64_t i = 0; i + 1 < f.size(); ++i) {
    succ[static_cast<std::size_t>(f.tokens()[i])] = static_cast<std::int32_t>(f.tokens()[i + 1]);
  }
  TextGenerator gen(ckpt);
  GenerateConfig greedy;
  greedy.greedy = true;
  greedy.tokens = 2 * m.seq_len;  // the window slides past seq_len
  const std::vector<std::int32_t> prompt{3, succ[3]};
  const std::vector<std::int32_t> out = gen.generate(prompt, greedy);
  ASSERT_EQ(out.size(), prompt.size() + 2 * m.seq_len);
  for (std::size_t i = 1; i < out.size(); ++i) {
    EXPECT_EQ(out[i], succ[static_cast<std::size_t>(out[i - 1])]) << "token " << i;
  }
  GenerateConfig top1;
  top1.top_k = 1;
  top1.tokens = greedy.tokens;
  EXPECT_EQ(gen.generate(prompt, top1), out);
  GenerateConfig hot;
  hot.temperature = 2.0;
  hot.tokens = 20;
  hot.seed = 4;
  EXPECT_EQ(gen.generate(prompt, hot), gen.generate(prompt, hot));
  EXPECT_THROW(gen.next_logits(std::vector<std::int32_t>{13}), InputError);
}

}  // namespace
}  // namespace eth::sampling_test
