// `eth train --plan` and `eth launch` on the emulated GPU end to end: a heterogeneous plan of
// tiny (two pipelines of unequal local batches 6 and 2, a partial last micro-batch, tp 2 in one
// stage) under mpirun (every rank a process with its own emulated device, messages and
// collectives staged through explicit host copies) and on threads sharing one emulated device
// (device to device) trains for 20 steps like single-process `eth train --device emulated`, and
// the two backends agree bitwise; the three aggregation modes over MPI agree; fp32 on the device
// is refused naming --precision before any rank starts.
//
// Bounds: each loss within 2e-3 relative of the single process's (the plan reorders fp32 sums
// only: tests/runtime/emulated_dist_test.cpp says why). Threads and MPI bitwise: the same
// kernels on the same bytes, and every gradient block, tp group and replicated-tensor group of
// this plan has two ranks, where Open MPI's sum is rank 0's value plus rank 1's, LocalWorld's
// order (docs/comm.md, "What is bitwise").
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "eth_run.h"
#include "log_util.h"
#include "test_util.h"

namespace eth {
namespace {

namespace fs = std::filesystem;

constexpr double kLossTol = 2e-3;

// tiny (6 units) on 5 devices: pipeline A units 0-2 at tp 2 and 3-5 (recompute of full units),
// micro-batch 4 over 6 samples (4 + 2); pipeline B units 0-3 (attention recompute) and 4-5,
// micro-batch 1 over 2 samples.
const char* kPlan = R"({"format": "eth-plan", "version": 1, "model": "tiny", "gbs": 8,
  "seq_len": 16, "pipelines": [
  {"micro_batch_size": 4, "local_batch": 6, "stages": [
    {"device_type": "cpu", "devices": [0, 1], "tp": 2, "units": [0, 2]},
    {"device_type": "cpu", "devices": [2], "units": [3, 5], "recompute": ["unit"]}]},
  {"micro_batch_size": 1, "local_batch": 2, "stages": [
    {"device_type": "cpu", "devices": [3], "units": [0, 3], "recompute": ["attn_score"]},
    {"device_type": "cpu", "devices": [4], "units": [4, 5]}]}]})";

struct Fixture {
  fs::path dir, plan, cluster, data;
};

Fixture setup(const std::string& name) {
  Fixture f;
  f.dir = fs::temp_directory_path() / ("eth_emulated_cli_" + std::to_string(::getpid())) / name;
  fs::remove_all(f.dir);
  fs::create_directories(f.dir);
  f.plan = f.dir / "plan.json";
  f.cluster = f.dir / "cluster.json";
  f.data = f.dir / "data.bin";
  std::ofstream(f.plan) << kPlan;
  std::ofstream(f.cluster) << R"({"nodes": [{"device_type": "cpu", "devices": 5}]})";
  const test::EthRun r = test::eth_cli("data --synthetic 20000 --out " + f.data.string(), f.dir);
  EXPECT_EQ(r.code, 0) << r.err;
  return f;
}

std::string train_args(const Fixture& f, const fs::path& log, int steps) {
  return "--data " + f.data.string() + " --steps " + std::to_string(steps) +
         " --dropout 0.1 --lr 3e-3 --print-every 0 --log " + log.string();
}

