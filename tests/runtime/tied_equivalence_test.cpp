// Tied embeddings under the distributed runtime (LocalWorld threads): the tied matrix is one more
// gradient block, held by the first and the last stage of every pipeline at the lcm of their tp
// degrees; a plan of three pipelines (embedding and head on different stages, at tp 2 and 4, and
// a one-stage pipeline holding both copies) trains like one process in every aggregation mode,
// with every copy of the matrix bitwise equal on every rank; the first step's tied gradient is
// one device's; a checkpoint resumes under another plan. The mpirun runs are in tied_cli_test.
//
// Tolerances as in tp_equivalence_test.cpp (same sizes, same reasons).
#include <gtest/gtest.h>

#include <cstring>

#include "runtime_test_util.h"

namespace eth::tied_equivalence_test {
namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kSeq = 8;

// tp_equivalence_test's model (vocabulary 31: uneven under tp 2 and 4), tied. Units 0..4.
ModelSpec tied_model() {
  ModelSpec m{"tied4", 3, 16, 4, kSeq, 31, 24};
  m.tied_embeddings = true;
  return m;
}

test::StageSpec stage(std::int64_t first, std::int64_t last, std::int64_t tp = 1,
                      std::int64_t dp = 1, RecomputeSet rc = {}) {
  return test::StageSpec{first, last, dp, rc, tp};
}

// Pipeline 0: units 0-1 at tp 2, 2-4 at tp 1 (mbs 2 over 5 samples); pipeline 1: 0-2, 3 (full
// recompute), 4 at tp 4 (mbs 1 over 2); pipeline 2: every unit on one device (1 sample). The
// tied matrix is cut into lcm(2, 1, 1, 4, 1) = 4 chunks.
Plan three_pipelines() {
  RecomputeSet unit;
  unit.add(RecomputeOp::Unit);
  return test::make_plan(tied_model(), kSeq,
                         {{2, 5, {stage(0, 1, 2), stage(2, 4)}},
                          {1, 2, {stage(0, 2), stage(3, 3, 1, 1, unit), stage(4, 4, 4)}},
                          {1, 1, {stage(0, 4)}}});
}

TrainConfig config(const Plan& plan, const fs::path& dir, std::int64_t steps) {
  return test::train_config(plan.model, test::synthetic_file(dir, 6000, 31), plan.gbs, kSeq,
                            steps);
}

// Offsets of wte and lm_head_w in the whole-model layout, and their size.
struct Copies {
  std::size_t wte = 0, head = 0, numel = 0;
};
Copies copies(const ModelSpec& m) {
  const ParamLayout full(m, 0, m.num_units() - 1);
  return {static_cast<std::size_t>(full.offset(0, kWte)),
          static_cast<std::size_t>(full.offset(m.num_units() - 1, kLmHeadW)),
          static_cast<std::size_t>(full.unit(0).tensors[kWte].desc.numel())};
}

bool copies_equal(const std::vector<float>& v, const Copies& c) {
  return std::memcmp(v.data() + c.wte, v.data() + c.head, c.numel * 4) == 0;
}

void expect_same_training(const test::RunResult& single, const test::RunResult& dist,
                          const std::string& what) {
  ASSERT_EQ(single.losses.size(), dist.losses.size()) << what;
  for (std::size_t i = 0; i < single.losses.size(); ++i) {
    EXPECT_NEAR(dist.losses[i], single.losses[i], 1e-5 * single.losses[i]) << what << " step " << i;
    EXPECT_NEAR(dist.norms[i], single.norms[i], 1e-4 * single.norms[i]) << what << " step " << i;
  }
  EXPECT_LT(test::max_diff(dist.params, single.params), 2e-4) << what;
  EXPECT_TRUE(dist.replicas_agree) << what;
}

TEST(TiedBlocks, TheMatrixIsOneBlockOfTheFirstAndLastStagesAtTheirLcm) {
  const Plan plan = three_pipelines();
  const ModelSpec& m = plan.model;
  for (AggregationMode mode : {AggregationMode::Block, AggregationMode::Tensor}) {
    std::int64_t tied = 0, elements = 0;
    for (const GradBlock& b : aggregation_collectives(plan, mode)) {
      elements += b.elements;
      for (const GradPiece& p : b.pieces) {
        if (p.part != GradPart::Tied) continue;
        EXPECT_EQ(p.num_tp_chunks, 4);
        tied += p.elements;
        // Chunk c: pipeline 0's devices 0/1 (tp 2, embedding) and 2 (head), pipeline 1's 3
        // (embedding) and 5-8 (tp 4, head), pipeline 2's 9 (both copies, once).
        const std::vector<std::int64_t> want{p.tp_chunk * 2 / 4, 2, 3, 5 + p.tp_chunk, 9};
        EXPECT_EQ(b.holders, want) << "chunk " << p.tp_chunk;
      }
    }
    EXPECT_EQ(tied, m.vocab * m.hidden);
    EXPECT_EQ(elements, total_params(m));  // the matrix counted once, as in total_params
  }
}

TEST(TiedEquivalence, FirstStepGradientEqualsOneDevice) {
  const fs::path dir = test::temp_dir("tied_first");
  const Plan plan = three_pipelines();
  const TrainConfig c = config(plan, dir, 1);
  const test::RunResult single = test::run_single(c, 1);
  const test::RunResult dist = test::run_plan(c, plan, 1);
  const Copies k = copies(plan.model);
  // One process keeps the sum at wte's place (the head's own room stays zero); every rank of
  // the plan holds the same sum at whichever copy it has.
  std::vector<float> want = single.grads;
  std::copy_n(want.begin() + static_cast<std::ptrdiff_t>(k.wte), k.numel,
              want.begin() + static_cast<std::ptrdiff_t>(k.head));
  const double gmax = test::max_abs(want);
  ASSERT_GT(gmax, 0);
  EXPECT_LT(test::max_diff(dist.grads, want), 1e-5 * gmax);
  EXPECT_TRUE(copies_equal(dist.grads, k));
}

TEST(TiedEquivalence, ThreePipelinesTrainLikeOneDeviceInEveryAggregationMode) {
  const fs::path dir = test::temp_dir("tied_modes");
  const Plan plan = three_pipelines();
  const std::int64_t steps = 12;
  const TrainConfig c = config(plan, dir, steps);
  const test::RunResult single = test::run_single(c, steps);
  const Copies k = copies(plan.model);
  EXPECT_TRUE(copies_equal(single.params, k));
  std::vector<float> block_params;
  for (AggregationMode mode :
       {AggregationMode::Block, AggregationMode::Tensor, AggregationMode::Device}) {
    const std::string what(aggregation_mode_name(mode));
    test::DistRun opt;
    opt.mode = mode;
    const test::RunResult dist = test::run_plan(c, plan, steps, opt);
    expect_same_training(single, dist, what);
    // The embedding's stage and the head's stage of pipeline 0 hold bitwise the same matrix
    // (replicas_agree: so does every other rank's copy).
    EXPECT_TRUE(copies_equal(dist.params, k)) << what;
    EXPECT_TRUE(copies_equal(dist.adam_m, k)) << what;
    EXPECT_TRUE(copies_equal(dist.adam_v, k)) << what;
    // Every mode sums the same numbers: bitwise the same training.
    if (block_params.empty()) {
      block_params = dist.params;
    } else {
      EXPECT_EQ(dist.params, block_params) << what;
    }
  }
}

TEST(TiedEquivalence, ResumeUnderAnotherPlan) {
  // 3 steps under the three pipelines, 3 under one pipeline of two tp-2 stages, 2 in one
  // process: the losses of uninterrupted single-process training.
  const fs::path dir = test::temp_dir("tied_resume");
  const Plan first = three_pipelines();
  const Plan second =
      test::make_plan(tied_model(), kSeq, {{4, 8, {stage(0, 2, 2), stage(3, 4, 2)}}});
  const TrainConfig c = config(first, dir, 8);
  const test::RunResult single = test::run_single(c, 8);
  test::DistRun save;
  save.save_dir = dir / "a";
  const test::RunResult a = test::run_plan(c, first, 3, save);
  test::DistRun mid;
  mid.resume = checkpoint_path(dir / "a", 3);
  mid.save_dir = dir / "b";
  const test::RunResult b = test::run_plan(c, second, 3, mid);
  EXPECT_TRUE(copies_equal(b.params, copies(c.model)));
  Trainer one(c, checkpoint_path(dir / "b", 6));
  test::RunResult joined;
  for (const test::RunResult* part : {&a, &b}) {
    joined.losses.insert(joined.losses.end(), part->losses.begin(), part->losses.end());
    joined.norms.insert(joined.norms.end(), part->norms.begin(), part->norms.end());
  }
  while (!one.done()) {
    const StepStats s = one.step();
    joined.losses.push_back(s.loss);
    joined.norms.push_back(s.grad_norm);
  }
  const auto n = static_cast<std::size_t>(one.state().numel());
  joined.params.assign(one.state().params(), one.state().params() + n);
  expect_same_training(single, joined, "three pipelines -> tp 2 x 2 -> one process");
}

}  // namespace
}  // namespace eth::tied_equivalence_test
