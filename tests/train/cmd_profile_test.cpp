// `eth profile --measure` as a user runs it (tiny model), on the CPU and on the host-emulated
// GPU: a profile folder with one file per micro-batch size, in ascending order whatever the
// order given, one progress line per size on stderr, the precision stated being the one
// recorded, and a profile `eth plan`, `eth validate` and `eth simulate` accept for a cluster of
// two such devices; bad sizes and flags a GPU cannot honour are refused by flag, and sizes too
// large for any machine by arithmetic, before any work.
#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/json_cursor.h"
#include "core/precision.h"
#include "eth_run.h"
#include "measure_test_util.h"
#include "profile/profile_io.h"
#include "train_test_util.h"

namespace eth::cmd_profile_test {
namespace {

namespace fs = std::filesystem;
using test::eth_cli;
using test::slurp;

// The same command on each device: the JSON states the device type and the precision the
// folder's files record, one file per size in ascending order, one progress line per size.
TEST(ProfileCli, ToolWritesAProfileThatPlanValidateAndSimulateAcceptOnEachDevice) {
  struct Device {
    const char* flag;
    const char* type;
    const char* where;    // in the progress lines
    const char* cluster;  // two devices of the type on one node (emulated is no preset type)
  };
  const Device devices[] = {
      {"", "cpu", "on this CPU",
       R"({"name": "cpu2", "nodes": [{"device_type": "cpu", "devices": 2}],
           "inter_node_bandwidth_gbps": 100})"},
      {" --device emulated", "emulated", "on device emulated",
       R"({"name": "emu2", "nodes": [{"device_type": "emulated", "devices": 2}],
           "inter_node_bandwidth_gbps": 100, "device_types": {"emulated": {"tflops": 1,
           "memory_gb": 4, "intra_node_bandwidth_gbps": 20}}})"},
  };
  for (const Device& d : devices) {
    SCOPED_TRACE(d.type);
    const fs::path dir = test::temp_dir(std::string("measure_cli_") + d.type);
    const fs::path prof = dir / "prof", out = dir / "eth.stdout", err = dir / "eth.stderr";
    ASSERT_EQ(eth_cli(std::string("profile --measure") + d.flag +
                          " --model tiny --micro-batch-sizes 2,1 --seq 32 --repeats 1"
                          " --format json --out " +
                          prof.string(),
                      dir)
                  .code,
              0)
        << slurp(err);
    const Json j = Json::parse(slurp(out));
    EXPECT_EQ(j["device_type"], d.type);
    EXPECT_EQ(j["files"], 2);
    ASSERT_EQ(j["entries"].size(), 2u);
    EXPECT_EQ(j["entries"][0]["mbs"], 1);  // ascending, whatever the order given
    EXPECT_GT(j["entries"][1]["tokens_per_s"].get<double>(), 0.0);
    const std::string type = d.type;
    EXPECT_TRUE(fs::exists(prof / (type + "_tp1_mbs1.json")));
    EXPECT_TRUE(fs::exists(prof / (type + "_tp1_mbs2.json")));
    // One progress line per size, on stderr, naming where it measured.
    const std::string progress = slurp(err);
    EXPECT_NE(progress.find("mbs 1 (1/2"), std::string::npos) << progress;
    EXPECT_NE(progress.find("mbs 2 (2/2"), std::string::npos) << progress;
    EXPECT_NE(progress.find(d.where), std::string::npos) << progress;
    // The precision stated is the one the files record: bf16 on a GPU; on the CPU bf16 where
    // it has bf16 matrix instructions, else fp32.
    const std::optional<Precision> stated = parse_precision(j["precision"].get<std::string>());
    ASSERT_TRUE(stated.has_value()) << j["precision"];
    if (type == "emulated") {
      EXPECT_EQ(*stated, Precision::Bf16);
    }
    const ProfileDb db = read_profile_dir(prof, load_model("tiny"));
    EXPECT_EQ(db.lookup(type, 1, 2).entry.precision, *stated);

    const fs::path cluster = dir / (type + "2.json");
    std::ofstream(cluster) << d.cluster;
    test::expect_measured_profile_plans(dir, cluster, prof, /*validate=*/true);
  }
}

TEST(ProfileCli, ToolRefusesBadFlagsBeforeWork) {
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
  // A GPU is no CPU: fp32 and neighbours there are refused by flag, nothing written.
  EXPECT_EQ(eth_cli("profile --measure --device emulated --precision fp32 --model tiny --out " +
                        (dir / "never").string(),
                    dir)
                .code,
            2);
  EXPECT_NE(slurp(err).find("--precision"), std::string::npos) << slurp(err);
  EXPECT_EQ(eth_cli("profile --measure --device emulated --optimizer-neighbours 1 --model tiny "
                    "--out " +
                        (dir / "never").string(),
                    dir)
                .code,
            1);
  EXPECT_NE(slurp(err).find("--optimizer-neighbours"), std::string::npos) << slurp(err);
  EXPECT_FALSE(fs::exists(dir / "never"));
}

}  // namespace
}  // namespace eth::cmd_profile_test
