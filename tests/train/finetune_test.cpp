// Fine-tuning pieces of the single-process trainer (issue 26): a run started from a checkpoint
// holds exactly its weights with zero moments at step 0 and refuses another model or a resume;
// the validation set the loop evaluates is `eth eval`'s loss of the weights of that step, logged
// before the step's line; and generation: the token choice against its own definition (greedy
// is the arg-max, top-k 1 is greedy, draws follow the tempered softmax of the top k, a seed
// repeats), and a tiny model trained on a successor sequence continues it greedily past its
// window.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "core/error.h"
#include "train/init_from.h"
#include "train/sampling.h"
#include "train/train_loop.h"
#include "train/validation.h"
#include "train_test_util.h"

namespace eth {
namespace {

namespace fs = std::filesystem;

TrainConfig config(const ModelSpec& m, const fs::path& data, std::int64_t steps) {
  TrainConfig c;
  c.model = m;
  c.data = data;
  c.steps = steps;
  c.global_batch = 4;
  c.micro_batch = 2;
  c.lr = LrSchedule{1e-2, 1e-3, 0, steps};
  c.seed = 5;
  return c;
}

TEST(InitFrom, StartsAtTheCheckpointsWeightsWithAFreshOptimizer) {
  const test::OneThread one;
  const fs::path dir = test::temp_dir("init_from");
  const ModelSpec m = test::small_model();
  TrainConfig c = config(m, test::synthetic_file(dir, 2000, m.vocab), 3);
  Trainer source(c);
  for (int i = 0; i < 3; ++i) source.step();
  const fs::path ckpt = source.save_checkpoint(dir / "ckpt");
  TrainConfig f = c;
  f.seed = 11;
  f.steps = 2;
  f.lr = LrSchedule{1e-3, 1e-4, 0, 2};
  f.init_from = ckpt;
  Trainer t(f);
  EXPECT_EQ(t.next_step(), 0);
  const auto n = static_cast<std::size_t>(t.state().numel());
  const std::vector<float> want(source.state().params(), source.state().params() + n);
  EXPECT_EQ(std::vector<float>(t.state().params(), t.state().params() + n), want);
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_EQ(t.state().adam_m()[i], 0.0f) << i;
    ASSERT_EQ(t.state().adam_v()[i], 0.0f) << i;
  }
  // Refused: another model, a resume.
  TrainConfig other = f;
  other.model.hidden = 32;
  other.model.ffn = 128;
  try {
    Trainer bad(other);
    ADD_FAILURE() << "another model accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("__metadata__.model.hidden"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(Trainer(f, ckpt), InputError);
}

class OrderSink final : public TrainLoopSink {
 public:
  void on_step(const StepStats& s) override { events.push_back("step " + std::to_string(s.step)); }
  void on_validation(std::int64_t next, double loss) override {
    events.push_back("val " + std::to_string(next));
    losses.emplace_back(next, loss);
  }
  std::vector<std::string> events;
  std::vector<std::pair<std::int64_t, double>> losses;
};

TEST(Validation, IsTheEvalLossOfThatStepsWeightsLoggedBeforeItsLine) {
  const test::OneThread one;
  const fs::path dir = test::temp_dir("validation");
  const ModelSpec m = test::small_model();
  const TrainConfig c = config(m, test::synthetic_file(dir, 2000, m.vocab), 5);
  fs::create_directories(dir / "val");
  const fs::path val = test::synthetic_file(dir / "val", 200, m.vocab, 4);
  ValidationConfig vc;
  vc.data = val;
  vc.eval.seq_len = m.seq_len;
  vc.eval.batch = 3;
  vc.eval.max_batches = 2;
  const ValidationSet set(vc, m);
  Trainer t(c);
  TrainerRun run(t, &set);
  TrainLoopOptions o;
  o.validate_every = 2;
  o.checkpoint_dir = dir / "ckpt";
  o.checkpoint_every = 2;
  o.print_every = 0;
  OrderSink sink;
  TrainLoop(run, o).run(sink);
  EXPECT_EQ(sink.events, (std::vector<std::string>{"step 0", "val 2", "step 1", "step 2", "val 4",
                                                   "step 3", "val 5", "step 4"}));
  ASSERT_EQ(sink.losses.size(), 3u);
  for (const auto& [next, loss] : sink.losses) {
    ModelState at(m, 0, m.num_units() - 1);
    load_checkpoint(checkpoint_path(o.checkpoint_dir, next), at);
    EXPECT_EQ(loss, evaluate_loss(at, TokenFile::open(val), vc.eval).loss) << next;
  }
  // A file the model cannot read is refused at construction, naming it.
  ValidationConfig bad = vc;
  bad.eval.seq_len = m.seq_len;
  fs::create_directories(dir / "short");
  bad.data = test::synthetic_file(dir / "short", m.seq_len, m.vocab);
  try {
    ValidationSet s(bad, m);
    ADD_FAILURE() << "a file shorter than one window accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(bad.data.string()), std::string::npos) << e.what();
  }
}

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

TEST(Generate, ATinyModelContinuesTheSuccessorSequencePastItsWindow) {
  const test::OneThread one;
  const fs::path dir = test::temp_dir("generate");
  // A vocabulary of 13, prime to the window of 16: windows start at every token, so the model
  // must learn the successor function, not the positions of one repeated window.
  const ModelSpec m{"tiny", 1, 32, 2, 16, 13, 128};
  const fs::path data = test::synthetic_file(dir, 4000, m.vocab);
  TrainConfig c = config(m, data, 80);
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
}  // namespace eth
