// Training under a plan is single-device training on the global batch: the asymmetric
// plan (pipelines of 2 and 3 stages, different micro-batch sizes and local batches), intra-stage
// dp with a replica left empty by a small last micro-batch, recompute on some stages, all three
// aggregation modes, and resume under another plan, each against the single-process trainer.
//
// Tolerances: the first step starts from identical weights, so its gradient differs from the
// single-process one only by the order of fp32 additions (per-micro-batch partial sums, then the
// all-reduce): a few float epsilons (1.2e-7) of the largest gradient; we allow 1e-5 of it, as
// the single-process accumulation test does. Losses are means of ~1e2 token losses of size ~3:
// relative 1e-5. After several AdamW steps the rounding is amplified where m / sqrt(v) turns
// a tiny gradient into a full-size update, so parameters are compared to 1e-4 absolute (lr is
// 1e-2; a systematic error such as a missing or doubled micro-batch moves them by ~1e-2).
#include <gtest/gtest.h>

#include <cmath>

#include "runtime_test_util.h"

namespace eth {
namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kSeq = 8;

test::DistRun with_mode(AggregationMode m) {
  test::DistRun r;
  r.mode = m;
  return r;
}

void expect_same_training(const test::RunResult& single, const test::RunResult& dist,
                          const std::string& what) {
  ASSERT_EQ(single.losses.size(), dist.losses.size()) << what;
  for (std::size_t i = 0; i < single.losses.size(); ++i) {
    EXPECT_NEAR(dist.losses[i], single.losses[i], 1e-5 * single.losses[i]) << what << " step " << i;
    EXPECT_NEAR(dist.norms[i], single.norms[i], 1e-4 * single.norms[i]) << what << " step " << i;
  }
  EXPECT_LT(test::max_diff(dist.params, single.params), 1e-4) << what;
  EXPECT_TRUE(dist.replicas_agree) << what;
}

// The example: A has 2 stages, micro-batch 2, local batch 6; B has 3 stages,
// micro-batch 1, local batch 2; they cut the 5 units in different places.
Plan asymmetric_plan() {
  return test::make_plan(test::small3(), kSeq,
                         {{2, 6, {{0, 1}, {2, 4}}}, {1, 2, {{0, 0}, {1, 2}, {3, 4}}}});
}

TEST(Equivalence, FirstStepGradientEqualsOneDevice) {
  const fs::path dir = test::temp_dir("first_step");
  const Plan plan = asymmetric_plan();
  const TrainConfig c = test::train_config(plan.model, test::synthetic_file(dir, 4000, 32),
                                           plan.gbs, kSeq, 1);
  const test::RunResult single = test::run_single(c, 1);
  const test::RunResult dist = test::run_plan(c, plan, 1);
  const double gmax = test::max_abs(single.grads);
  ASSERT_GT(gmax, 0);
  EXPECT_LT(test::max_diff(dist.grads, single.grads), 1e-5 * gmax);
  EXPECT_NEAR(dist.losses[0], single.losses[0], 1e-6 * single.losses[0]);
}

TEST(Equivalence, AsymmetricPipelinesTrainLikeOneDevice) {
  const fs::path dir = test::temp_dir("asymmetric");
  const Plan plan = asymmetric_plan();
  const TrainConfig c = test::train_config(plan.model, test::synthetic_file(dir, 4000, 32),
                                           plan.gbs, kSeq, 4);
  expect_same_training(test::run_single(c, 4), test::run_plan(c, plan, 4), "asymmetric");
}

TEST(Equivalence, AggregationModesGiveTheSameGradients) {
  // The same holders sum the same numbers in rank order (device-wise adds exact zeros), so the
  // three modes agree exactly, not just to a tolerance.
  const fs::path dir = test::temp_dir("modes");
  const Plan plan = asymmetric_plan();
  const TrainConfig c = test::train_config(plan.model, test::synthetic_file(dir, 4000, 32),
                                           plan.gbs, kSeq, 2);
  const test::RunResult block = test::run_plan(c, plan, 2, with_mode(AggregationMode::Block));
  for (AggregationMode m : {AggregationMode::Tensor, AggregationMode::Device}) {
    const test::RunResult other = test::run_plan(c, plan, 2, with_mode(m));
    EXPECT_EQ(other.grads, block.grads) << aggregation_mode_name(m);
    EXPECT_EQ(other.params, block.params) << aggregation_mode_name(m);
    EXPECT_EQ(other.losses, block.losses) << aggregation_mode_name(m);
  }
  expect_same_training(test::run_single(c, 2), block, "block");
}

TEST(Equivalence, IntraStageDataParallelism) {
  // Pipeline A: dp 2 then dp 1. Pipeline B: dp 1 then dp 3 with micro-batch 3 over a local batch
  // of 5, so the last micro-batch (2 samples) leaves one of the three replicas empty, and the
  // replicas' chunks straddle the previous stage's.
  const fs::path dir = test::temp_dir("dp");
  const Plan plan = test::make_plan(
      test::small3(), kSeq, {{2, 4, {{0, 1, 2}, {2, 4, 1}}}, {3, 5, {{0, 2, 1}, {3, 4, 3}}}});
  ASSERT_EQ(plan.num_devices(), 7);
  const TrainConfig c = test::train_config(plan.model, test::synthetic_file(dir, 4000, 32),
                                           plan.gbs, kSeq, 3);
  expect_same_training(test::run_single(c, 3), test::run_plan(c, plan, 3), "dp");
}

TEST(Equivalence, RecomputeOnSomeStagesChangesNothing) {
  const fs::path dir = test::temp_dir("recompute");
  RecomputeSet attn;
  attn.add(RecomputeOp::AttnScore);
  attn.add(RecomputeOp::AttnDropout);
  RecomputeSet unit;
  unit.add(RecomputeOp::Unit);
  const Plan plain = asymmetric_plan();
  const Plan with = test::make_plan(
      test::small3(), kSeq,
      {{2, 6, {{0, 1, 1, RecomputeSet::all_ops()}, {2, 4}}}, {1, 2, {{0, 0}, {1, 2, 1, unit}, {3, 4, 1, attn}}}});
  const TrainConfig c = test::train_config(plain.model, test::synthetic_file(dir, 4000, 32),
                                           plain.gbs, kSeq, 3);
  const test::RunResult a = test::run_plan(c, plain, 3);
  const test::RunResult b = test::run_plan(c, with, 3);
  // Recompute is bitwise (tests/train), and the plan is otherwise the same.
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(a.params, b.params);
  expect_same_training(test::run_single(c, 3), b, "recompute");
}

TEST(Equivalence, ResumeUnderAnotherPlan) {
  const fs::path dir = test::temp_dir("resume");
  const Plan first = asymmetric_plan();
  // Another plan: one pipeline of 3 stages with dp 2 in the middle, micro-batch 3 (8 = 3 + 3 + 2).
  const Plan second = test::make_plan(test::small3(), kSeq, {{3, 8, {{0, 1}, {2, 3, 2}, {4, 4}}}});
  const TrainConfig c = test::train_config(first.model, test::synthetic_file(dir, 4000, 32),
                                           first.gbs, kSeq, 4);
  const test::RunResult single = test::run_single(c, 4);
  test::DistRun save;
  save.save_dir = dir / "ckpt";
  const test::RunResult a = test::run_plan(c, first, 2, save);
  const fs::path ckpt = checkpoint_path(dir / "ckpt", 2);
  ASSERT_TRUE(fs::exists(ckpt));
  test::DistRun resume;
  resume.resume = ckpt;
  const test::RunResult b = test::run_plan(c, second, 2, resume);
  test::RunResult joined = b;
  joined.losses.insert(joined.losses.begin(), a.losses.begin(), a.losses.end());
  joined.norms.insert(joined.norms.begin(), a.norms.begin(), a.norms.end());
  expect_same_training(single, joined, "resume");
  // The distributed checkpoint is the single-process format: one process resumes it too.
  Trainer one(c, ckpt);
  EXPECT_EQ(one.next_step(), 2);
  const StepStats s = one.step();
  EXPECT_NEAR(s.loss, single.losses[2], 1e-5 * single.losses[2]);
}

TEST(Equivalence, ADeadRankIsNamedNotWaitedForever) {
  const fs::path dir = test::temp_dir("dead");
  const Plan plan = asymmetric_plan();
  DistTrainConfig dc;
  dc.train = test::train_config(plan.model, test::synthetic_file(dir, 4000, 32), plan.gbs, kSeq, 2);
  dc.plan = plan;
  CommOptions opt;
  opt.timeout = std::chrono::milliseconds(1500);
  LocalWorld world(static_cast<int>(plan.num_devices()), opt);
  auto errors = run_on_threads(world, [&](Communicator comm) {
    omp_set_num_threads(1);
    DistributedTrainer t(dc, comm);
    if (comm.rank() == 3) throw std::runtime_error("rank 3 dies");
    t.step();
  });
  ASSERT_TRUE(errors[3]);
  int named = 0;
  for (std::size_t r = 0; r < errors.size(); ++r) {
    if (r == 3) continue;
    ASSERT_TRUE(errors[r]) << "rank " << r << " finished a step without rank 3";
    try {
      std::rethrow_exception(errors[r]);
    } catch (const CommError& e) {
      if (std::string(e.what()).find("rank 3") != std::string::npos) ++named;
    }
  }
  EXPECT_GE(named, 1) << "some rank must name the rank it waited for";
}

}  // namespace
}  // namespace eth
