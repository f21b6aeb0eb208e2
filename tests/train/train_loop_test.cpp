// The training loop (train/train_loop.h) over a scripted run: which steps checkpoint (resumed
// mid-way, a length not a multiple of the period, period 0, no directory, --stop-at), the order
// of the run's and the sink's calls, that a failing step or sink ends the loop with its error,
// stop requests, validation, and that the single-process Trainer driven by the loop trains
// exactly as Trainer::step called by hand (same losses, same checkpoint files).
#include "train/train_loop.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "train/checkpoint.h"
#include "train_test_util.h"

namespace eth {
namespace {

namespace fs = std::filesystem;
using Events = std::vector<std::string>;

// A run whose steps are scripted: loss 10 - step, or what `losses` says; records every call.
class FakeRun final : public TrainingRun {
 public:
  FakeRun(std::int64_t steps, std::int64_t first, Events* events)
      : next_(first), events_(events) {
    cfg_.steps = steps;
    cfg_.lr.lr_max = 0.5;
  }
  const TrainConfig& config() const override { return cfg_; }
  std::int64_t next_step() const override { return next_; }
  std::int64_t tokens_per_step() const override { return 100; }
  void begin() override { events_->push_back("begin"); }
  StepStats step() override {
    events_->push_back("step " + std::to_string(next_));
    if (next_ == fail_at) throw std::runtime_error("step " + std::to_string(next_) + " failed");
    StepStats s;
    s.step = next_;
    s.loss = next_ == nan_at ? std::nan("") : 10.0 - static_cast<double>(next_);
    ++next_;
    return s;
  }
  fs::path save_checkpoint(const fs::path& dir) override {
    events_->push_back("save " + std::to_string(next_));
    saved.push_back(next_);
    return checkpoint_path(dir, next_);
  }
  bool is_lead() const override { return lead; }
  bool agree(bool value) override {
    events_->push_back(std::string("agree ") + (value ? "1" : "0"));
    return lead_says.value_or(value);
  }
  std::optional<double> validate() override {
    events_->push_back("validate " + std::to_string(next_));
    return 100.0 + static_cast<double>(next_);
  }

  std::int64_t fail_at = -1, nan_at = -1;
  bool lead = true;
  std::optional<bool> lead_says;  // a non-lead rank: what the lead answered
  std::vector<std::int64_t> saved;

 private:
  TrainConfig cfg_;
  std::int64_t next_;
  Events* events_;
};

class RecordingSink final : public TrainLoopSink {
 public:
  explicit RecordingSink(Events* events) : events_(events) {}
  void before_step(std::int64_t step) override { add("before_step", step); }
  void on_step(const StepStats& s) override {
    add("on_step", s.step);
    if (s.step == throw_at) throw std::runtime_error("log full");
  }
  void on_validation(std::int64_t next, double loss) override {
    add("on_validation", next);
    val_losses.push_back(loss);
  }
  void before_checkpoint(std::int64_t next) override { add("before_checkpoint", next); }
  void on_checkpoint(const fs::path& p) override {
    events_->push_back("on_checkpoint " + p.filename().string());
  }
  void on_progress(const TrainProgress& p) override {
    add("on_progress", p.step.step);
    progress.push_back(p);
  }
  std::int64_t throw_at = -1;
  std::vector<TrainProgress> progress;
  std::vector<double> val_losses;

