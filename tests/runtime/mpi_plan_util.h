// Helpers for the mpirun tests of one model under one plan file: write the model, plan and
// cluster files and a token file into a scratch folder, run single-process `eth train` and
// `eth launch --plan` on them with the same arguments, and read back the losses each logged.
// Test-only; the runs need the built tool (eth_run.h) and mpirun.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "eth_run.h"
#include "log_util.h"
#include "test_util.h"

namespace eth::test {

struct PlanRun {
  std::filesystem::path dir, model, plan, cluster, data;
};

// A scratch folder holding model.json, plan.json, a one-node cluster of `devices` cpus and
// 20,000 synthetic tokens below `vocab`.
inline PlanRun plan_run(const std::string& name, const std::string& model_json,
                        const std::string& plan_json, int devices, std::int64_t vocab) {
  PlanRun r;
  r.dir = std::filesystem::temp_directory_path() /
          ("eth_mpi_plan_" + std::to_string(::getpid())) / name;
  std::filesystem::remove_all(r.dir);
  std::filesystem::create_directories(r.dir);
  r.model = r.dir / "model.json";
  r.plan = r.dir / "plan.json";
  r.cluster = r.dir / "cluster.json";
  r.data = r.dir / "data.bin";
  std::ofstream(r.model) << model_json;
  std::ofstream(r.plan) << plan_json;
  std::ofstream(r.cluster) << R"({"nodes": [{"device_type": "cpu", "devices": )" << devices
                           << "}]}";
  const EthRun d = eth_cli(
      "data --synthetic 20000 --vocab " + std::to_string(vocab) + " --out " + r.data.string(),
      r.dir);
  if (d.code != 0) ADD_FAILURE() << d.err;
  return r;
}

// The training arguments both runs share; `extra` adds to them (say "--precision bf16"; fp32
// unless it names a precision).
inline std::string shared_train_args(const PlanRun& r, int steps, const std::string& extra) {
  const bool precision = extra.find("--precision") != std::string::npos;
  return "--data " + r.data.string() + " --steps " + std::to_string(steps) +
         " --dropout 0.1 --lr 1e-3 --print-every 0 " + (precision ? "" : "--precision fp32 ") +
         extra;
}

// Losses of single-process `eth train --model model.json` (log `single<tag>.jsonl`).
inline std::vector<double> one_process(const PlanRun& r, std::int64_t gbs, std::int64_t seq,
                                       int steps, const std::string& extra,
                                       const std::string& tag = "") {
  const std::filesystem::path log = r.dir / ("single" + tag + ".jsonl");
  const EthRun c = eth_cli("train --model " + r.model.string() + " --batch " + std::to_string(gbs) +
                               " --seq-len " + std::to_string(seq) + " " +
                               shared_train_args(r, steps, extra) + " --log " + log.string(),
                           r.dir);
  if (c.code != 0) ADD_FAILURE() << c.err;
  return log_losses(log);
}

// Losses of `eth launch --plan plan.json` under mpirun (log `<tag>.jsonl`); `launch_extra` goes
// to the ranks' `eth train` (say "--allreduce tensor").
inline std::vector<double> launched(const PlanRun& r, int steps, const std::string& extra,
                                    const std::string& tag) {
  const std::filesystem::path log = r.dir / (tag + ".jsonl");
  const EthRun c =
      eth_cli("launch --plan " + r.plan.string() + " -- --cluster " + r.cluster.string() + " " +
                  shared_train_args(r, steps, extra) + " --log " + log.string(),
              r.dir);
  if (c.code != 0) ADD_FAILURE() << tag << "\n" << c.err;
  return log_losses(log);
}

}  // namespace eth::test
