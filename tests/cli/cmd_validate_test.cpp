// The built `eth` tool, run as a user would (eth_run.h): `eth validate` on the shipped example
// plans and on broken copies, its exit codes and JSON output.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "core/json_cursor.h"
#include "core/json_file.h"
#include "eth_run.h"

namespace eth::cmd_validate_test {
namespace {

const std::string kExamples = ETH_EXAMPLES_DIR;

std::string q(const std::string& path) { return "'" + path + "'"; }

class ValidateCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() /
        ("eth_cli_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) +
         "_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    tiny_ = Json::parse(read_text_file(kExamples + "/tiny-hpp.json", "test"));
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }

  // The tiny example with gbs off by one and a gap in pipeline 1 (unit 3 in no stage).
  std::string broken_tiny() {
    Json j = tiny_;
    j["gbs"] = 17;
    j["pipelines"][1]["stages"][1]["units"] = Json::array({4, 5});
    return write("broken.json", j.dump(2));
  }

  std::filesystem::path dir_;
  Json tiny_;
};

TEST_F(ValidateCli, ExamplesAreValid) {
  const test::EthRun r13 = test::eth_cli("validate --plan " + q(kExamples + "/13b-hpp.json"));
  EXPECT_EQ(r13.code, 0) << r13.out_and_err();
  EXPECT_EQ(r13.out_and_err().rfind(
                "plan OK: 6 pipelines, 64 of 64 devices (cluster 13b-910b2-910b4)", 0),
            0u)
      << r13.out_and_err();
  const test::EthRun explicit_cluster = test::eth_cli(
      "validate --plan " + q(kExamples + "/13b-hpp.json") + " --cluster 13b-910b2-910b4");
  EXPECT_EQ(explicit_cluster.code, 0) << explicit_cluster.out_and_err();
  const test::EthRun tiny = test::eth_cli("validate --plan " + q(kExamples + "/tiny-hpp.json"));
  EXPECT_EQ(tiny.code, 0) << tiny.out_and_err();
  EXPECT_EQ(
      tiny.out_and_err().rfind("plan OK: 2 pipelines, 4 of 4 devices (cluster tiny-fast-slow)", 0),
      0u)
      << tiny.out_and_err();
}

TEST_F(ValidateCli, BrokenPlanPrintsEveryViolationAndExits2) {
  const std::string file = broken_tiny();
  const test::EthRun r = test::eth_cli("validate --plan " + q(file));
  EXPECT_EQ(r.code, 2) << r.out_and_err();
  const std::string expected =
      file + ": gbs: expected the sum of the pipelines' local_batch (11 + 5 = 16), got 17\n" +
      file +
      ": pipelines[1].stages[1].units: unit 3 is covered by no stage: stages[0] ends at unit 2 and "
      "stages[1] starts at unit 4\n"
      "plan INVALID: 2 violations (rules: docs/plan-format.md)\n";
  EXPECT_EQ(r.out_and_err(), expected);
}

TEST_F(ValidateCli, JsonOutputParses) {
  const test::EthRun ok =
      test::eth_cli("validate --format json --plan " + q(kExamples + "/tiny-hpp.json"));
  EXPECT_EQ(ok.code, 0) << ok.out_and_err();
  const Json good = Json::parse(ok.out);
  EXPECT_EQ(good.at("valid"), true);
  EXPECT_EQ(good.at("violations"), Json::array());
  EXPECT_EQ(good.at("devices"), 4);

  const std::string file = broken_tiny();
  const test::EthRun bad = test::eth_cli("validate --format json --plan " + q(file));
  EXPECT_EQ(bad.code, 2) << bad.out_and_err();
  const Json j = Json::parse(bad.out);
  EXPECT_EQ(j.at("valid"), false);
  ASSERT_EQ(j.at("violations").size(), 2u);
  EXPECT_EQ(j["violations"][0].at("path"), "gbs");
  EXPECT_EQ(j["violations"][1].at("path"), "pipelines[1].stages[1].units");
  EXPECT_EQ(
      j["violations"][1].at("message"),
      "unit 3 is covered by no stage: stages[0] ends at unit 2 and stages[1] starts at unit 4");
}

TEST_F(ValidateCli, UnreadablePlan) {
  const std::string file = write("cut.json", "{\"model\": \"tiny\", \"gbs\": ");
  const test::EthRun text = test::eth_cli("validate --plan " + q(file));
  EXPECT_EQ(text.code, 2) << text.out_and_err();
  EXPECT_EQ(text.out_and_err().rfind("error: [plan] " + file + ": invalid JSON at line 1", 0), 0u)
      << text.out_and_err();
  const test::EthRun json = test::eth_cli("validate --format json --plan " + q(file));
  EXPECT_EQ(json.code, 2) << json.out_and_err();
  const Json j = Json::parse(json.out);
  EXPECT_EQ(j.at("valid"), false);
  ASSERT_EQ(j.at("violations").size(), 1u);
  EXPECT_EQ(j["violations"][0].at("source"), file);
  EXPECT_EQ(j["violations"][0].at("message").get<std::string>().rfind("invalid JSON", 0), 0u);
}

TEST_F(ValidateCli, ClusterComesFromFlagOrPlan) {
  Json plan = tiny_;
  const Json cluster = plan["cluster"];
  plan.erase("cluster");
  const std::string plan_file = write("plan.json", plan.dump(2));
  const test::EthRun none = test::eth_cli("validate --plan " + q(plan_file));
  EXPECT_EQ(none.code, 2) << none.out_and_err();
  EXPECT_NE(none.out_and_err().find("--cluster: missing: the plan has no \"cluster\" field"),
            std::string::npos)
      << none.out_and_err();
  const std::string cluster_file = write("cluster.json", cluster.dump(2));
  const test::EthRun from_file =
      test::eth_cli("validate --plan " + q(plan_file) + " --cluster " + q(cluster_file));
  EXPECT_EQ(from_file.code, 0) << from_file.out_and_err();
  // --cluster wins over the plan's own field: the tiny plan does not fit the 13B cluster's types.
  const test::EthRun wrong = test::eth_cli("validate --plan " + q(kExamples + "/tiny-hpp.json") +
                                           " --cluster 13b-910b2-910b4");
  EXPECT_EQ(wrong.code, 2) << wrong.out_and_err();
  EXPECT_NE(
      wrong.out_and_err().find("pipelines[0].stages[0].device_type: unknown device type \"fast\""),
      std::string::npos)
      << wrong.out_and_err();
  const test::EthRun unknown =
      test::eth_cli("validate --plan " + q(plan_file) + " --cluster no-such-cluster");
  EXPECT_EQ(unknown.code, 2) << unknown.out_and_err();
  EXPECT_NE(unknown.out_and_err().find("unknown cluster preset \"no-such-cluster\""),
            std::string::npos);
}

TEST_F(ValidateCli, MissingPlanFlagIsAUsageError) {
  const test::EthRun r = test::eth_cli("validate");
  EXPECT_EQ(r.code, 1) << r.out_and_err();
  EXPECT_NE(r.out_and_err().find("--plan"), std::string::npos) << r.out_and_err();
}

}  // namespace
}  // namespace eth::cmd_validate_test
