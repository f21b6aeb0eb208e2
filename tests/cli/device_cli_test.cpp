// `--device cuda` on `eth train`, `eth launch` and `eth profile --measure` is refused before any
// work with the reason in words: this build has no CUDA, this machine has no GPU (what the driver
// said), or GPU training is not built yet. "Before any work": nothing the command would write
// exists afterwards, and the other inputs (missing files here) are never reached.
#include <gtest/gtest.h>

#include <filesystem>

#include "cli/cli_run.h"
#include "kernels/cuda/runtime.h"
#include "test_util.h"

namespace eth {
namespace {

namespace fs = std::filesystem;

class DeviceCli : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::scratch("device_cli", "cuda"); }
  void TearDown() override { fs::remove_all(dir_); }

  // The refusal every command gives for cuda on this build and machine.
  void expect_refused(const test::EthRun& r) {
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find("--device"), std::string::npos) << r.err;
    if (!cuda::compiled()) {
      EXPECT_NE(r.err.find("this build has no CUDA"), std::string::npos) << r.err;
    } else if (cuda::device_count() == 0) {
      EXPECT_NE(r.err.find("cuda cannot run here: " + cuda::unavailable_reason()),
                std::string::npos)
          << r.err;
    } else {
      EXPECT_NE(r.err.find("GPU training is not built yet"), std::string::npos) << r.err;
    }
    EXPECT_EQ(r.out, "");
  }
  fs::path dir_;
};

TEST_F(DeviceCli, TrainRefusesCudaBeforeReadingOrWriting) {
  const fs::path ck = dir_ / "ck";
  expect_refused(test::eth_cli("train --device cuda --model tiny --data '" +
                                   (dir_ / "missing.bin").string() + "' --checkpoint-dir '" +
                                   ck.string() + "' --steps 1",
                               dir_));
  EXPECT_FALSE(fs::exists(ck));
}

TEST_F(DeviceCli, LaunchRefusesCudaBeforeThePlanOrAnyRank) {
  expect_refused(test::eth_cli(
      "launch --device cuda --plan '" + (dir_ / "missing.json").string() + "' -- --steps 1",
      dir_));
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
