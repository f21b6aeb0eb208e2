// compute_stage_costs on the hand-made fixture: times, transfer, activation and static memory,
// optimizer share and the dp share rule, each derived by hand in the test.
#include "cost/stage_costs.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "cost/fixture.h"

namespace eth {
namespace {

constexpr double kLat = 0.01;  // p2p latency passed explicitly below
constexpr double kTol = 1e-9;

TEST(StageCosts, ParameterTableMatchesTheHandCount) {
  const ModelSpec m = test::tiny_model();
  EXPECT_EQ(unit_params(m, 0), test::kEmbParams);
  EXPECT_EQ(unit_params(m, 1), test::kBlockParams);
  EXPECT_EQ(unit_params(m, 5), test::kHeadParams);
  EXPECT_EQ(total_params(m), test::kTotalParams);
}

TEST(StageCosts, FastPipelineFullAndLastMicrobatch) {
  const Plan plan = test::asymmetric_plan();
  const auto costs = compute_stage_costs(plan, test::tiny_cluster(), test::tiny_profile(), kLat);
  ASSERT_EQ(costs.size(), 2u);
  const PipelineCosts& a = costs[0];
  ASSERT_EQ(a.full.size(), 2u);
  // Stage 0 = units 0..2 at mbs 2 (scale 1): F = 0.1 + 1 + 1, B = 2F.
  EXPECT_EQ(a.full[0].share_mbs, 2);
  EXPECT_NEAR(a.full[0].forward_ms, 2.1, kTol);
  EXPECT_NEAR(a.full[0].backward_ms, 4.2, kTol);
  ASSERT_EQ(a.full[0].unit_backward_ms.size(), 3u);
  EXPECT_NEAR(a.full[0].unit_backward_ms[0], 0.2, kTol);
  EXPECT_NEAR(a.full[0].unit_backward_ms[2], 2.0, kTol);
  ASSERT_EQ(a.full[0].unit_forward_ms.size(), 3u);
  EXPECT_NEAR(a.full[0].unit_forward_ms[1], 1.0, kTol);
  // Message: mbs * T * C * 2 = 2 * 4 * 8 * 2 = 128 bytes at 128000 B/s = 1 ms, plus latency.
  EXPECT_NEAR(a.full[0].send_bytes, 128.0, kTol);
  EXPECT_NEAR(a.full[0].send_ms, 1.0 + kLat, kTol);
  // Activations held: embedding 200 + two blocks (1000 + 500) each.
  EXPECT_NEAR(a.full[0].activation_bytes, 200 + 2 * 1500, kTol);
  // The last micro-batch holds B - (k-1) m = 5 - 2*2 = 1 sample: half of everything.
  EXPECT_EQ(a.last[0].share_mbs, 1);
  EXPECT_NEAR(a.last[0].forward_ms, 1.05, kTol);
  EXPECT_NEAR(a.last[0].backward_ms, 2.1, kTol);
  EXPECT_NEAR(a.last[0].send_ms, 0.5 + kLat, kTol);
  // The last stage sends nothing.
  EXPECT_EQ(a.full[1].send_ms, 0.0);
  EXPECT_EQ(a.full[1].send_bytes, 0.0);
}

TEST(StageCosts, RecomputeAddsTimeAndDropsActivations) {
  const Plan plan = test::asymmetric_plan();
  const auto costs = compute_stage_costs(plan, test::tiny_cluster(), test::tiny_profile(), kLat);
  const StageCost& mid = costs[1].full[1];  // slow, units 2..3, recomputes mlp_act
  EXPECT_NEAR(mid.forward_ms, 2.0, kTol);
  EXPECT_NEAR(mid.backward_ms, 2 * (2.0 + 0.3), kTol);
  EXPECT_NEAR(mid.unit_backward_ms[0], 2.3, kTol);
  EXPECT_NEAR(mid.activation_bytes, 2 * 1000.0, kTol);  // mlp_act's 500 per block dropped
  // 1 sample: 64 bytes at 64000 B/s = 1 ms.
  EXPECT_NEAR(mid.send_ms, 1.0 + kLat, kTol);
}

// The runtime's workspace buffers (train/stage_compute.cpp) for the tiny model at 2 samples:
// N = 2 x 4 = 8 rows, C = 8, F = 32, A = 8, NH = 2, T = 4, 2-byte elements. A range with blocks
// holds the attention and MLP outputs and the residual's gradient (3 N C), the MLP, qkv and
// score gradients (N F + 3 N A + B NH T^2), a branch and a layer-norm gradient (2 N C) and, with
// several units, two residual gradients (2 N C).
constexpr double kBlockRangeWorkspace =
    2 * (3 * 8 * 8 + 8 * 32 + 3 * 8 * 8 + 2 * 2 * 4 * 4 + 2 * 8 * 8 + 2 * 8 * 8);  // 1920

TEST(StageCosts, StaticMemoryIsSixteenBytesPerParameterPlusWorkspace) {
  const Plan plan = test::asymmetric_plan();
  const auto costs = compute_stage_costs(plan, test::tiny_cluster(), test::tiny_profile(), kLat);
  const StageStaticMemory& m = costs[0].memory[0];  // units 0..2
  const double params = test::kEmbParams + 2 * test::kBlockParams;  // 1904
  EXPECT_NEAR(m.weight_bytes, 2 * params, kTol);
  EXPECT_NEAR(m.gradient_bytes, 2 * params, kTol);
  EXPECT_NEAR(m.optimizer_bytes, 12 * params, kTol);
  EXPECT_NEAR(m.workspace_bytes, kBlockRangeWorkspace, kTol);  // nothing recomputed: no copies
  EXPECT_EQ(m.baseline_bytes, 0.0);  // the hand-made profile records none
  // Messages of 2 samples x 64 bytes: the output gradient received, the 2 activations in flight
  // sent (1F1B, S = 2, k = 3: stage 0 holds 2).
  EXPECT_NEAR(m.message_bytes, 3 * 128.0, kTol);
  EXPECT_EQ(m.collective_bytes, 0.0);  // 16-bit GPU training reduces in place
  EXPECT_NEAR(m.total(), 16 * params + kBlockRangeWorkspace + 3 * 128.0, kTol);
}

TEST(StageCosts, WorkspaceKeepsOneCopyOfWhatIsRecomputedPerUnitKind) {
  Plan plan = test::asymmetric_plan();
  PipelinePlan p;
  p.micro_batch_size = 2;
  p.local_batch = 2;
  p.stages = {test::stage("fast", {0}, 0, 5)};
  p.stages[0].recompute.add(RecomputeOp::Unit);
  plan.pipelines = {p};
  plan.gbs = 2;
  ProfileDb profile = test::tiny_profile();
  const auto costs = compute_stage_costs(plan, test::tiny_cluster(), profile, kLat);
  // Full recompute keeps only unit inputs (100 each) in the slot; the workspace keeps one copy
  // of the rest of one unit per kind, shared by the 4 blocks: embedding 200 - 100, block
  // 1500 - 100, head 200 - 100.
  EXPECT_NEAR(costs[0].full[0].activation_bytes, 6 * 100.0, kTol);
  EXPECT_NEAR(costs[0].memory[0].workspace_bytes, kBlockRangeWorkspace + 100 + 1400 + 100, kTol);
  // The process baseline a measured profile records is charged once per device.
  ProfileEntry e = profile.lookup("fast", 1, 2).entry;
  e.process_baseline_bytes = 3e7;
  profile.add(e);
  const auto with_baseline = compute_stage_costs(plan, test::tiny_cluster(), profile, kLat);
  EXPECT_EQ(with_baseline[0].memory[0].baseline_bytes, 3e7);
  EXPECT_NEAR(with_baseline[0].memory[0].total(), costs[0].memory[0].total() + 3e7, 1e-6);
}

TEST(StageCosts, WorkspaceBoundOfEachUnitCoversEveryRange) {
  // unit_workspace_bound_bytes' maximum over a range against the range's own figure: at least
  // it, at most 2 N C R (one unit) + 3 N x 4 (tp > 1 without the head) above it.
  const ModelSpec m = test::tiny_model();
  for (Precision p : {Precision::Fp32, Precision::Bf16, Precision::Mixed16}) {
    for (std::int64_t tp : {1, 2}) {
      for (bool dropout : {false, true}) {
        const std::int64_t mbs = 3, T = 4;
        const double N = static_cast<double>(mbs * T);
        const double slack = 2 * N * 8 * precision_bytes(p).activation + 3 * N * 4;
        for (std::int64_t i = 0; i < m.num_units(); ++i) {
          for (std::int64_t j = i; j < m.num_units(); ++j) {
            double bound = 0;
            for (std::int64_t u = i; u <= j; ++u) {
              bound = std::max(bound, unit_workspace_bound_bytes(m, u, mbs, T, tp, p, dropout));
            }
            const double exact =
                transient_workspace_bytes(m, unit_mix(m, i, j), mbs, T, tp, p, dropout);
            EXPECT_GE(bound, exact) << i << ".." << j;
            EXPECT_LE(bound, exact + slack) << i << ".." << j;
          }
        }
      }
    }
  }
}

TEST(StageCosts, OptimizerIsTheStageShareOrTheBandwidthFallback) {
  const Plan plan = test::asymmetric_plan();
  const auto costs = compute_stage_costs(plan, test::tiny_cluster(), test::tiny_profile(), kLat);
  // fast: 3.792 ms for 3792 parameters, the stage holds 1904 of them.
  EXPECT_NEAR(costs[0].optimizer_ms[0], 3.792 * 1904 / 3792, kTol);
  // slow gives no figure: 16 B/param over kOptimizerBytesPerS.
  const double params = test::kEmbParams + test::kBlockParams;
  EXPECT_NEAR(costs[1].optimizer_ms[0], 16 * params / kOptimizerBytesPerS * 1e3, 1e-15);
}

TEST(StageCosts, DataParallelStagePricesTheLargestShare) {
  Plan plan = test::asymmetric_plan();
  PipelinePlan p;
  p.micro_batch_size = 3;
  p.local_batch = 3;
  p.stages = {test::stage("fast", {0, 1}, 0, 5, 1, 2)};
  plan.pipelines = {p};
  plan.gbs = 3;
  const auto costs = compute_stage_costs(plan, test::tiny_cluster(), test::tiny_profile(), kLat);
  // ceil(3 / 2) = 2 samples on the busier replica: the whole model at fast mbs 2.
  EXPECT_EQ(costs[0].full[0].share_mbs, 2);
  EXPECT_NEAR(costs[0].full[0].forward_ms, 0.1 + 4 * 1.0 + 0.5, kTol);
}

TEST(StageCosts, ActivationsToADataParallelStageCrossTheLinkOfEachPair) {
  // Two nodes of two "fast" devices; a sample's message (64 bytes) takes 0.5 ms inside a node
  // (128000 B/s) and 2 ms between nodes (32000 B/s).
  ClusterSpec c = test::tiny_cluster();
  c.nodes = {{"fast", 2}, {"fast", 2}};
  c.inter_node_bandwidth_gbps = 0.000256;
  Plan plan = test::asymmetric_plan();
  PipelinePlan p;
  p.micro_batch_size = 2;
  p.local_batch = 2;
  // Device 0 (node 0) sends sample 0 to device 1 (node 0) and sample 1 to device 2 (node 1).
  p.stages = {test::stage("fast", {0}, 0, 2), test::stage("fast", {1, 2}, 3, 5, 1, 2)};
  plan.pipelines = {p};
  plan.gbs = 2;
  auto costs = compute_stage_costs(plan, c, test::tiny_profile(), kLat);
  // The sender's two messages go one after the other: 0.5 + 2 ms, not one intra-node message.
  EXPECT_NEAR(costs[0].full[0].send_ms, 0.5 + 2.0 + 2 * kLat, kTol);
  EXPECT_NEAR(costs[0].full[0].send_bytes, 128.0, kTol);

  // dp 2 -> dp 3 inside node 0 and 1 at mbs 3: chunks {0}, {1, 2} -> {0}, {1}, {2}; replica 1
  // sends two one-sample messages: 2 x 0.5 ms.
  c.nodes = {{"fast", 5}};
  p.micro_batch_size = 3;
  p.local_batch = 3;
  p.stages = {test::stage("fast", {0, 1}, 0, 2, 1, 2), test::stage("fast", {2, 3, 4}, 3, 5, 1, 3)};
  plan.pipelines = {p};
  plan.gbs = 3;
  costs = compute_stage_costs(plan, c, test::tiny_profile(), kLat);
  EXPECT_NEAR(costs[0].full[0].send_ms, 2 * (0.5 + kLat), kTol);

  // tp 2 on node 1 after tp 1 on node 0 at mbs 2: both tp ranks receive the whole micro-batch
  // (128 bytes, 4 ms between nodes) from device 0, one message after the other.
  c.nodes = {{"fast", 2}, {"fast", 2}};
  ProfileDb profile = test::tiny_profile();
  ProfileEntry tp2 = test::tiny_entry(test::tiny_model(), "fast", 2, 1.0);
  tp2.key.tp = 2;
  profile.add(tp2);
  p.micro_batch_size = 2;
  p.local_batch = 2;
  p.stages = {test::stage("fast", {0}, 0, 2), test::stage("fast", {2, 3}, 3, 5, 2, 1)};
  plan.pipelines = {p};
  plan.gbs = 2;
  costs = compute_stage_costs(plan, c, profile, kLat);
  EXPECT_NEAR(costs[0].full[0].send_ms, 2 * (4.0 + kLat), kTol);
}

TEST(StageCosts, MissingProfileEntryThrowsNamingTheKey) {
  Plan plan = test::asymmetric_plan();
  plan.pipelines[0].stages[0].tp = 2;
  plan.pipelines[0].stages[0].devices = {0, 1};
  plan.pipelines[0].stages[1].devices = {2};
  try {
    compute_stage_costs(plan, test::tiny_cluster(), test::tiny_profile(), kLat);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("fast"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace eth
