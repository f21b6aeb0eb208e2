// Held-out loss (train/validation.h): evaluate_loss is the mean token loss over the file's
// windows [w T, w T + T + 1), here recomputed window by window with the double reference
// kernels; batches of any size (a partial last one included) weigh every window alike and
// max_batches cuts the windows; bad inputs are refused naming the flag or the file; and the
// validation a training loop runs is that loss at the weights of its step, logged before the
// step's line.
#include "train/validation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "train/kernel_set.h"
#include "train/stage_compute.h"
#include "train/train_loop.h"
#include "train_test_util.h"

namespace eth::validation_test {
namespace {

namespace fs = std::filesystem;

// The mean token loss of the first `windows` windows of `tokens`, one window at a time through
// the double reference kernels.
double reference_loss(const ModelState& state, const std::vector<std::int32_t>& tokens,
                      std::int64_t T, std::int64_t windows) {
  const ModelSpec& m = state.model();
  StageComputeConfig sc;
  sc.first_unit = 0;
  sc.last_unit = m.num_units() - 1;
  sc.seq_len = T;
  StageCompute<RefKernels<double>> ref(m, sc);
  const std::vector<double> p(state.params(), state.params() + state.numel());
  double sum = 0;
  for (std::int64_t w = 0; w < windows; ++w) {
    const auto at = tokens.begin() + w * T;
    const std::vector<std::int32_t> in(at, at + T), out(at + 1, at + T + 1);
    MicroBatch mb;
    mb.size = 1;
    mb.tokens = in.data();
    mb.targets = out.data();
    mb.loss_scale = 1.0 / static_cast<double>(T);
    ref.forward(0, p.data(), mb, nullptr, nullptr);
    sum += ref.take_loss();
  }
  return sum / static_cast<double>(windows);
}

TEST(Validation, TheLossIsTheMeanOverTheFilesWindowsWhateverTheBatch) {
  const test::OneThread one;
  const fs::path dir = test::temp_dir("validation_windows");
  const ModelSpec m = test::small_model();  // T 8
  const fs::path file = test::synthetic_file(dir, 203, m.vocab, 3);  // 25 windows, 2 left over
  const TokenFile data = TokenFile::open(file);
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(data.size()));
  for (std::int64_t i = 0; i < data.size(); ++i) {
    tokens[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(data.tokens()[i]);
  }
  ModelState state(m, 0, m.num_units() - 1);
  state.init(8);
  const double all = reference_loss(state, tokens, 8, 25);
  for (std::int64_t batch : {1, 4, 25, 40}) {  // 4: six batches and a partial seventh
    EvalConfig cfg;
    cfg.batch = batch;
    const EvalResult r = evaluate_loss(state, data, cfg);
    EXPECT_EQ(r.windows, 25) << batch;
    EXPECT_EQ(r.tokens, 25 * 8) << batch;
    EXPECT_EQ(r.seq_len, 8);
    EXPECT_EQ(r.batches, (25 + std::min<std::int64_t>(batch, 25) - 1) /
                             std::min<std::int64_t>(batch, 25));
    EXPECT_NEAR(r.loss, all, 1e-5 * all) << batch;
    EXPECT_DOUBLE_EQ(r.perplexity, std::exp(r.loss));
  }
  // Three batches of 4 at T 5: the first 12 windows of length 5.
  EvalConfig cut;
  cut.seq_len = 5;
  cut.batch = 4;
  cut.max_batches = 3;
  const EvalResult r = evaluate_loss(state, data, cut);
  EXPECT_EQ(r.windows, 12);
  EXPECT_EQ(r.batches, 3);
  const double want = reference_loss(state, tokens, 5, 12);
  EXPECT_NEAR(r.loss, want, 1e-5 * want);
}

TEST(Validation, BadInputsAreRefusedNamingTheFlagOrTheFile) {
  const fs::path dir = test::temp_dir("validation_refusals");
  const ModelSpec m = test::small_model();
  const TokenFile data = TokenFile::open(test::synthetic_file(dir, 100, m.vocab));
  auto error = [&](EvalConfig cfg) {
    return test::error_of([&] { check_eval_input(m, data, cfg, "eval"); });
  };
  EvalConfig c;
  EXPECT_EQ(error(c), "(no error)");
  c.seq_len = 9;  // past the position table of 8
  EXPECT_NE(error(c).find("--seq-len"), std::string::npos);
  c = {};
  c.batch = 0;
  EXPECT_NE(error(c).find("--batch"), std::string::npos);
  c = {};
  c.max_batches = -1;
  EXPECT_NE(error(c).find("--batches"), std::string::npos);
  fs::create_directories(dir / "short");
  const TokenFile few = TokenFile::open(test::synthetic_file(dir / "short", 8, m.vocab));
  std::string e = test::error_of([&] { check_eval_input(m, few, {}, "eval"); });
  EXPECT_NE(e.find(few.path().string()), std::string::npos) << e;
  EXPECT_NE(e.find("too few tokens"), std::string::npos) << e;
  fs::create_directories(dir / "wide");
  const TokenFile wide = TokenFile::open(test::synthetic_file(dir / "wide", 100, m.vocab + 5));
  e = test::error_of([&] { check_eval_input(m, wide, {}, "eval"); });
  EXPECT_NE(e.find("outside the model's vocabulary"), std::string::npos) << e;
  ValidationConfig v;
  v.data = dir / "short" / "data.bin";
  e = test::error_of([&] { ValidationSet s(v, m); });
  EXPECT_NE(e.find(v.data.string()), std::string::npos) << e;
  v.data = dir / "data.bin";
  v.every = -1;
  EXPECT_NE(test::error_of([&] { ValidationSet s(v, m); }).find("--val-every"),
            std::string::npos);
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
  const TrainConfig c = test::short_run(m, test::synthetic_file(dir, 2000, m.vocab), 5);
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
}

}  // namespace
}  // namespace eth::validation_test
