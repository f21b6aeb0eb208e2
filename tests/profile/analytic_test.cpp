// The analytic profile against hand counts: a block's forward time is its matmul FLOPs over
// peak x efficiency (the curve of docs/profile.md written out here), backward twice that, tp
// adds ring all-reduces, recompute and optimizer times follow their stated byte/FLOP counts.
#include "profile/analytic.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "model/arithmetic.h"

namespace eth {
namespace {

// gpt3-350m: 24 layers, hidden 1024, 16 heads, FFN 4096, sequence 2048, vocabulary 51200.
class AnalyticTest : public ::testing::Test {
 protected:
  ModelSpec m = model_preset("gpt3-350m");
  DeviceType a100 = *find_device_type_preset("A100");  // 312 TFLOPS, 1536 Gbps intra-node
  const double C = 1024, F = 4096, T = 2048, H = 16, peak = 312e12;
};

TEST_F(AnalyticTest, BlockForwardIsFlopsOverPeakTimesEfficiency) {
  const ProfileEntry e = analytic_profile(m, a100, /*tp=*/1, /*mbs=*/4, 2048);
  const double tokens = 4 * T;
  // qkv 3C x C, proj C x C, fc F x C, fcproj C x F at 2 FLOPs per multiply-add, plus QK^T and
  // score x V at 2 * T * C each per token.
  const double flops = 2 * tokens * (3 * C * C + C * C + F * C + C * F) + 2 * 2 * tokens * T * C;
  // eff = 0.55 * tokens / (tokens + 512), no tp penalty at tp 1.
  const double eff = 0.55 * tokens / (tokens + 512);
  const double want_ms = flops / (peak * eff) * 1e3;
  EXPECT_NEAR(e.units[1].forward_ms, want_ms, 1e-9 * want_ms);
  EXPECT_NEAR(e.units[1].backward_ms, 2 * want_ms, 2e-9 * want_ms);
  // Every block is the same.
  EXPECT_EQ(e.units[1], e.units[24]);
  // QKV recompute is the 3C x C matmul alone.
  const double qkv_ms = 2 * tokens * 3 * C * C / (peak * eff) * 1e3;
  EXPECT_NEAR(e.units[1].recompute_ms[static_cast<std::size_t>(RecomputeOp::Qkv)], qkv_ms,
              1e-9 * qkv_ms);
  EXPECT_DOUBLE_EQ(e.units[1].recompute_ms[static_cast<std::size_t>(RecomputeOp::Unit)],
                   e.units[1].forward_ms);
}

TEST_F(AnalyticTest, TensorParallelAddsRingAllReduces) {
  const ProfileEntry e = analytic_profile(m, a100, /*tp=*/2, /*mbs=*/1, 2048);
  const double tokens = T;
  const double flops = 2 * tokens * (4 * C * C + 2 * C * F) + 4 * tokens * T * C;
  const double eff = 0.55 * tokens / (tokens + 512) / (1 + 0.03 * (2 - 1));
  const double compute_ms = flops / 2 / (peak * eff) * 1e3;
  // Two all-reduces of the 16-bit s*b*h output per direction, ring factor 2(t-1)/t = 1 at t = 2,
  // over 1536 Gbps = 192e9 bytes/s.
  const double allreduce_ms = 1.0 * (2 * T * C) / 192e9 * 1e3;
  EXPECT_NEAR(e.units[1].forward_ms, compute_ms + 2 * allreduce_ms, 1e-9 * compute_ms);
  EXPECT_NEAR(e.units[1].backward_ms, 2 * compute_ms + 2 * allreduce_ms, 1e-9 * compute_ms);
  // Parameters are those one tp rank holds.
  EXPECT_EQ(e.units[1].params, unit_params(m, 1, 2));
}

TEST_F(AnalyticTest, ActivationsFollowTheStandardFormula) {
  for (std::int64_t tp : {1, 2, 4}) {
    const ProfileEntry e = analytic_profile(m, a100, tp, 2, 2048);
    const double t = static_cast<double>(tp), sbh = T * 2 * C;
    // s*b*h*(10 + 24/t + 5*a*s/(h*t)) bytes per block (Korthikanti et al.).
    const double want = sbh * (10 + 24 / t + 5 * H * T / (C * t));
    EXPECT_DOUBLE_EQ(e.units[1].activation.total(), want) << "tp " << tp;
  }
}

TEST_F(AnalyticTest, ElementwiseRecomputeAndOptimizerAreMemoryTraffic) {
  const ProfileEntry e = analytic_profile(m, a100, 1, 1, 2048);
  const double bw = peak / 200;  // bytes/s: the machine balance of docs/profile.md
  const double sbh = T * C, as2b = H * T * T;
  auto rc = [&](RecomputeOp op) { return e.units[1].recompute_ms[static_cast<std::size_t>(op)]; };
  EXPECT_DOUBLE_EQ(rc(RecomputeOp::MlpAct), 16 * sbh / bw * 1e3);     // read + write 4h x 2 B
  EXPECT_DOUBLE_EQ(rc(RecomputeOp::AttnDropout), as2b / bw * 1e3);    // write the 1-byte mask
  EXPECT_DOUBLE_EQ(rc(RecomputeOp::AttnScore), 5 * as2b / bw * 1e3);  // 2 + 1 read, 2 written
  // Adam: 28 bytes per parameter at memory speed.
  EXPECT_NEAR(e.optimizer_ms, 28.0 * static_cast<double>(total_params(m)) / bw * 1e3, 1e-9);
}

TEST_F(AnalyticTest, EfficiencyGrowsWithBatchAndFallsWithTp) {
  EXPECT_LT(analytic_efficiency(1, 2048, 1), analytic_efficiency(8, 2048, 1));
  EXPECT_GT(analytic_efficiency(8, 2048, 1), analytic_efficiency(8, 2048, 8));
  EXPECT_LT(analytic_efficiency(1 << 20, 2048, 1), 0.55);
  // Bigger batches never cost less time per micro-batch, and cost less per sample.
  const ProfileEntry e1 = analytic_profile(m, a100, 1, 1, 2048);
  const ProfileEntry e8 = analytic_profile(m, a100, 1, 8, 2048);
  EXPECT_GT(e8.units[1].forward_ms, e1.units[1].forward_ms);
  EXPECT_LT(e8.units[1].forward_ms / 8, e1.units[1].forward_ms);
}

TEST_F(AnalyticTest, RefusesTpThatDoesNotSplitTheModel) {
  try {
    analytic_profile(m, a100, 3, 1, 2048);
    FAIL() << "tp 3 does not divide 16 heads";
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "tp");
  }
  EXPECT_THROW(analytic_profile(m, a100, 1, 0, 2048), InputError);
  EXPECT_THROW(analytic_profile(m, a100, 1, 1, 4096), InputError);  // beyond the model's seq
}

TEST_F(AnalyticTest, DatabaseCoversEveryDeviceTypeOfTheCluster) {
  const ClusterSpec c = load_cluster("350m-a100-rtx3090");
  const ProfileDb db = analytic_profile_db(m, c, {1, 2}, {1, 4}, 2048);
  EXPECT_EQ(db.entries().size(), c.device_types.size() * 2 * 2);
  for (const auto& [name, type] : c.device_types) EXPECT_TRUE(db.has_device_tp(name, 2));
}

}  // namespace
}  // namespace eth