 private:
  void add(const char* what, std::int64_t n) {
    events_->push_back(std::string(what) + " " + std::to_string(n));
  }
  Events* events_;
};

TrainLoopOptions checkpoints(std::int64_t every, std::int64_t stop_at = 0) {
  TrainLoopOptions o;
  o.checkpoint_dir = "/ckpt";
  o.checkpoint_every = every;
  o.stop_at = stop_at;
  o.print_every = 0;
  return o;
}

std::vector<std::int64_t> saved_steps(std::int64_t steps, std::int64_t first,
                                      const TrainLoopOptions& o) {
  Events events;
  FakeRun run(steps, first, &events);
  RecordingSink sink(&events);
  TrainLoop(run, o).run(sink);
  return run.saved;
}

TEST(TrainLoop, CheckpointsEveryKStepsAndAtTheEnd) {
  // The step counts completed when a checkpoint is written (its file is step_<N>).
  using V = std::vector<std::int64_t>;
  EXPECT_EQ(saved_steps(9, 0, checkpoints(3)), (V{3, 6, 9}));
  EXPECT_EQ(saved_steps(10, 0, checkpoints(3)), (V{3, 6, 9, 10}));  // 10 not a multiple of 3
  EXPECT_EQ(saved_steps(10, 4, checkpoints(3)), (V{6, 9, 10}));     // resumed at step 4
  EXPECT_EQ(saved_steps(10, 6, checkpoints(3)), (V{9, 10}));        // resumed at a checkpoint
  EXPECT_EQ(saved_steps(10, 0, checkpoints(0)), (V{10}));           // 0: at the end only
  EXPECT_EQ(saved_steps(10, 0, checkpoints(1)), (V{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  EXPECT_EQ(saved_steps(10, 0, checkpoints(20)), (V{10}));          // a period past the end
  EXPECT_EQ(saved_steps(10, 0, checkpoints(3, 5)), (V{3, 5}));      // --stop-at 5
  EXPECT_EQ(saved_steps(10, 0, checkpoints(3, 50)), (V{3, 6, 9, 10}));  // --stop-at past --steps
  EXPECT_EQ(saved_steps(10, 10, checkpoints(3)), (V{}));            // nothing to do
  TrainLoopOptions none = checkpoints(3);
  none.checkpoint_dir.clear();
  EXPECT_EQ(saved_steps(10, 0, none), (V{}));  // no directory: never
}

TEST(TrainLoop, CheckpointCadenceAgreesWithItsDefinitionEverywhere) {
  // Every small case against "N in (first, end] with N a multiple of K, or N = end".
  for (std::int64_t steps = 1; steps <= 9; ++steps) {
    for (std::int64_t first = 0; first <= steps; ++first) {
      for (std::int64_t every = 0; every <= 4; ++every) {
        for (std::int64_t stop_at : {0, 1, 3, 12}) {
          const std::int64_t end = stop_at > 0 ? std::min(stop_at, steps) : steps;
          std::vector<std::int64_t> want;
          for (std::int64_t n = first + 1; n <= end; ++n) {
            if ((every > 0 && n % every == 0) || n == end) want.push_back(n);
          }
          EXPECT_EQ(saved_steps(steps, first, checkpoints(every, stop_at)), want)
              << "steps " << steps << " first " << first << " every " << every << " stop_at "
              << stop_at;
        }
      }
    }
  }
}

TEST(TrainLoop, CallsComeInTheDocumentedOrder) {
  Events events;
  FakeRun run(3, 0, &events);
  RecordingSink sink(&events);
  TrainLoopOptions o = checkpoints(2);
  o.print_every = 2;
  const TrainLoopResult r = TrainLoop(run, o).run(sink);
  const Events want{"begin",
                    "before_step 0", "step 0", "on_step 0", "on_progress 0",
                    "before_step 1", "step 1", "on_step 1",
                    "before_checkpoint 2", "save 2", "on_checkpoint step_00000002.safetensors",
                    "before_step 2", "step 2", "on_step 2",
                    "before_checkpoint 3", "save 3", "on_checkpoint step_00000003.safetensors",
                    "on_progress 2"};
  EXPECT_EQ(events, want);
  EXPECT_EQ(r.first_step, 0);
  EXPECT_EQ(r.end_step, 3);
  ASSERT_TRUE(r.last);
  EXPECT_EQ(r.last->step, 2);
  EXPECT_EQ(r.last->loss, 8.0);
  EXPECT_EQ(r.tokens, 300.0);
  EXPECT_EQ(r.checkpoint, checkpoint_path("/ckpt", 3));
  EXPECT_FALSE(r.stop_requested);
  // Progress: the schedule's length, and no time left after the last step.
  ASSERT_EQ(sink.progress.size(), 2u);
  EXPECT_EQ(sink.progress[0].total_steps, 3);
  EXPECT_EQ(sink.progress[1].eta_s, 0.0);
  EXPECT_GE(sink.progress[1].elapsed_s, sink.progress[0].elapsed_s);
}

TEST(TrainLoop, ProgressEveryNStepsAndAtTheLastOne) {
  for (std::int64_t every : {0, 1, 3, 4}) {
    Events events;
    FakeRun run(7, 2, &events);  // steps 2..6
    RecordingSink sink(&events);
    TrainLoopOptions o;
    o.print_every = every;
    TrainLoop(run, o).run(sink);
    std::vector<std::int64_t> got, want;
    for (const TrainProgress& p : sink.progress) got.push_back(p.step.step);
    for (std::int64_t s = 2; s <= 6 && every > 0; ++s) {
      if (s % every == 0 || s == 6) want.push_back(s);
    }
    EXPECT_EQ(got, want) << "every " << every;
  }
}

TEST(TrainLoop, NothingToDoCallsNothing) {
  Events events;
  FakeRun run(5, 5, &events);
  RecordingSink sink(&events);
  TrainLoopOptions o = checkpoints(2);
  o.print_every = 1;
  TrainLoop loop(run, o);
  EXPECT_EQ(loop.first_step(), 5);
  EXPECT_EQ(loop.end_step(), 5);
  const TrainLoopResult r = loop.run(sink);
  EXPECT_TRUE(events.empty());
  EXPECT_FALSE(r.last);
  EXPECT_TRUE(r.checkpoint.empty());
  EXPECT_EQ(r.end_step, 5);
}

TEST(TrainLoop, AFailingStepEndsTheLoopWithItsError) {
  Events events;
  FakeRun run(6, 0, &events);
  run.fail_at = 3;
  RecordingSink sink(&events);
  TrainLoop loop(run, checkpoints(2));
  try {
    loop.run(sink);
    FAIL() << "the failure of step 3 was swallowed";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "step 3 failed");
  }
  // Nothing after the failing step: no log line, no checkpoint, no next step.
  EXPECT_EQ(events.back(), "step 3");
  EXPECT_EQ(run.saved, (std::vector<std::int64_t>{2}));
}

TEST(TrainLoop, ALossThatIsNotFiniteStopsBeforeItIsLoggedAndNamesTheLearningRate) {
  Events events;
  FakeRun run(6, 0, &events);
  run.nan_at = 2;
  RecordingSink sink(&events);
  TrainLoop loop(run, checkpoints(1));
  try {
    loop.run(sink);
    FAIL() << "a nan loss went on";
  } catch (const InputError& e) {
    EXPECT_EQ(e.source(), "--lr");
    EXPECT_NE(e.detail().find("at step 2"), std::string::npos) << e.what();
    EXPECT_NE(e.detail().find("0.5"), std::string::npos) << e.what();
  }
  EXPECT_EQ(events.back(), "step 2");
  EXPECT_EQ(run.saved, (std::vector<std::int64_t>{1, 2}));  // 2: the one after step 1
}

TEST(TrainLoop, ASinkThatThrowsEndsTheLoopWithItsError) {
  Events events;
  FakeRun run(6, 0, &events);
  RecordingSink sink(&events);
  sink.throw_at = 1;
  EXPECT_THROW(TrainLoop(run, checkpoints(1)).run(sink), std::runtime_error);
  EXPECT_EQ(events.back(), "on_step 1");
  EXPECT_EQ(run.saved, (std::vector<std::int64_t>{1}));
}

TEST(TrainLoop, AStopFileStopsAtTheNextCheckpoint) {
  const fs::path dir = test::temp_dir("loop_stop");
  const fs::path stop = dir / "stop";
  std::ofstream(stop) << "stop\n";
  Events events;
  FakeRun run(10, 1, &events);
  RecordingSink sink(&events);
  TrainLoopOptions o = checkpoints(4);
  o.stop_file = stop;
  o.print_every = 100;
  const TrainLoopResult r = TrainLoop(run, o).run(sink);
  EXPECT_EQ(run.saved, (std::vector<std::int64_t>{4}));
  EXPECT_TRUE(r.stop_requested);
  EXPECT_EQ(r.end_step, 4);
  EXPECT_EQ(run.next_step(), 4);
  // The lead's answer is asked for once, after the checkpoint; the stopping step reports
  // progress as the last one.
  const Events tail(events.end() - 4, events.end());
  EXPECT_EQ(tail, (Events{"save 4", "on_checkpoint step_00000004.safetensors", "agree 1",
                          "on_progress 3"}));
  EXPECT_EQ(sink.progress.back().eta_s, 0.0);
}

TEST(TrainLoop, NoStopIsAskedAtTheLastCheckpointOrWithoutAStopFile) {
  const fs::path dir = test::temp_dir("loop_stop_end");
  const fs::path stop = dir / "stop";
  std::ofstream(stop) << "stop\n";
  Events events;
  FakeRun run(4, 0, &events);
  RecordingSink sink(&events);
  TrainLoopOptions o = checkpoints(2);
  o.stop_file = stop;
  TrainLoop(run, o).run(sink);
  EXPECT_EQ(std::count(events.begin(), events.end(), "agree 1"), 1);  // at 2, not at the end 4
  Events quiet;
  FakeRun run2(4, 0, &quiet);
  RecordingSink sink2(&quiet);
  TrainLoop(run2, checkpoints(2)).run(sink2);
  for (const std::string& e : quiet) EXPECT_EQ(e.rfind("agree", 0), std::string::npos) << e;
}

TEST(TrainLoop, AnotherRankFollowsTheLeadAndReportsNothing) {
  Events events;
  FakeRun run(10, 0, &events);
  run.lead = false;
  run.lead_says = true;  // the lead found the stop file
  RecordingSink sink(&events);
  TrainLoopOptions o = checkpoints(3);
  o.stop_file = "/no/such/file";  // this rank does not look: only the lead does
  o.print_every = 1;
  const TrainLoopResult r = TrainLoop(run, o).run(sink);
  EXPECT_EQ(r.end_step, 3);
  const Events want{"begin",
                    "before_step 0", "step 0",
                    "before_step 1", "step 1",
                    "before_step 2", "step 2",
                    "before_checkpoint 3", "save 3", "agree 0"};
  EXPECT_EQ(events, want);
  ASSERT_TRUE(r.last);
  EXPECT_EQ(r.checkpoint, checkpoint_path("/ckpt", 3));  // every rank knows the file
}

TEST(TrainLoop, ValidationEveryKStepsAndAtTheEndBeforeTheCheckpoint) {
  Events events;
  FakeRun run(5, 0, &events);
  RecordingSink sink(&events);
  TrainLoopOptions o = checkpoints(2);
  o.validate_every = 2;
  TrainLoop(run, o).run(sink);
  std::vector<std::string> val;
  for (const std::string& e : events) {
    if (e.find("valid") != std::string::npos || e.rfind("save", 0) == 0) val.push_back(e);
  }
  EXPECT_EQ(val, (Events{"validate 2", "on_validation 2", "save 2", "validate 4",
                         "on_validation 4", "save 4", "validate 5", "on_validation 5",
                         "save 5"}));
  EXPECT_EQ(sink.val_losses, (std::vector<double>{102, 104, 105}));
  // validate_every 0: never.
  Events none;
  FakeRun run2(5, 0, &none);
  RecordingSink sink2(&none);
  TrainLoop(run2, checkpoints(2)).run(sink2);
  for (const std::string& e : none) EXPECT_EQ(e.find("valid"), std::string::npos) << e;
}

// The real trainer.
TrainConfig small_config(const fs::path& data) {
  TrainConfig c;
  c.model = test::small_model();
  c.data = data;
  c.steps = 7;
  c.global_batch = 3;
  c.micro_batch = 2;  // 2 + a partial 1
  c.seq_len = 8;
  c.lr = LrSchedule{1e-2, 1e-3, 2, 7};
  c.dropout = 0.1f;
  c.seed = 3;
  return c;
}

class LossSink final : public TrainLoopSink {
 public:
  void on_step(const StepStats& s) override {
    losses.push_back(s.loss);
    norms.push_back(s.grad_norm);
  }
  std::vector<double> losses, norms;
};

TEST(TrainLoop, TrainerDrivenByTheLoopTrainsAsTrainerStepByHand) {
  const test::OneThread one_thread;
  const fs::path dir = test::temp_dir("loop_trainer");
  const TrainConfig c = small_config(test::synthetic_file(dir, 4000, 32));
  std::vector<double> losses, norms;
  Trainer by_hand(c);
  while (!by_hand.done()) {
    const StepStats s = by_hand.step();
    losses.push_back(s.loss);
    norms.push_back(s.grad_norm);
  }
  by_hand.save_checkpoint(dir / "by_hand");

  Trainer looped(c);
  TrainerRun run(looped);
  TrainLoopOptions o;
  o.checkpoint_dir = dir / "looped";
  o.checkpoint_every = 3;
  LossSink sink;
  const TrainLoopResult r = TrainLoop(run, o).run(sink);
  EXPECT_EQ(sink.losses, losses);  // bitwise: the same calls in the same order
  EXPECT_EQ(sink.norms, norms);
  EXPECT_EQ(r.tokens, static_cast<double>(7 * 3 * 8));
  // The checkpoints of steps 3, 6 and the end, and the last one holds the weights by hand.
  std::set<std::string> files;
  for (const auto& e : fs::directory_iterator(dir / "looped")) {
    files.insert(e.path().filename().string());
  }
  EXPECT_EQ(files, (std::set<std::string>{"step_00000003.safetensors",
                                          "step_00000006.safetensors",
                                          "step_00000007.safetensors"}));
  EXPECT_EQ(r.checkpoint, checkpoint_path(dir / "looped", 7));
  EXPECT_EQ(test::slurp(r.checkpoint), test::slurp(checkpoint_path(dir / "by_hand", 7)));

  // Resumed mid-way from the loop's checkpoint of step 3, the loop takes steps 3..6 with the
  // uninterrupted run's losses.
  Trainer resumed(c, checkpoint_path(dir / "looped", 3));
  TrainerRun run2(resumed);
  LossSink sink2;
  const TrainLoopResult r2 = TrainLoop(run2, TrainLoopOptions{}).run(sink2);
  EXPECT_EQ(r2.first_step, 3);
  EXPECT_EQ(sink2.losses, std::vector<double>(losses.begin() + 3, losses.end()));
}

}  // namespace
}  // namespace eth
