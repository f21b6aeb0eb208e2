// The distributed trainer through the training loop (runtime/dist_training_run.h) on LocalWorld
// threads: it trains exactly as DistributedTrainer::step called by hand (bitwise: the loop adds
// only the gather of the ranks' times), the lead alone reports while every rank's hooks run,
// each step reports every rank's times, a stop file stops every rank at the same checkpoint,
// which is written, and the run's mean times leave the first step out; a stop request is rank
// 0's answer on every rank, and a run without a validation set validates nothing.
#include <gtest/gtest.h>

#include <fstream>
#include <optional>

#include "runtime/dist_training_run.h"
#include "runtime_test_util.h"
#include "train/train_loop.h"

namespace eth::dist_training_run_test {
namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kSeq = 8;

Plan two_pipelines() {
  return test::make_plan(test::small3(), kSeq,
                         {{2, 4, {{0, 1}, {2, 4}}}, {1, 2, {{0, 2}, {3, 4}}}});
}

class RankSink final : public TrainLoopSink {
 public:
  explicit RankSink(const DistTrainingRun& run) : run_(run) {}
  void before_step(std::int64_t step) override { before.push_back(step); }
  void on_step(const StepStats& s) override {
    losses.push_back(s.loss);
    seconds.push_back(s.seconds);
    ranks_reported.push_back(run_.last_rank_times().size());
  }
  void before_checkpoint(std::int64_t next) override { checkpoints.push_back(next); }
  std::vector<std::int64_t> before, checkpoints;
  std::vector<double> losses, seconds;
  std::vector<std::size_t> ranks_reported;

