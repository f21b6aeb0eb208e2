// `eth launch ... -- --init-from CKPT --val-data F` under mpirun (4 ranks): the run of the
// threads backend, the same losses and validation losses. Label mpi: runs mpirun.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <vector>

#include "cli/cli_run.h"
#include "core/json_cursor.h"
#include "test_util.h"

namespace eth {
namespace {

namespace fs = std::filesystem;
const fs::path kData = fs::path(ETH_TEST_DATA_DIR) / "hf";

// The fixture's model (2 layers, hidden 32, 4 heads, 64 positions, vocabulary 300) on four cpu
// devices in two pipelines cut differently, a global batch of 4 windows of 32 (batch.bin's).
const char* kPlan = R"({"format": "eth-plan", "version": 1, "model": {"name": "gpt2-fixture",
  "layers": 2, "hidden": 32, "heads": 4, "seq_len": 64, "vocab": 300}, "gbs": 4, "seq_len": 32,
  "pipelines": [
  {"micro_batch_size": 1, "local_batch": 2, "stages": [
    {"device_type": "cpu", "devices": [0], "units": [0, 1]},
    {"device_type": "cpu", "devices": [1], "units": [2, 3]}]},
  {"micro_batch_size": 1, "local_batch": 2, "stages": [
    {"device_type": "cpu", "devices": [2], "units": [0, 2]},
    {"device_type": "cpu", "devices": [3], "units": [3, 3]}]}]})";

std::vector<Json> log_lines(const fs::path& path) {
  std::ifstream in(path);
  std::vector<Json> out;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(Json::parse(line));
  }
  return out;
}

struct Fixture {
  fs::path dir, ckpt, plan, cluster, batch;
};

Fixture setup(const std::string& name) {
  Fixture f;
  f.dir = test::scratch("finetune_cli", name);
  fs::remove_all(f.dir);
  fs::create_directories(f.dir);
  f.ckpt = f.dir / "gpt2.safetensors";
  f.plan = f.dir / "plan.json";
  f.cluster = f.dir / "cluster.json";
  f.batch = kData / "batch.bin";
  test::write(f.plan, kPlan);
  test::write(f.cluster, R"({"nodes": [{"device_type": "cpu", "devices": 4}]})");
  const auto r = test::eth_cli("convert --from-hf '" + (kData / "gpt2_f32").string() +
                                   "' --out '" + f.ckpt.string() + "'",
                               f.dir);
  EXPECT_EQ(r.code, 0) << r.err;
  return f;
}

// 20 steps from the converted weights, validating on the fixture batch (one batch of its 4
// windows: eth eval --seq-len 32 --batch 4) at the end; `extra` picks the mode.
std::string train_args(const Fixture& f, const std::string& extra, const std::string& out) {
  return "train --init-from '" + f.ckpt.string() + "' --data '" + f.batch.string() +
         "' --steps 20 --lr 1e-3 --precision fp32 --print-every 0 --val-data '" +
         f.batch.string() + "' --val-every 10 --val-batch 4 --checkpoint-dir '" +
         (f.dir / out).string() + "' --log '" + (f.dir / (out + ".jsonl")).string() + "' " +
         extra;
}

TEST(FinetuneMpi, LaunchFromConvertedGpt2LogsTheThreadsRunsLosses) {
  const Fixture f = setup("mpi");
  const std::string plan = "--plan '" + f.plan.string() + "'";
  auto r = test::eth_cli(train_args(f, plan + " --cluster '" + f.cluster.string() +
                                           "' --backend threads",
                                    "threads"),
                         f.dir);
  ASSERT_EQ(r.code, 0) << r.err;
  std::string launch = train_args(f, "--cluster '" + f.cluster.string() + "' --threads 1", "mpi");
  launch.replace(0, 5, "launch " + plan + " --");  // "train" -> "launch --plan P --"
  r = test::eth_cli(launch, f.dir,
                    "export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<Json> a = log_lines(f.dir / "threads.jsonl");
  const std::vector<Json> b = log_lines(f.dir / "mpi.jsonl");
  ASSERT_EQ(a.size(), 20u);
  ASSERT_EQ(b.size(), a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(b[i]["loss"].get<double>(), a[i]["loss"].get<double>(),
                1e-6 * a[i]["loss"].get<double>())
        << "step " << i;
  }
  EXPECT_NEAR(b.back()["val_loss"].get<double>(), a.back()["val_loss"].get<double>(), 1e-6);
}

}  // namespace
}  // namespace eth
