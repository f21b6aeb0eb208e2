// llama-tiny under the distributed runtime (LocalWorld threads): an HPP plan of two pipelines
// (unequal local batches, a tp-2 stage over the 2 key/value heads, operator and full-unit
// recompute) trains like one process in every aggregation mode, untied and tied, with every
// replica bitwise equal; a checkpoint resumes under another plan (tp 2 in both stages of one
// pipeline), and then in one process. The mpirun runs are in llama_cli_test.cpp.
//
// Tolerances as in tp_equivalence_test.cpp (sizes of the same order, the same reasons).

#include <gtest/gtest.h>

#include <cstring>

#include "runtime_test_util.h"

namespace eth::llama_equivalence_test {
namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kSeq = 16;

ModelSpec llama_tiny(bool tied) {
  ModelSpec m = model_preset("llama-tiny");  // units 0 (embedding), 1-2 (blocks), 3 (head)
  m.tied_embeddings = tied;
  return m;
}

test::StageSpec stage(std::int64_t first, std::int64_t last, std::int64_t tp = 1,
                      RecomputeSet rc = {}) {
  return test::StageSpec{first, last, 1, rc, tp};
}

// Pipeline 0: units 0-1 at tp 2 (attention and MLP recompute), 2-3 (mbs 2 over 6 samples);
// pipeline 1: every unit on one device under full-unit recompute (mbs 1 over 2).
Plan hpp_plan(bool tied) {
  RecomputeSet ops, unit;
  for (RecomputeOp op : {RecomputeOp::AttnScore, RecomputeOp::AttnSoftmax, RecomputeOp::MlpAct}) {
    ops.add(op);
  }
  unit.add(RecomputeOp::Unit);
  return test::make_plan(llama_tiny(tied), kSeq,
                         {{2, 6, {stage(0, 1, 2, ops), stage(2, 3)}},  //
                          {1, 2, {stage(0, 3, 1, unit)}}});
}

TrainConfig config(const Plan& plan, const fs::path& dir, std::int64_t steps) {
  return test::train_config(plan.model, test::synthetic_file(dir, 6000, plan.model.vocab),
                            plan.gbs, kSeq, steps);
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

TEST(LlamaEquivalence, HppPlanTrainsLikeOneDeviceInEveryAggregationModeTiedOrNot) {
  for (bool tied : {false, true}) {
    const std::string kind = tied ? "tied " : "";
    const fs::path dir = test::temp_dir(tied ? "llama_tied" : "llama_modes");
    const Plan plan = hpp_plan(tied);
    const std::int64_t steps = 12;
    const TrainConfig c = config(plan, dir, steps);
    const test::RunResult single = test::run_single(c, steps);
    for (AggregationMode mode :
         {AggregationMode::Block, AggregationMode::Tensor, AggregationMode::Device}) {
      test::DistRun opt;
      opt.mode = mode;
      const test::RunResult dist = test::run_plan(c, plan, steps, opt);
      expect_same_training(single, dist, kind + std::string(aggregation_mode_name(mode)));
    }
  }
}

TEST(LlamaEquivalence, ResumeUnderAnotherPlan) {
  // 4 steps under the HPP plan, 4 under one pipeline of two tp-2 stages, 2 in one process.
  const fs::path dir = test::temp_dir("llama_resume");
  const Plan first = hpp_plan(false);
  const Plan second =
      test::make_plan(llama_tiny(false), kSeq, {{4, 8, {stage(0, 1, 2), stage(2, 3, 2)}}});
  const TrainConfig c = config(first, dir, 10);
  const test::RunResult single = test::run_single(c, 10);
  test::DistRun save;
  save.save_dir = dir / "a";
  const test::RunResult a = test::run_plan(c, first, 4, save);
  test::DistRun mid;
  mid.resume = checkpoint_path(dir / "a", 4);
  mid.save_dir = dir / "b";
  const test::RunResult b = test::run_plan(c, second, 4, mid);
  Trainer one(c, checkpoint_path(dir / "b", 8));
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
  expect_same_training(single, joined, "HPP -> tp 2 x 2 -> one process");
}

}  // namespace
}  // namespace eth::llama_equivalence_test
