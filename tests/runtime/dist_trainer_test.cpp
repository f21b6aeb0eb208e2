// One rank of distributed training (runtime/dist_trainer.h), on LocalWorld threads, in what the
// trainer itself adds to the runner and the aggregation (whose numbers the equivalence tests
// check against one process): a checkpoint before any step is the single-process
// initialization bit for bit; after a step the checkpoint rank 0 writes joins every owner's tp
// rows and every replica holds the same bits; every rank reports the same step; the gathers of
// times and memory are each rank's own figures in rank order, the memory by role worked out by
// hand; and bad runs are refused on every rank naming the flag.
#include "runtime/dist_trainer.h"

#include <gtest/gtest.h>

#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime_test_util.h"

namespace eth::dist_trainer_test {
namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kSeq = 8;

// Pipeline 0: units 0-1, then 2-4 at tp 2; pipeline 1: units 0-2 at dp 2, then 3-4. Ranks 0, 1-2
// (tp), 3-4 (dp), 5.
Plan mixed_plan() {
  return test::make_plan(test::small3(), kSeq,
                         {{2, 4, {{0, 1}, {2, 4, 1, {}, 2}}}, {2, 2, {{0, 2, 2}, {3, 4}}}});
}

DistTrainConfig dist_config(const fs::path& dir, std::int64_t steps) {
  const Plan plan = mixed_plan();
  DistTrainConfig dc;
  dc.train = test::train_config(plan.model, test::synthetic_file(dir, 4000, 32), plan.gbs, kSeq,
                                steps);
  dc.plan = plan;
  return dc;
}

// What a rank leaves for the checks: its layout and parameters, and its reports.
struct RankView {
  std::vector<float> params;
  std::vector<RankTimes> times;      // rank 0: every rank's
  RankTimes own_times;
  std::vector<RankMemory> memory;    // rank 0: every rank's
  RankMemory own_memory;
  StepStats stats;
  std::int64_t tokens_per_step = 0;
  bool done = false;
};

// Runs `steps` steps of `dc` on threads, then a checkpoint into `save` (collective), and returns
// every rank's view with its layout.
std::vector<RankView> run(const DistTrainConfig& dc, std::int64_t steps, const fs::path& save,
                          std::vector<ParamLayout>* layouts) {
  const int n = static_cast<int>(dc.plan.num_devices());
  LocalWorld world(n);
  std::vector<RankView> views(static_cast<std::size_t>(n));
  std::vector<std::optional<ParamLayout>> l(static_cast<std::size_t>(n));
  auto errors = run_on_threads(world, [&](Communicator comm) {
    omp_set_num_threads(1);
    DistributedTrainer t(dc, comm);
    RankView& v = views[static_cast<std::size_t>(comm.rank())];
    for (std::int64_t i = 0; i < steps; ++i) v.stats = t.step();
    v.times = t.gather_times();
    v.own_times = t.last_times();
    v.memory = t.gather_memory();
    v.own_memory = t.memory();
    v.tokens_per_step = t.tokens_per_step();
    v.done = t.done();
    t.save_checkpoint(save);
    v.params.assign(t.state().params(), t.state().params() + t.state().numel());
    l[static_cast<std::size_t>(comm.rank())].emplace(t.state().layout());
  });
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  for (auto& x : l) layouts->push_back(*x);
  return views;
}

// Every rank's rows of every tensor equal the whole model's at those rows.
void expect_rows_of(const ModelState& whole, const std::vector<RankView>& views,
                    const std::vector<ParamLayout>& layouts) {
  for (std::size_t r = 0; r < views.size(); ++r) {
    for (const UnitSlot& u : layouts[r].units()) {
      for (std::size_t i = 0; i < u.tensors.size(); ++i) {
        const TensorSlot& t = u.tensors[i];
        const std::int64_t at =
            whole.layout().unit(u.unit).tensors[i].offset + t.rows.begin * t.row_size();
        const std::vector<float> mine(views[r].params.begin() + t.offset,
                                      views[r].params.begin() + t.offset + t.desc.numel());
        const std::vector<float> file(whole.params() + at, whole.params() + at + t.desc.numel());
        EXPECT_EQ(mine, file) << "rank " << r << " unit " << u.unit << " " << t.desc.name;
      }
    }
  }
}

TEST(DistTrainer, ACheckpointBeforeAnyStepIsTheSingleProcessInitialization) {
  const fs::path dir = test::temp_dir("dist_trainer_init");
  const DistTrainConfig dc = dist_config(dir, 1);
  std::vector<ParamLayout> layouts;
  const std::vector<RankView> views = run(dc, 0, dir / "ckpt", &layouts);
  const ModelSpec& m = dc.plan.model;
  ModelState file(m, 0, m.num_units() - 1);
  EXPECT_EQ(load_checkpoint(checkpoint_path(dir / "ckpt", 0), file).step, 0);
  ModelState single(m, 0, m.num_units() - 1);
  single.init(dc.train.seed);
  const auto n = static_cast<std::size_t>(single.numel());
  EXPECT_EQ(std::vector<float>(file.params(), file.params() + n),
            std::vector<float>(single.params(), single.params() + n));
  EXPECT_EQ(std::vector<float>(file.adam_v(), file.adam_v() + n), std::vector<float>(n, 0.0f));
  expect_rows_of(file, views, layouts);
}

TEST(DistTrainer, AfterAStepTheCheckpointJoinsTheOwnersRowsAndEveryRankReportsTheSame) {
  const fs::path dir = test::temp_dir("dist_trainer_step");
  const DistTrainConfig dc = dist_config(dir, 2);
  std::vector<ParamLayout> layouts;
  const std::vector<RankView> views = run(dc, 1, dir / "ckpt", &layouts);
  const ModelSpec& m = dc.plan.model;
  ModelState file(m, 0, m.num_units() - 1);
  EXPECT_EQ(load_checkpoint(checkpoint_path(dir / "ckpt", 1), file).step, 1);
  // Every holder, owner or replica, holds the file's bits: the owners wrote them and the
  // replicas applied the same step.
  expect_rows_of(file, views, layouts);
  for (std::size_t r = 0; r < views.size(); ++r) {
    EXPECT_EQ(views[r].stats.step, 0) << r;
    EXPECT_EQ(views[r].stats.loss, views[0].stats.loss) << r;
    EXPECT_EQ(views[r].stats.grad_norm, views[0].stats.grad_norm) << r;
    EXPECT_EQ(views[r].stats.lr, dc.train.lr.at(0)) << r;
    EXPECT_EQ(views[r].tokens_per_step, dc.plan.gbs * kSeq) << r;
    EXPECT_FALSE(views[r].done) << r;  // 1 of 2 steps
  }
  EXPECT_GT(views[0].stats.loss, 0.0);
  EXPECT_GT(views[0].stats.grad_norm, 0.0);
}

TEST(DistTrainer, GathersHoldEveryRanksOwnFiguresInRankOrder) {
  const fs::path dir = test::temp_dir("dist_trainer_gather");
  const DistTrainConfig dc = dist_config(dir, 1);
  std::vector<ParamLayout> layouts;
  const std::vector<RankView> views = run(dc, 1, dir / "ckpt", &layouts);
  ASSERT_EQ(views[0].times.size(), views.size());
  ASSERT_EQ(views[0].memory.size(), views.size());
  for (std::size_t r = 0; r < views.size(); ++r) {
    if (r > 0) {
      EXPECT_TRUE(views[r].times.empty()) << r;
      EXPECT_TRUE(views[r].memory.empty()) << r;
    }
    const RankTimes& t = views[0].times[r];
    EXPECT_EQ(t.compute_s, views[r].own_times.compute_s) << r;
    EXPECT_EQ(t.sync_s, views[r].own_times.sync_s) << r;
    EXPECT_EQ(t.step_s, views[r].own_times.step_s) << r;
    EXPECT_GT(t.step_s, 0.0) << r;
    const RankMemory& g = views[0].memory[r];
    EXPECT_EQ(g.weights, views[r].own_memory.weights) << r;
    EXPECT_EQ(g.gradients, views[r].own_memory.gradients) << r;
    EXPECT_EQ(g.optimizer_state, views[r].own_memory.optimizer_state) << r;
    EXPECT_EQ(g.activations, views[r].own_memory.activations) << r;
    EXPECT_EQ(g.buffers, views[r].own_memory.buffers) << r;
  }
  // Rank 0 holds units 0-1 of small3 at tp 1: 32 x 16 + 8 x 16 + one block of 2752 parameters
  // = 3392 floats, 13568 bytes (212 cache lines) for the weights, as much for the gradients
  // (block-wise: the placed layout has no gaps), twice that for the two moments.
  EXPECT_EQ(views[0].memory[0].weights, 13568.0);
  EXPECT_EQ(views[0].memory[0].gradients, 13568.0);
  EXPECT_EQ(views[0].memory[0].optimizer_state, 2 * 13568.0);
  EXPECT_GT(views[0].memory[0].activations, 0.0);
}

TEST(DistTrainer, BadRunsAreRefusedOnEveryRankNamingTheFlag) {
  const fs::path dir = test::temp_dir("dist_trainer_refusals");
  auto refusal_on_every_rank = [&](const DistTrainConfig& dc, bool resume) {
    const int n = static_cast<int>(dc.plan.num_devices());
    LocalWorld world(n);
    std::vector<std::string> what(static_cast<std::size_t>(n));
    auto errors = run_on_threads(world, [&](Communicator comm) {
      what[static_cast<std::size_t>(comm.rank())] = test::error_of([&] {
        std::optional<fs::path> from;
        if (resume) from = dir / "any.safetensors";
        DistributedTrainer t(dc, comm, from);
      });
    });
    test::expect_no_errors(errors);
    for (std::size_t r = 1; r < what.size(); ++r) EXPECT_EQ(what[r], what[0]) << "rank " << r;
    return what[0];
  };
  DistTrainConfig dc = dist_config(dir, 0);
  EXPECT_NE(refusal_on_every_rank(dc, false).find("--steps"), std::string::npos);
  dc = dist_config(dir, 1);
  dc.train.device = ComputeDevice::Emulated;  // in fp32
  EXPECT_NE(refusal_on_every_rank(dc, false).find("--precision"), std::string::npos);
  dc = dist_config(dir, 1);
  dc.train.init_from = dir / "weights.safetensors";
  EXPECT_NE(refusal_on_every_rank(dc, true).find("--init-from"), std::string::npos);
}

}  // namespace
}  // namespace eth::dist_trainer_test
