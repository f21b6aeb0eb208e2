// `eth simulate` end to end: a small two-pipeline plan through the built tool; the JSON report
// carries both iteration times, --trace and --svg write parseable files, bad flags exit 1 and a
// plan that breaks a rule exits 2 naming the field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/json_cursor.h"
#include "eth_run.h"
#include "test_util.h"

namespace eth::cmd_simulate_test {
namespace {

namespace fs = std::filesystem;

using test::slurp;

class CliSimulate : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("eth_sim_cli_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    // GPT-3 350M on 1 x 2 x 910B2 + 1 x 2 x 910B4: one two-stage pipeline per node.
    std::ofstream(dir_ / "plan.json") << R"({
      "format": "eth-plan", "version": 1, "model": "gpt3-350m", "gbs": 16, "seq_len": 2048,
      "schedule": "1f1b", "cluster": "350m-910b2-910b4",
      "pipelines": [
        {"micro_batch_size": 2, "local_batch": 9, "stages": [
          {"device_type": "910B2", "devices": [0], "tp": 1, "dp": 1,
           "units": [0, 12], "recompute": []},
          {"device_type": "910B2", "devices": [1], "tp": 1, "dp": 1,
           "units": [13, 25], "recompute": []}]},
        {"micro_batch_size": 1, "local_batch": 7, "stages": [
          {"device_type": "910B4", "devices": [2], "tp": 1, "dp": 1,
           "units": [0, 10], "recompute": []},
          {"device_type": "910B4", "devices": [3], "tp": 1, "dp": 1,
           "units": [11, 25], "recompute": []}]}]})";
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(CliSimulate, JsonReportCarriesBothIterationTimes) {
  const test::EthRun r =
      test::eth_cli("simulate --plan " + (dir_ / "plan.json").string() + " --format json");
  ASSERT_EQ(r.code, 0) << r.out_and_err();
  const Json j = Json::parse(r.out);
  const double pred = j.at("predicted").at("iteration_ms").get<double>();
  const double sim = j.at("simulated").at("iteration_ms").get<double>();
  EXPECT_GT(pred, 0);
  EXPECT_GT(sim, 0);
  // Both price the same work: the closed form and the simulation agree within a few percent.
  EXPECT_LT(std::abs(sim - pred) / pred, 0.05) << pred << " vs " << sim;
  EXPECT_EQ(j.at("simulated").at("devices").size(), 4u);
  EXPECT_EQ(j.at("simulated").at("pipeline_ms").size(), 2u);
}

TEST_F(CliSimulate, TextReportTraceAndSvg) {
  const fs::path trace = dir_ / "trace.json", svg = dir_ / "timeline.svg";
  const test::EthRun r =
      test::eth_cli("simulate --plan " + (dir_ / "plan.json").string() +
                    " --allreduce tensor --schedule gpipe --no-overlap --trace " + trace.string() +
                    " --svg " + svg.string());
  ASSERT_EQ(r.code, 0) << r.out_and_err();
  for (const char* s : {"pipeline 0: local batch 9, micro-batch 2 x 5 (last 1)",
                        "pipeline 1: local batch 7, micro-batch 1 x 7", "iteration time",
                        "predicted", "simulated", "capacity"}) {
    EXPECT_NE(r.out_and_err().find(s), std::string::npos) << s << "\n" << r.out_and_err();
  }
  const Json t = Json::parse(slurp(trace));
  std::size_t x = 0;
  for (const auto& e : t.at("traceEvents")) x += e.at("ph") == "X" ? 1 : 0;
  // GPipe, S = 2: per device and micro-batch F, B and one send + one receive... at least F and B.
  EXPECT_GE(x, 2u * (2 * 5 + 2 * 7));
  const std::string picture = slurp(svg);
  EXPECT_EQ(picture.rfind("<svg", 0), 0u);
  EXPECT_NE(picture.find("</svg>"), std::string::npos);
}

TEST_F(CliSimulate, BadInputExitCodes) {
  const std::string plan = (dir_ / "plan.json").string();
  EXPECT_EQ(test::eth_cli("simulate --plan " + plan + " --allreduce ring").code, 1);
  EXPECT_EQ(test::eth_cli("simulate --plan " + plan + " --schedule zb").code, 1);
  EXPECT_EQ(test::eth_cli("simulate --plan " + plan + " --profile x --analytic").code, 1);
  // gbs 16 but the batches sum to 17: a plan rule, exit 2, the field named.
  std::string text = slurp(plan);
  text.replace(text.find("\"local_batch\": 7"), 16, "\"local_batch\": 8");
  std::ofstream(dir_ / "bad.json") << text;
  const test::EthRun r = test::eth_cli("simulate --plan " + (dir_ / "bad.json").string());
  EXPECT_EQ(r.code, 2) << r.out_and_err();
  EXPECT_NE(r.out_and_err().find("local_batch"), std::string::npos) << r.out_and_err();
  EXPECT_EQ(test::eth_cli("simulate --plan " + (dir_ / "missing.json").string()).code, 2);
}

}  // namespace
}  // namespace eth::cmd_simulate_test
