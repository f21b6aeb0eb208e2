// --init-from and the validation set under a plan, on LocalWorld threads (issue 26): every rank
// of a two-pipeline plan (one with a tp-2 stage) starts from exactly the checkpoint's weights
// with zero moments at step 0, and trains with the losses of single-process init-from; the
// validation loss every rank gets is bitwise what one process computes on the run's own
// checkpoint of those weights.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>

#include "runtime/dist_training_run.h"
#include "runtime_test_util.h"
#include "train/init_from.h"
#include "train/train_loop.h"
#include "train/validation.h"

namespace eth {
namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kSeq = 8;

Plan two_pipelines() {
  // Pipeline 0 cuts after unit 1 with a tp-2 second stage; pipeline 1 elsewhere.
  return test::make_plan(test::small3(), kSeq,
                           {{2, 4, {{0, 1}, {2, 4, 1, {}, 2}}}, {1, 2, {{0, 2}, {3, 4}}}});
}

// A trained checkpoint (moments not zero) of another seed than the runs that start from it.
fs::path trained_checkpoint(const fs::path& dir, const TrainConfig& base) {
  TrainConfig c = base;
  c.seed = 3;
  c.steps = 3;
  c.lr = LrSchedule{1e-2, 1e-3, 1, 3};
  Trainer t(c);
  for (int i = 0; i < 3; ++i) t.step();
  return t.save_checkpoint(dir / "source");
}

ModelState whole_state(const ModelSpec& m, const fs::path& ckpt) {
  ModelState s(m, 0, m.num_units() - 1);
  load_checkpoint(ckpt, s);
  return s;
}

std::vector<float> values(const float* p, std::int64_t n) {
  return {p, p + n};
}

TEST(FinetuneDist, InitFromStartsEveryRankAtTheCheckpointAndTrainsAsOneProcess) {
  const fs::path dir = test::temp_dir("finetune_dist_init");
  const Plan plan = two_pipelines();
  TrainConfig c =
      test::train_config(plan.model, test::synthetic_file(dir, 4000, 32), plan.gbs, kSeq, 4);
  const fs::path ckpt = trained_checkpoint(dir, c);
  const ModelState source = whole_state(plan.model, ckpt);
  ASSERT_GT(test::max_abs(values(source.adam_v(), source.numel())), 0.0);
  c.init_from = ckpt;

  // Step 0, before any update: the checkpoint's weights bit for bit, zero moments, everywhere.
  const test::RunResult at0 = test::run_plan(c, plan, 0);
  EXPECT_EQ(at0.params, values(source.params(), source.numel()));
  EXPECT_EQ(test::max_abs(at0.adam_m), 0.0);
  EXPECT_EQ(test::max_abs(at0.adam_v), 0.0);
  EXPECT_TRUE(at0.replicas_agree);
  const test::RunResult single0 = test::run_single(c, 0);
  EXPECT_EQ(single0.params, at0.params);
  EXPECT_EQ(test::max_abs(single0.adam_v), 0.0);

  const test::RunResult dist = test::run_plan(c, plan, 3);
  const test::RunResult single = test::run_single(c, 3);
  ASSERT_EQ(dist.losses.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_NEAR(dist.losses[i], single.losses[i], 1e-5 * single.losses[i]) << "step " << i;
  }
  // Not a fresh start in disguise: a run of the same seed without --init-from differs.
  TrainConfig fresh = c;
  fresh.init_from.clear();
  EXPECT_GT(std::abs(test::run_single(fresh, 1).losses[0] - single.losses[0]), 1e-3);
}

TEST(FinetuneDist, InitFromRefusesAnotherModelAndAResume) {
  const fs::path dir = test::temp_dir("finetune_dist_refuse");
  const Plan plan = two_pipelines();
  TrainConfig c =
      test::train_config(plan.model, test::synthetic_file(dir, 4000, 32), plan.gbs, kSeq, 2);
  const fs::path ckpt = trained_checkpoint(dir, c);
  c.init_from = ckpt;
  try {
    test::DistRun r;
    r.resume = ckpt;
    test::run_plan(c, plan, 1, r);
    ADD_FAILURE() << "resume with init_from accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--init-from"), std::string::npos) << e.what();
  }
  ModelSpec other = test::small_model();  // 2 layers, not small3's 3
  try {
    check_init_model(ckpt, checkpoint_model(ckpt), other);
    ADD_FAILURE() << "a model of other dimensions accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("__metadata__.model.layers"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find(ckpt.string()), std::string::npos) << e.what();
  }
}

class ValSink final : public TrainLoopSink {
 public:
  void on_validation(std::int64_t next, double loss) override { val.emplace_back(next, loss); }
  std::vector<std::pair<std::int64_t, double>> val;
};

TEST(FinetuneDist, ValidationLossIsOneProcessesOnTheGatheredWeightsOnEveryRank) {
  const fs::path dir = test::temp_dir("finetune_dist_val");
  const Plan plan = two_pipelines();
  const TrainConfig c =
      test::train_config(plan.model, test::synthetic_file(dir, 4000, 32), plan.gbs, kSeq, 4);
  fs::create_directories(dir / "val");
  const fs::path val_file = test::synthetic_file(dir / "val", 300, 32, 9);
  ValidationConfig vc;
  vc.data = val_file;
  vc.eval.seq_len = kSeq;
  vc.eval.batch = 3;
  vc.eval.max_batches = 4;
  const ValidationSet set(vc, plan.model);
  TrainLoopOptions o;
  o.validate_every = 2;
  o.checkpoint_dir = dir / "ckpt";
  o.checkpoint_every = 2;
  o.print_every = 0;

  DistTrainConfig dc;
  dc.train = c;
  dc.plan = plan;
  const int n = static_cast<int>(plan.num_devices());
  LocalWorld world(n);
  std::vector<double> every_rank(static_cast<std::size_t>(n), -1);
  ValSink lead_sink;
  auto errors = run_on_threads(world, [&](Communicator comm) {
    omp_set_num_threads(1);
    DistributedTrainer t(dc, comm);
    DistTrainingRun run(t, comm, &set);
    ValSink sink;
    TrainLoop(run, o).run(sink);
    every_rank[static_cast<std::size_t>(comm.rank())] = t.validation_loss(set);  // collective
    if (comm.rank() == 0) lead_sink = sink;
  });
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  ASSERT_EQ(lead_sink.val.size(), 2u);
  for (const auto& [next, loss] : lead_sink.val) {
    const ModelState at = whole_state(plan.model, checkpoint_path(o.checkpoint_dir, next));
    EXPECT_EQ(loss, evaluate_loss(at, TokenFile::open(val_file), vc.eval).loss) << next;
  }
  for (double v : every_rank) EXPECT_EQ(v, lead_sink.val.back().second);

  // The single-process run's validation at the same steps: the same up to the plan's rounding.
  Trainer single(c);
  TrainerRun srun(single, &set);
  ValSink ssink;
  TrainLoopOptions so = o;
  so.checkpoint_dir.clear();
  {
    const test::OneThread one;
    TrainLoop(srun, so).run(ssink);
  }
  ASSERT_EQ(ssink.val.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(ssink.val[i].first, lead_sink.val[i].first);
    EXPECT_NEAR(ssink.val[i].second, lead_sink.val[i].second, 1e-5 * ssink.val[i].second);
  }
}

}  // namespace
}  // namespace eth
