// Tied embeddings under mpirun: `eth launch --plan` of a tiny GPT with a tied LM head on two
// pipelines of unequal local batches (6 and 2): one with a tp-2 stage and the embedding and the
// head on different stages, one whose single rank holds both copies of the matrix. It trains 50
// steps in fp32 with the losses of single-process `eth train`, within 1e-5 relative at every
// step, in each aggregation mode. Four ranks, so the three launches stay seconds on 2 cores.
#include <gtest/gtest.h>

#include "mpi_plan_util.h"

namespace eth {
namespace {

// The tiny preset (4 blocks of 64, 4 heads, vocabulary 256) with its LM head tied to wte.
const char* kTiedTiny = R"({"name": "tiny-tied", "layers": 4, "hidden": 64, "heads": 4,
  "seq_len": 64, "vocab": 256, "tied_embeddings": true})";

// Pipeline A: units 0-2 at tp 2, 3-5 (the head, attention-score recompute) on one device;
// micro-batch 2 over 6 samples. Pipeline B: every unit on device 3, micro-batch 1 over 2 samples.
// The tied matrix's block: chunk c of lcm(2, 1, 1) = 2 on devices c, 2 and 3.
std::string tied_plan() {
  return std::string(R"({"format": "eth-plan", "version": 1, "model": )") + kTiedTiny +
         R"(, "gbs": 8, "seq_len": 16, "pipelines": [
  {"micro_batch_size": 2, "local_batch": 6, "stages": [
    {"device_type": "cpu", "devices": [0, 1], "tp": 2, "units": [0, 2]},
    {"device_type": "cpu", "devices": [2], "units": [3, 5], "recompute": ["attn_score"]}]},
  {"micro_batch_size": 1, "local_batch": 2, "stages": [
    {"device_type": "cpu", "devices": [3], "units": [0, 5]}]}]})";
}

TEST(TiedPlanCli, MpiRunOf50StepsMatchesOneProcessInEveryAggregationMode) {
  const test::PlanRun r = test::plan_run("tied", kTiedTiny, tied_plan(), 4, 256);
  constexpr int kSteps = 50;
  const std::vector<double> want = test::one_process(r, 8, 16, kSteps, "");
  ASSERT_EQ(want.size(), static_cast<std::size_t>(kSteps));
  EXPECT_LT(want.back(), want.front());  // it trains
  for (const char* mode : {"block", "tensor", "device"}) {
    const std::vector<double> got =
        test::launched(r, kSteps, std::string("--allreduce ") + mode, mode);
    ASSERT_EQ(got.size(), want.size()) << mode;
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_NEAR(got[i], want[i], 1e-5 * want[i]) << mode << " step " << i;
    }
  }
}

}  // namespace
}  // namespace eth