TEST(EmulatedTrainPlanCli, MpiAndThreadsOnTheEmulatedDeviceTrainLikeOneProcessFor20Steps) {
  const Fixture f = setup("plan20");
  const int steps = 20;
  const test::EthRun single =
      test::eth_cli("train --device emulated --model tiny --batch 8 --seq-len 16 " +
                        train_args(f, f.dir / "single.jsonl", steps),
                    f.dir);
  ASSERT_EQ(single.code, 0) << single.err;
  const std::vector<double> want = test::log_losses(f.dir / "single.jsonl");
  ASSERT_EQ(want.size(), static_cast<std::size_t>(steps));

  const test::EthRun mpi =
      test::eth_cli("launch --device emulated --plan " + f.plan.string() + " -- --cluster " +
                        f.cluster.string() + " " + train_args(f, f.dir / "mpi.jsonl", steps),
                    f.dir);
  ASSERT_EQ(mpi.code, 0) << mpi.err;
  EXPECT_NE(mpi.err.find("on the emulated device"), std::string::npos) << mpi.err;
  const test::EthRun thr = test::eth_cli("train --device emulated --backend threads --plan " +
                                             f.plan.string() + " --cluster " + f.cluster.string() +
                                             " " + train_args(f, f.dir / "threads.jsonl", steps),
                                         f.dir);
  ASSERT_EQ(thr.code, 0) << thr.err;
  const std::vector<double> got_mpi = test::log_losses(f.dir / "mpi.jsonl");
  const std::vector<double> got_thr = test::log_losses(f.dir / "threads.jsonl");
  ASSERT_EQ(got_mpi.size(), want.size());
  double gap = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got_mpi[i], want[i], kLossTol * want[i]) << "step " << i;
    gap = std::max(gap, std::abs(got_mpi[i] - want[i]) / want[i]);
  }
  EXPECT_EQ(got_thr, got_mpi);  // bitwise (above)
  EXPECT_LT(want.back(), want.front());
  std::printf("20 steps: largest loss gap to one process %.3g relative\n", gap);
}

TEST(EmulatedTrainPlanCli, TensorAndDeviceWiseAggregationOverMpiOnTheEmulatedDevice) {
  // The other two modes through the host-staged communicator (device-wise zeroes its padding on
  // the device and all-reduces one buffer over all 5 ranks): tensor-wise sums the same two-rank
  // groups as block-wise, so bitwise; device-wise's 5-rank sum Open MPI may associate otherwise,
  // so within the one-process bound of every plan.
  const Fixture f = setup("modes");
  const int steps = 4;
  std::vector<double> by_mode[3];
  const char* modes[3] = {"block", "tensor", "device"};
  for (int m = 0; m < 3; ++m) {
    const fs::path log = f.dir / (std::string(modes[m]) + ".jsonl");
    const test::EthRun r = test::eth_cli(
        "launch --device emulated --plan " + f.plan.string() + " -- --cluster " +
            f.cluster.string() + " --allreduce " + modes[m] + " " + train_args(f, log, steps),
        f.dir);
    ASSERT_EQ(r.code, 0) << modes[m] << "\n" << r.err;
    by_mode[m] = test::log_losses(log);
    ASSERT_EQ(by_mode[m].size(), static_cast<std::size_t>(steps)) << modes[m];
  }
  EXPECT_EQ(by_mode[1], by_mode[0]);
  for (int i = 0; i < steps; ++i) {
    EXPECT_NEAR(by_mode[2][i], by_mode[0][i], kLossTol * by_mode[0][i]) << "step " << i;
  }
}

TEST(EmulatedTrainPlanCli, Fp32OnTheDeviceIsRefusedBeforeAnyRankStarts) {
  const Fixture f = setup("fp32");
  const fs::path ck = f.dir / "ck";
  for (const std::string& cmd :
       {"train --device emulated --precision fp32 --backend threads --plan " + f.plan.string() +
            " --cluster " + f.cluster.string() + " --checkpoint-dir " + ck.string() + " " +
            train_args(f, f.dir / "t.jsonl", 1),
        "launch --device emulated --plan " + f.plan.string() + " -- --precision fp32 --cluster " +
            f.cluster.string() + " --checkpoint-dir " + ck.string() + " " +
            train_args(f, f.dir / "m.jsonl", 1)}) {
    const test::EthRun r = test::eth_cli(cmd, f.dir);
    EXPECT_EQ(r.code, 2) << cmd << "\n" << r.err;
    EXPECT_NE(r.err.find("--precision"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("bf16 only"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(ck));
  }
}

}  // namespace
}  // namespace eth
