// The fine-tuning CLI tests' shared set-up (finetune_cli_test.cpp, finetune_mpi_test.cpp): the
// converted transformers fixture, its plan and cluster, and the `eth train` arguments of a run.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/json_cursor.h"
#include "eth_run.h"
#include "hf_test_util.h"
#include "test_util.h"

namespace eth {
namespace {

namespace fs = std::filesystem;
const fs::path kData = test::hf_data();

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

inline std::vector<Json> log_lines(const fs::path& path) {
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

inline Fixture setup(const std::string& name) {
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
inline std::string train_args(const Fixture& f, const std::string& extra, const std::string& out) {
  return "train --init-from '" + f.ckpt.string() + "' --data '" + f.batch.string() +
         "' --steps 20 --lr 1e-3 --precision fp32 --print-every 0 --val-data '" +
         f.batch.string() + "' --val-every 10 --val-batch 4 --checkpoint-dir '" +
         (f.dir / out).string() + "' --log '" + (f.dir / (out + ".jsonl")).string() + "' " +
         extra;
}

}  // namespace
}  // namespace eth
