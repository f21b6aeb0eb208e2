// Tensor parallelism trains like one process: single stages at tp 2 and 4, two pipelines holding
// the same units at different tp (2; 4 and 1) and micro-batch sizes under every aggregation mode
// (bitwise equal to each other), pipelines of tp 2 and 3 (lcm 6: gradients cut into chunks),
// tp x dp, recompute inside tp stages (bitwise equal to the same
// plan without it), a GPipe plan, and resume across tp degrees (4 -> 1 -> 2), each over 20+
// steps against the single-process trainer.
//
// Tolerances, as in equivalence_test.cpp: losses are means of ~2e2 token losses of size ~3,
// whose fp32 sums run in another order under tp (row-parallel partial products, the
// vocabulary-parallel cross-entropy): relative 1e-5 at every step. Parameters after 20 AdamW
// steps at lr 1e-2: 2e-4 absolute (a missing or doubled shard moves them by ~1e-2; rounding,
// amplified where m / sqrt(v) normalizes tiny gradients, stays ~1e-5).
#include <gtest/gtest.h>

#include "runtime_test_util.h"

namespace eth::tp_equivalence_test {
namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kSeq = 8;
constexpr std::int64_t kSteps = 20;

// Three blocks, 4 heads of 4, ffn 24 (tp 1, 2 and 4 divide both), vocabulary 31: uneven over
// tp 2 (15, 16) and tp 4 (7, 8, 8, 8) rows. Units 0..4.
ModelSpec tp_model() { return ModelSpec{"tp4", 3, 16, 4, kSeq, 31, 24}; }

TrainConfig config(const Plan& plan, const fs::path& dir, std::int64_t steps) {
  TrainConfig c =
      test::train_config(plan.model, test::synthetic_file(dir, 6000, 31), plan.gbs, kSeq, steps);
  return c;
}

void expect_same_training(const test::RunResult& single, const test::RunResult& dist,
                          const std::string& what, double param_tol = 2e-4) {
  ASSERT_EQ(single.losses.size(), dist.losses.size()) << what;
  for (std::size_t i = 0; i < single.losses.size(); ++i) {
    EXPECT_NEAR(dist.losses[i], single.losses[i], 1e-5 * single.losses[i]) << what << " step " << i;
    EXPECT_NEAR(dist.norms[i], single.norms[i], 1e-4 * single.norms[i]) << what << " step " << i;
  }
  EXPECT_LT(test::max_diff(dist.params, single.params), param_tol) << what;
  EXPECT_TRUE(dist.replicas_agree) << what;
}

test::StageSpec tp_stage(std::int64_t first, std::int64_t last, std::int64_t tp,
                         std::int64_t dp = 1, RecomputeSet rc = {}) {
  return test::StageSpec{first, last, dp, rc, tp};
}

TEST(TpEquivalence, FirstStepGradientOfATp2StageEqualsOneDevice) {
  const fs::path dir = test::temp_dir("tp_first");
  const Plan plan = test::make_plan(tp_model(), kSeq, {{2, 4, {tp_stage(0, 4, 2)}}});
  const TrainConfig c = config(plan, dir, 1);
  const test::RunResult single = test::run_single(c, 1);
  const test::RunResult dist = test::run_plan(c, plan, 1);
  const double gmax = test::max_abs(single.grads);
  ASSERT_GT(gmax, 0);
  EXPECT_LT(test::max_diff(dist.grads, single.grads), 1e-5 * gmax);
}

TEST(TpEquivalence, SingleStagesAtTp2AndTp4) {
  const fs::path dir = test::temp_dir("tp_single");
  const Plan tp2 = test::make_plan(tp_model(), kSeq, {{2, 6, {tp_stage(0, 4, 2)}}});
  const Plan tp4 = test::make_plan(tp_model(), kSeq, {{3, 6, {tp_stage(0, 4, 4)}}});
  const TrainConfig c = config(tp2, dir, kSteps);
  const test::RunResult single = test::run_single(c, kSteps);
  expect_same_training(single, test::run_plan(c, tp2, kSteps), "tp 2");
  expect_same_training(single, test::run_plan(c, tp4, kSteps), "tp 4");
}

// Pipeline A: units 0-1 at tp 2, units 2-4 at tp 1, micro-batch 2 over 6 samples. Pipeline B:
// units 0-2 at tp 4, units 3-4 at tp 1, micro-batch 1 over 3 samples. Segment [0,1] has chunks
// of lcm(2, 4) = 4, unit 2 lcm(1, 4) = 4, [3,4] whole tensors.
Plan mixed_plan() {
  return test::make_plan(tp_model(), kSeq,
                         {{2, 6, {tp_stage(0, 1, 2), tp_stage(2, 4, 1)}},
                          {1, 3, {tp_stage(0, 2, 4), tp_stage(3, 4, 1)}}});
}

TEST(TpEquivalence, PipelinesOfDifferentTpInEveryAggregationMode) {
  const fs::path dir = test::temp_dir("tp_mixed");
  const Plan plan = mixed_plan();
  ASSERT_EQ(plan.num_devices(), 8);
  const TrainConfig c = config(plan, dir, kSteps);
  test::DistRun run;
  run.mode = AggregationMode::Block;
  const test::RunResult block = test::run_plan(c, plan, kSteps, run);
  expect_same_training(test::run_single(c, kSteps), block, "block");
  // The same holders sum the same numbers in rank order (zeros added exactly): bitwise.
  for (AggregationMode m : {AggregationMode::Tensor, AggregationMode::Device}) {
    run.mode = m;
    const test::RunResult other = test::run_plan(c, plan, 3, run);
    for (std::size_t i = 0; i < other.losses.size(); ++i) {
      EXPECT_EQ(other.losses[i], block.losses[i]) << aggregation_mode_name(m) << " step " << i;
      EXPECT_EQ(other.norms[i], block.norms[i]) << aggregation_mode_name(m) << " step " << i;
    }
  }
  // After three steps, all three modes hold the same parameters bitwise.
  run.mode = AggregationMode::Block;
  const test::RunResult block3 = test::run_plan(c, plan, 3, run);
  for (AggregationMode m : {AggregationMode::Tensor, AggregationMode::Device}) {
    run.mode = m;
    const test::RunResult other = test::run_plan(c, plan, 3, run);
    EXPECT_EQ(other.params, block3.params) << aggregation_mode_name(m);
    EXPECT_EQ(other.grads, block3.grads) << aggregation_mode_name(m);
  }
}

// lcm(2, 3) = 6 chunks on units 0-1 and 3 on unit 2, so tp 2, tp 3 and tp 1 ranks hold their
// weight gradients cut into chunks of different blocks (written in place by the row-chunk
// kernels): every mode gives the same bits, and one process's training.
TEST(TpEquivalence, GradientsCutByAnLcmAboveTpInEveryAggregationMode) {
  const fs::path dir = test::temp_dir("tp_lcm6");
  const ModelSpec m{"lcm6", 2, 24, 6, kSeq, 29, 36};
  const Plan plan = test::make_plan(m, kSeq,
                                    {{2, 4, {tp_stage(0, 1, 2), tp_stage(2, 3, 1)}},
                                     {1, 2, {tp_stage(0, 2, 3), tp_stage(3, 3, 2)}}});
  const TrainConfig c =
      test::train_config(m, test::synthetic_file(dir, 6000, 29), plan.gbs, kSeq, 4);
  test::DistRun run;
  const test::RunResult block = test::run_plan(c, plan, 4, run);
  expect_same_training(test::run_single(c, 4), block, "lcm 6");
  for (AggregationMode mode : {AggregationMode::Tensor, AggregationMode::Device}) {
    run.mode = mode;
    const test::RunResult other = test::run_plan(c, plan, 4, run);
    EXPECT_EQ(other.losses, block.losses) << aggregation_mode_name(mode);
    EXPECT_EQ(other.norms, block.norms) << aggregation_mode_name(mode);
    EXPECT_EQ(other.grads, block.grads) << aggregation_mode_name(mode);
    EXPECT_EQ(other.params, block.params) << aggregation_mode_name(mode);
  }
}

// The same plan in bf16: the cut fp32 gradients of tp 2 and tp 3 ranks are written in place by
// the bf16 row-chunk kernels (the column-parallel ones with fp32 partial input gradients), so the
// first step's gradient is one bf16 process's to fp32 rounding, and every mode gives the same
// bits over a few steps.
TEST(TpEquivalence, Bf16GradientsCutByAnLcmAboveTpInEveryAggregationMode) {
  const fs::path dir = test::temp_dir("tp_lcm6_bf16");
  const ModelSpec m{"lcm6", 2, 24, 6, kSeq, 29, 36};
  const Plan plan = test::make_plan(m, kSeq,
                                    {{2, 4, {tp_stage(0, 1, 2), tp_stage(2, 3, 1)}},
                                     {1, 2, {tp_stage(0, 2, 3), tp_stage(3, 3, 2)}}});
  TrainConfig c = test::train_config(m, test::synthetic_file(dir, 6000, 29), plan.gbs, kSeq, 3);
  c.precision = Precision::Bf16;
  const test::RunResult single = test::run_single(c, 1);
  test::DistRun run;
  const test::RunResult first = test::run_plan(c, plan, 1, run);
  const double gmax = test::max_abs(single.grads);
  ASSERT_GT(gmax, 0);
  EXPECT_LT(test::max_diff(first.grads, single.grads), 1e-5 * gmax);
  const test::RunResult block = test::run_plan(c, plan, 3, run);
  for (AggregationMode mode : {AggregationMode::Tensor, AggregationMode::Device}) {
    run.mode = mode;
    const test::RunResult other = test::run_plan(c, plan, 3, run);
    EXPECT_EQ(other.losses, block.losses) << aggregation_mode_name(mode);
    EXPECT_EQ(other.grads, block.grads) << aggregation_mode_name(mode);
    EXPECT_EQ(other.params, block.params) << aggregation_mode_name(mode);
  }
}

TEST(TpEquivalence, TpTimesDp) {
  // A tp 2 x dp 2 stage, then a tp 1 x dp 2 one, beside a pipeline with a tp 2 x dp 1 head.
  const fs::path dir = test::temp_dir("tp_dp");
  const Plan plan = test::make_plan(tp_model(), kSeq,
                                    {{2, 4, {tp_stage(0, 2, 2, 2), tp_stage(3, 4, 1, 2)}},
                                     {2, 2, {tp_stage(0, 3, 1), tp_stage(4, 4, 2)}}});
  ASSERT_EQ(plan.num_devices(), 9);
  const TrainConfig c = config(plan, dir, kSteps);
  expect_same_training(test::run_single(c, kSteps), test::run_plan(c, plan, kSteps), "tp x dp");
}

TEST(TpEquivalence, RecomputeInsideTpStagesChangesNothing) {
  const fs::path dir = test::temp_dir("tp_recompute");
  RecomputeSet unit;
  unit.add(RecomputeOp::Unit);
  RecomputeSet attn;
  attn.add(RecomputeOp::AttnScore);
  attn.add(RecomputeOp::AttnSoftmax);
  const Plan plain = test::make_plan(
      tp_model(), kSeq, {{2, 4, {tp_stage(0, 1, 2), tp_stage(2, 3, 4), tp_stage(4, 4, 2)}}});
  const Plan with =
      test::make_plan(tp_model(), kSeq,
                      {{2,
                        4,
                        {tp_stage(0, 1, 2, 1, unit), tp_stage(2, 3, 4, 1, RecomputeSet::all_ops()),
                         tp_stage(4, 4, 2, 1, unit)}}});
  const Plan attn_only =
      test::make_plan(tp_model(), kSeq,
                      {{2, 4, {tp_stage(0, 1, 2), tp_stage(2, 3, 4, 1, attn), tp_stage(4, 4, 2)}}});
  const TrainConfig c = config(plain, dir, kSteps);
  const test::RunResult a = test::run_plan(c, plain, kSteps);
  for (const auto& [name, plan] :
       {std::pair{"unit and all operators", with}, std::pair{"attention operators", attn_only}}) {
    const test::RunResult b = test::run_plan(c, plan, kSteps);
    // A recomputed shard is rebuilt by the same kernels from the same inputs: bitwise.
    EXPECT_EQ(a.losses, b.losses) << name;
    EXPECT_EQ(a.params, b.params) << name;
  }
  expect_same_training(test::run_single(c, kSteps), a, "recompute");
}

// Per micro-batch a tp stage of every unit all-reduces once after the lookup, four times per
// block (two forward, two backward), twice for the loss statistics and once for the head's
// input gradient. Operator recompute adds nothing; full-unit recompute adds exactly the
// attention output of each block and the head's two loss statistics.
TEST(TpEquivalence, RecomputeCommunicatesOnlyWhatItMustRebuild) {
  const fs::path dir = test::temp_dir("tp_comm_count");
  RecomputeSet unit;
  unit.add(RecomputeOp::Unit);
  const std::int64_t L = tp_model().layers, k = 3;  // micro-batches of the plan below
  const std::int64_t base = k * (1 + 4 * L + 3);
  for (const auto& [rc, want] : {std::pair{RecomputeSet{}, base},
                                 std::pair{RecomputeSet::all_ops(), base},
                                 std::pair{unit, base + k * (L + 2)}}) {
    const Plan plan = test::make_plan(tp_model(), kSeq, {{2, 6, {tp_stage(0, 4, 2, 1, rc)}}});
    DistTrainConfig dc;
    dc.train = config(plan, dir, 1);
    dc.plan = plan;
    LocalWorld world(2);
    std::vector<std::int64_t> got(2);
    auto errors = run_on_threads(world, [&](Communicator comm) {
      omp_set_num_threads(1);
      DistributedTrainer t(dc, comm);
      t.step();
      got[static_cast<std::size_t>(comm.rank())] = t.last_tp_stats().collectives;
    });
    for (const auto& e : errors) {
      if (e) std::rethrow_exception(e);
    }
    EXPECT_EQ(got[0], want) << static_cast<int>(rc.bits());
    EXPECT_EQ(got[1], want) << static_cast<int>(rc.bits());
  }
}

TEST(TpEquivalence, GpipePlansRunAsGpipe) {
  const fs::path dir = test::temp_dir("tp_gpipe");
  Plan plan = mixed_plan();
  plan.schedule = "gpipe";
  const TrainConfig c = config(plan, dir, kSteps);
  expect_same_training(test::run_single(c, kSteps), test::run_plan(c, plan, kSteps), "gpipe");
}

TEST(TpEquivalence, ResumeAcrossTpDegrees) {
  // 7 steps at tp 4, 7 at tp 1 (one process, then a two-stage plan), 7 at tp 2: 21 steps with
  // the losses of uninterrupted single-process training.
  const fs::path dir = test::temp_dir("tp_resume");
  const Plan tp4 = test::make_plan(tp_model(), kSeq, {{3, 6, {tp_stage(0, 4, 4)}}});
  const Plan tp1 =
      test::make_plan(tp_model(), kSeq, {{2, 6, {tp_stage(0, 2, 1), tp_stage(3, 4, 1)}}});
  const Plan tp2 =
      test::make_plan(tp_model(), kSeq, {{6, 6, {tp_stage(0, 1, 2), tp_stage(2, 4, 2)}}});
  const TrainConfig c = config(tp4, dir, 21);
  const test::RunResult single = test::run_single(c, 21);
  test::DistRun save;
  save.save_dir = dir / "a";
  const test::RunResult a = test::run_plan(c, tp4, 7, save);
  // One process resumes the tp 4 checkpoint (whole tensors, the single-process format).
  {
    Trainer one(c, checkpoint_path(dir / "a", 7));
    EXPECT_NEAR(one.step().loss, single.losses[7], 1e-5 * single.losses[7]);
  }
  test::DistRun mid;
  mid.resume = checkpoint_path(dir / "a", 7);
  mid.save_dir = dir / "b";
  const test::RunResult b = test::run_plan(c, tp1, 7, mid);
  test::DistRun last;
  last.resume = checkpoint_path(dir / "b", 14);
  const test::RunResult d = test::run_plan(c, tp2, 7, last);
  test::RunResult joined = d;
  for (const test::RunResult* part : {&b, &a}) {
    joined.losses.insert(joined.losses.begin(), part->losses.begin(), part->losses.end());
    joined.norms.insert(joined.norms.begin(), part->norms.begin(), part->norms.end());
  }
  expect_same_training(single, joined, "tp 4 -> 1 -> 2");
}

}  // namespace
}  // namespace eth::tp_equivalence_test
