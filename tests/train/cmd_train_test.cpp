// `eth data` and `eth train` end to end through the built binary: files made, one JSON log line
// per step with the documented keys, a checkpoint, and exit code 2 naming a damaged data file.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/json_cursor.h"
#include "core/json_file.h"
#include "data/token_file.h"
#include "eth_run.h"
#include "kernels/cpu/cpu_features.h"
#include "train_test_util.h"

namespace eth {
namespace {

namespace fs = std::filesystem;
using test::eth_cli;
using test::slurp;

TEST(Cli, DataThenTrainWritesLogAndCheckpoint) {
  const fs::path dir = test::temp_dir("cli");
  const fs::path data = dir / "succ.bin", log = dir / "log.jsonl", out = dir / "eth.stdout",
                 err = dir / "eth.stderr";
  ASSERT_EQ(eth_cli("data --synthetic 5000 --vocab 256 --out " + data.string(), dir).code, 0)
      << slurp(err);
  EXPECT_EQ(TokenFile::open(data).size(), 5000);
  ASSERT_EQ(eth_cli("train --model tiny --data " + data.string() +
                        " --steps 3 --batch 2 --micro-batch-size 1 --print-every 0 --format json"
                        " --log " +
                        log.string() + " --checkpoint-dir " + (dir / "ckpt").string(),
                    dir)
                .code,
            0)
      << slurp(err);
  const Json summary = Json::parse(slurp(out));
  EXPECT_EQ(summary["steps"], 3);
  EXPECT_TRUE(fs::exists(summary["checkpoint"].get<std::string>()));
  std::istringstream lines(slurp(log));
  int n = 0;
  for (std::string line; std::getline(lines, line); ++n) {
    const Json j = Json::parse(line);
    EXPECT_EQ(j["step"], n);
    for (const char* key : {"loss", "lr", "grad_norm", "tokens_per_s"}) {
      EXPECT_TRUE(j.contains(key) && j[key].is_number()) << key << " in " << line;
    }
  }
  EXPECT_EQ(n, 3);
}

TEST(Cli, DamagedDataIsRefusedWithExitCode2) {
  const fs::path dir = test::temp_dir("cli_bad");
  const fs::path data = dir / "bad.bin", out = dir / "eth.stdout", err = dir / "eth.stderr";
  std::ofstream(data) << "garbage, not a token file";
  EXPECT_EQ(eth_cli("train --model tiny --data " + data.string() + " --steps 1", dir).code, 2);
  EXPECT_NE(slurp(err).find(data.string()), std::string::npos) << slurp(err);
}

std::string first_line(const fs::path& f) {
  std::istringstream in(slurp(f));
  std::string line;
  std::getline(in, line);
  return line;
}

// --precision: said on the first line with the reason, recorded in the summary and in a measured
// profile; a plan run refuses a profile of another precision before any rank starts.
TEST(Cli, PrecisionIsSaidFirstRecordedAndAProfileOfAnotherIsRefused) {
  const fs::path dir = test::temp_dir("cli_precision");
  const fs::path data = dir / "succ.bin", out = dir / "eth.stdout", err = dir / "eth.stderr";
  ASSERT_EQ(eth_cli("data --synthetic 5000 --vocab 256 --out " + data.string(), dir).code, 0);
  const std::string train = "train --model tiny --data " + data.string() +
                            " --steps 2 --batch 2 --seq-len 16 --print-every 0 --format json";
  ASSERT_EQ(eth_cli(train + " --precision fp32", dir).code, 0) << slurp(err);
  EXPECT_EQ(first_line(err).rfind("precision fp32 (requested with --precision fp32", 0), 0u)
      << slurp(err);
  EXPECT_EQ(Json::parse(slurp(out))["precision"], "fp32");
  // The default names the CPU's verdict and extensions.
  const cpu::CpuFeatures& f = cpu::cpu_features();
  const std::string want(precision_name(cpu::default_precision(f)));
  ASSERT_EQ(eth_cli(train, dir).code, 0) << slurp(err);
  EXPECT_EQ(first_line(err).rfind("precision " + want + " (default: this CPU has", 0), 0u)
      << slurp(err);
  EXPECT_NE(first_line(err).find(f.extensions()), std::string::npos) << slurp(err);
  EXPECT_EQ(Json::parse(slurp(out))["precision"], want);
  EXPECT_EQ(eth_cli(train + " --precision fp16", dir).code, 1);

  const fs::path prof = dir / "prof", plan = dir / "plan.json", cluster = dir / "cpu2.json";
  ASSERT_EQ(eth_cli("profile --measure --model tiny --micro-batch-sizes 1 --seq 16 --repeats 1"
                    " --precision bf16 --out " +
                        prof.string(),
                    dir)
                .code,
            0)
      << slurp(err);
  EXPECT_EQ(first_line(err).rfind("precision bf16", 0), 0u) << slurp(err);
  EXPECT_EQ(read_json_file(prof / "cpu_tp1_mbs1.json", "test")["precision"], "bf16");
  std::ofstream(cluster) << R"({"name": "cpu2", "nodes": [{"device_type": "cpu", "devices": 2}],
                               "inter_node_bandwidth_gbps": 100})";
  ASSERT_EQ(
      eth_cli("plan --model tiny --cluster " + cluster.string() + " --profile " + prof.string() +
                  " --seq 16 --gbs 4 --tp 1 --micro-batch-sizes 1 --out " + plan.string(),
              dir)
          .code,
      0)
      << slurp(err);
  const std::string run = "train --plan " + plan.string() + " --cluster " + cluster.string() +
                          " --data " + data.string() + " --backend threads --steps 2 --profile " +
                          prof.string() + " --precision ";
  EXPECT_EQ(eth_cli(run + "fp32", dir).code, 2);
  EXPECT_NE(slurp(err).find("measured in bf16"), std::string::npos) << slurp(err);
  ASSERT_EQ(eth_cli(run + "bf16 --format json", dir).code, 0) << slurp(err);
  EXPECT_EQ(first_line(err).rfind("precision bf16", 0), 0u) << slurp(err);
  const Json j = Json::parse(slurp(out));
  EXPECT_EQ(j["precision"], "bf16");
  EXPECT_GT(j["predicted_iteration_ms"].get<double>(), 0);
}

}  // namespace
}  // namespace eth
