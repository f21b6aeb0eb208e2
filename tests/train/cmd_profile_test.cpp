// `eth profile --measure` as a user runs it (tiny model): a profile folder with one file per
// micro-batch size, in ascending order whatever the order given, one progress line per size on
// stderr, and a profile `eth plan` / `eth simulate` accept for a cluster of `cpu` devices; bad
// sizes are refused by flag, and sizes too large for any machine by arithmetic, before any work.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/json_cursor.h"
#include "eth_run.h"
#include "measure_test_util.h"
#include "train_test_util.h"

namespace eth::cmd_profile_test {
namespace {

namespace fs = std::filesystem;
using test::eth_cli;
using test::slurp;

TEST(ProfileCli, ToolWritesAProfileThatPlanAndSimulateAccept) {
  const fs::path dir = test::temp_dir("measure_cli");
  const fs::path prof = dir / "prof", out = dir / "eth.stdout", err = dir / "eth.stderr";
  ASSERT_EQ(eth_cli("profile --measure --model tiny --micro-batch-sizes 2,1 --seq 32 --repeats 1"
                    " --format json --out " +
                        prof.string(),
                    dir)
                .code,
            0)
      << slurp(err);
  const Json j = Json::parse(slurp(out));
  EXPECT_EQ(j["files"], 2);
  ASSERT_EQ(j["entries"].size(), 2u);
  EXPECT_EQ(j["entries"][0]["mbs"], 1);  // ascending, whatever the order given
  EXPECT_GT(j["entries"][1]["tokens_per_s"].get<double>(), 0.0);
  // One progress line per size, on stderr.
  const std::string progress = slurp(err);
  EXPECT_NE(progress.find("mbs 1 (1/2"), std::string::npos) << progress;
  EXPECT_NE(progress.find("mbs 2 (2/2"), std::string::npos) << progress;

  // A two-core machine as two `cpu` devices (there is no cpu cluster preset).
  const fs::path cluster = dir / "cpu2.json";
  std::ofstream(cluster) << R"({"name": "cpu2", "nodes": [{"device_type": "cpu", "devices": 2}],
                               "inter_node_bandwidth_gbps": 100})";
  test::expect_measured_profile_plans(dir, cluster, prof, /*validate=*/false);
}

TEST(ProfileCli, ToolRefusesBadSizesByFlagBeforeWork) {
  const fs::path dir = test::temp_dir("measure_bad");
  const fs::path out = dir / "eth.stdout", err = dir / "eth.stderr";
  for (const char* sizes : {"0,1", "1,1", "-2", "2,x"}) {
    const fs::path prof = dir / "never";
    const int rc = eth_cli(std::string("profile --measure --model tiny --micro-batch-sizes ") +
                               sizes + " --out " + prof.string(),
                           dir)
                       .code;
    EXPECT_NE(rc, 0) << sizes;
    EXPECT_NE(slurp(err).find("--micro-batch-sizes"), std::string::npos) << slurp(err);
    EXPECT_FALSE(fs::exists(prof)) << "work started for sizes " << sizes;
  }
  // Too large for any machine: refused by arithmetic, before a byte is allocated.
  EXPECT_EQ(eth_cli("profile --measure --model gpt2-small --micro-batch-sizes 1,60000 --out " +
                        (dir / "never").string(),
                    dir)
                .code,
            2);
  EXPECT_NE(slurp(err).find("60000"), std::string::npos) << slurp(err);
  EXPECT_FALSE(fs::exists(dir / "never"));
}

}  // namespace
}  // namespace eth::cmd_profile_test
