// `--device cuda` on `eth train`, `eth launch` and `eth profile --measure` is refused before any
// work with the reason in words: this build has no CUDA, this machine has no GPU (what the driver
// said), or (launch, profile --measure, on a GPU machine) that command on a GPU is not built yet.
// `--device emulated` trains (single-process, --plan and launch); profile --measure refuses it as
// not built yet, and fp32 on it is refused naming --precision. "Before any work": nothing the command
// would write exists afterwards, and the other inputs (missing files here) are never reached.
#include <gtest/gtest.h>

#include <filesystem>

#include "eth_run.h"
#include "kernels/cuda/runtime.h"
#include "test_util.h"

namespace eth {
namespace {

namespace fs = std::filesystem;

class DeviceCli : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::scratch("device_cli", "cuda"); }
  void TearDown() override { fs::remove_all(dir_); }

  // The refusal every command gives for cuda on this build and machine; `trains`: the command
  // (single-process eth train) runs on a GPU where there is one.
  void expect_refused(const test::EthRun& r, bool trains = false) {
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_EQ(r.out, "");
    if (trains && cuda::compiled() && cuda::device_count() > 0) {
      EXPECT_EQ(r.err.find("--device"), std::string::npos) << r.err;  // the missing data instead
      return;
    }
    EXPECT_NE(r.err.find("--device"), std::string::npos) << r.err;
    if (!cuda::compiled()) {
      EXPECT_NE(r.err.find("this build has no CUDA"), std::string::npos) << r.err;
    } else if (cuda::device_count() == 0) {
      EXPECT_NE(r.err.find("cuda cannot run here: " + cuda::unavailable_reason()),
                std::string::npos)
          << r.err;
    } else {
      EXPECT_NE(r.err.find("is not built yet"), std::string::npos) << r.err;
    }
  }
  fs::path dir_;
};

TEST_F(DeviceCli, TrainRefusesCudaBeforeReadingOrWriting) {
  const fs::path ck = dir_ / "ck";
  expect_refused(test::eth_cli("train --device cuda --model tiny --data '" +
                                   (dir_ / "missing.bin").string() + "' --checkpoint-dir '" +
                                   ck.string() + "' --steps 1",
                               dir_),
                 /*trains=*/true);
  EXPECT_FALSE(fs::exists(ck));
}

TEST_F(DeviceCli, EmulatedTrainsInBf16OnlyAndThePlanCommandsTakeIt) {
  const fs::path ck = dir_ / "ck";
  const test::EthRun fp32 = test::eth_cli(
      "train --device emulated --precision fp32 --model tiny --data '" +
          (dir_ / "missing.bin").string() + "' --checkpoint-dir '" + ck.string() + "'",
      dir_);
  EXPECT_EQ(fp32.code, 2) << fp32.err;
  EXPECT_NE(fp32.err.find("--precision"), std::string::npos) << fp32.err;
  EXPECT_NE(fp32.err.find("bf16 only"), std::string::npos) << fp32.err;
  EXPECT_FALSE(fs::exists(ck));
  // bf16 (the default there) goes on to the next check: the missing token file.
  const test::EthRun bf16 = test::eth_cli(
      "train --device emulated --model tiny --data '" + (dir_ / "missing.bin").string() + "'",
      dir_);
  EXPECT_EQ(bf16.code, 2) << bf16.err;
  EXPECT_NE(bf16.err.find("missing.bin"), std::string::npos) << bf16.err;
  // eth train --plan and eth launch train on it too: they go on to the missing plan file.
  for (const std::string& cmd :
       {"launch --device emulated --plan '" + (dir_ / "missing.json").string() + "' -- --steps 1",
        // threads: MPI's own allocations would make LeakSanitizer's exit the code read here.
        "train --device emulated --backend threads --plan '" + (dir_ / "missing.json").string() +
            "' --data x"}) {
    const test::EthRun r = test::eth_cli(cmd, dir_);
    EXPECT_EQ(r.code, 2) << cmd << "\n" << r.err;
    EXPECT_NE(r.err.find("missing.json"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("--device"), std::string::npos) << r.err;
  }
}

TEST_F(DeviceCli, LaunchRefusesCudaBeforeThePlanOrAnyRank) {
  // Where cuda can run (and the build has NCCL) eth launch trains on it: the missing plan next.
  expect_refused(test::eth_cli(
                     "launch --device cuda --plan '" + (dir_ / "missing.json").string() +
                         "' -- --steps 1",
                     dir_),
                 /*trains=*/true);
}

TEST_F(DeviceCli, ProfileMeasureRefusesCudaBeforeCreatingTheOutput) {
  const fs::path out = dir_ / "prof";
  expect_refused(test::eth_cli(
      "profile --measure --device cuda --model tiny --out '" + out.string() + "'", dir_));
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(DeviceCli, CpuIsTheDefaultAndOtherNamesAreUsageErrors) {
  const test::EthRun bad = test::eth_cli("train --device tpu --model tiny --data x", dir_);
  EXPECT_EQ(bad.code, 1) << bad.err;
  // --device cpu goes on to the next check (the missing token file), not a device error.
  const test::EthRun cpu = test::eth_cli(
      "train --device cpu --model tiny --data '" + (dir_ / "missing.bin").string() + "'", dir_);
  EXPECT_EQ(cpu.code, 2) << cpu.err;
  EXPECT_EQ(cpu.err.find("--device"), std::string::npos) << cpu.err;
}

}  // namespace
}  // namespace eth