 private:
  const DistTrainingRun& run_;
};

// Every rank's sink and loop result, in rank order.
std::vector<RankSink> run_loop(const TrainConfig& c, const Plan& plan, const TrainLoopOptions& o,
                               std::vector<TrainLoopResult>* results) {
  DistTrainConfig dc;
  dc.train = c;
  dc.plan = plan;
  const int n = static_cast<int>(plan.num_devices());
  LocalWorld world(n);
  std::vector<std::optional<RankSink>> sinks(static_cast<std::size_t>(n));
  results->assign(static_cast<std::size_t>(n), TrainLoopResult{});
  auto errors = run_on_threads(world, [&](Communicator comm) {
    omp_set_num_threads(1);
    const auto r = static_cast<std::size_t>(comm.rank());
    DistributedTrainer t(dc, comm);
    DistTrainingRun run(t, comm);
    RankSink sink(run);
    (*results)[r] = TrainLoop(run, o).run(sink);
    sinks[r].emplace(sink);  // what it recorded (its run is not used again)
  });
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  std::vector<RankSink> out;
  for (auto& s : sinks) out.push_back(*s);
  return out;
}

TEST(DistLoop, TrainsAsStepByHandAndOnlyTheLeadReports) {
  const fs::path dir = test::temp_dir("dist_loop");
  const Plan plan = two_pipelines();
  const TrainConfig c =
      test::train_config(plan.model, test::synthetic_file(dir, 4000, 32), plan.gbs, kSeq, 4);
  const test::RunResult by_hand = test::run_plan(c, plan, 4);
  TrainLoopOptions o;
  o.checkpoint_dir = dir / "ckpt";
  o.checkpoint_every = 3;
  std::vector<TrainLoopResult> results;
  const std::vector<RankSink> sinks = run_loop(c, plan, o, &results);
  ASSERT_EQ(sinks.size(), plan.num_devices());
  EXPECT_EQ(sinks[0].losses, by_hand.losses);
  for (std::size_t r = 0; r < sinks.size(); ++r) {
    EXPECT_EQ(sinks[r].before, (std::vector<std::int64_t>{0, 1, 2, 3})) << "rank " << r;
    EXPECT_EQ(sinks[r].checkpoints, (std::vector<std::int64_t>{3, 4})) << "rank " << r;
    if (r > 0) {
      EXPECT_TRUE(sinks[r].losses.empty()) << "rank " << r << " reported";
    }
    EXPECT_EQ(results[r].checkpoint, checkpoint_path(dir / "ckpt", 4)) << "rank " << r;
  }
  // Each step's log line has every rank's times, and the run's period of the step.
  for (std::size_t i = 0; i < sinks[0].ranks_reported.size(); ++i) {
    EXPECT_EQ(sinks[0].ranks_reported[i], plan.num_devices()) << "step " << i;
    EXPECT_GT(sinks[0].seconds[i], 0) << "step " << i;
  }
  EXPECT_TRUE(fs::exists(checkpoint_path(dir / "ckpt", 3)));
  EXPECT_TRUE(fs::exists(checkpoint_path(dir / "ckpt", 4)));
}

TEST(DistLoop, AStopFileStopsEveryRankAtTheSameCheckpoint) {
  const fs::path dir = test::temp_dir("dist_loop_stop");
  const Plan plan = two_pipelines();
  const TrainConfig c =
      test::train_config(plan.model, test::synthetic_file(dir, 4000, 32), plan.gbs, kSeq, 6);
  std::ofstream(dir / "stop") << "stop\n";
  TrainLoopOptions o;
  o.checkpoint_dir = dir / "ckpt";
  o.checkpoint_every = 2;
  o.stop_file = dir / "stop";
  std::vector<TrainLoopResult> results;
  const std::vector<RankSink> sinks = run_loop(c, plan, o, &results);
  for (std::size_t r = 0; r < results.size(); ++r) {
    EXPECT_TRUE(results[r].stop_requested) << "rank " << r;
    EXPECT_EQ(results[r].end_step, 2) << "rank " << r;
    EXPECT_EQ(sinks[r].before, (std::vector<std::int64_t>{0, 1})) << "rank " << r;
  }
  EXPECT_TRUE(fs::exists(checkpoint_path(dir / "ckpt", 2)));
  EXPECT_EQ(read_checkpoint_meta(checkpoint_path(dir / "ckpt", 2)).step, 2);
}

TEST(DistLoop, RunTimesMeansLeaveTheFirstStepOutWhenThereAreMore) {
  RunTimes t;
  EXPECT_EQ(t.mean_step_s(), 0.0);
  auto rank = [](double x) { return RankTimes{x, 2 * x, 3 * x, 4 * x, 5 * x}; };
  t.add(100, {rank(100), rank(1000)});  // the first step: set-up
  EXPECT_EQ(t.mean_step_s(), 100.0);    // alone, it is the mean
  EXPECT_EQ(t.mean_rank(1).wait_s, 2000.0);
  t.add(2, {rank(2), rank(20)});
  t.add(4, {rank(4), rank(40)});
  EXPECT_EQ(t.steps(), 3u);
  EXPECT_EQ(t.mean_step_s(), 3.0);
  const RankTimes r1 = t.mean_rank(1);
  EXPECT_EQ(r1.compute_s, 30.0);
  EXPECT_EQ(r1.wait_s, 60.0);
  EXPECT_EQ(r1.sync_s, 90.0);
  EXPECT_EQ(r1.optimizer_s, 120.0);
  EXPECT_EQ(r1.step_s, 150.0);
  EXPECT_EQ(t.mean_rank(0).compute_s, 3.0);
}

TEST(DistLoop, EveryRankAgreesOnRankZerosAnswerAndNoSetValidatesNothing) {
  const fs::path dir = test::temp_dir("dist_loop_agree");
  const Plan plan = two_pipelines();
  DistTrainConfig dc;
  dc.train =
      test::train_config(plan.model, test::synthetic_file(dir, 4000, 32), plan.gbs, kSeq, 1);
  dc.plan = plan;
  const int n = static_cast<int>(plan.num_devices());
  LocalWorld world(n);
  std::vector<int> agreed(static_cast<std::size_t>(2 * n), -1);
  std::vector<int> validated(static_cast<std::size_t>(n), -1);
  auto errors = run_on_threads(world, [&](Communicator comm) {
    omp_set_num_threads(1);
    DistributedTrainer t(dc, comm);
    DistTrainingRun run(t, comm);
    const auto r = static_cast<std::size_t>(comm.rank());
    // Each rank asks with a value of its own: rank 0's is the answer.
    agreed[2 * r] = run.agree(comm.rank() % 2 == 1) ? 1 : 0;
    agreed[2 * r + 1] = run.agree(comm.rank() == 0) ? 1 : 0;
    validated[r] = run.validate().has_value() ? 1 : 0;
    EXPECT_EQ(run.is_lead(), comm.rank() == 0);
    EXPECT_EQ(run.tokens_per_step(), plan.gbs * kSeq);
    EXPECT_EQ(run.next_step(), 0);
  });
  test::expect_no_errors(errors);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(agreed[static_cast<std::size_t>(2 * r)], 0) << "rank " << r;
    EXPECT_EQ(agreed[static_cast<std::size_t>(2 * r + 1)], 1) << "rank " << r;
    EXPECT_EQ(validated[static_cast<std::size_t>(r)], 0) << "rank " << r;
  }
}

}  // namespace
}  // namespace eth::dist_training_run_test
