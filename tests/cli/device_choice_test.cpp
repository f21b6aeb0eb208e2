// --device (cli/device_choice.h): the three names and the refusal of any other naming the flag,
// cuda refused with the reason where it cannot run (asked of the CUDA runtime, not of the code
// under test), the CPU-only commands refusing both GPU devices, and the GPU devices' bf16-only
// precision.
#include "cli/device_choice.h"

#include <gtest/gtest.h>

#include "kernels/cuda/runtime.h"
#include "test_util.h"

namespace eth::device_choice_test {
namespace {

using cli::Device;
using test::error_of;

TEST(DeviceChoice, NamesAndTheirComputeDevices) {
  EXPECT_EQ(cli::choose_device("", "--device"), Device::Cpu);
  EXPECT_EQ(cli::choose_device("cpu", "--device"), Device::Cpu);
  EXPECT_EQ(cli::choose_device("emulated", "--device"), Device::Emulated);
  EXPECT_EQ(cli::compute_device(Device::Cpu), ComputeDevice::Cpu);
  EXPECT_EQ(cli::compute_device(Device::Emulated), ComputeDevice::Emulated);
  EXPECT_EQ(cli::compute_device(Device::Cuda), ComputeDevice::Cuda);
  EXPECT_EQ(cli::kDeviceNames, (std::vector<std::string>{"cpu", "emulated", "cuda"}));
  for (const std::string bad : {"gpu", "CPU", "cuda:0", " cpu"}) {
    const std::string e = error_of([&] { cli::choose_device(bad, "--dev-flag"); });
    EXPECT_NE(e.find("--dev-flag"), std::string::npos) << e;
    EXPECT_NE(e.find("'" + bad + "'"), std::string::npos) << e;
  }
}

TEST(DeviceChoice, CudaWhereItRunsElseRefusedWithTheReason) {
  if (cuda::compiled() && cuda::device_count() > 0) {
    EXPECT_EQ(cli::choose_device("cuda", "--device"), Device::Cuda);
    return;
  }
  const std::string e = error_of([] { cli::choose_device("cuda", "--device"); });
  EXPECT_NE(e.find("cuda cannot run here: " + cuda::unavailable_reason()), std::string::npos) << e;
  EXPECT_NE(e.find("--device"), std::string::npos) << e;
}

TEST(DeviceChoice, CpuOnlyCommandsRefuseBothGpuDevices) {
  EXPECT_EQ(cli::choose_cpu_device("", "--device", "eth profile --measure"), Device::Cpu);
  for (const std::string gpu : {"emulated", "cuda"}) {
    const std::string e =
        error_of([&] { cli::choose_cpu_device(gpu, "--device", "eth profile --measure"); });
    EXPECT_NE(e.find("--device"), std::string::npos) << gpu << ": " << e;
    // cuda where it cannot run is refused for that first; elsewhere, as the command's.
    if (gpu == "emulated" || (cuda::compiled() && cuda::device_count() > 0)) {
      EXPECT_NE(e.find("eth profile --measure"), std::string::npos) << gpu << ": " << e;
      EXPECT_NE(e.find("not built yet"), std::string::npos) << e;
    }
  }
  EXPECT_EQ(error_of([] { cli::refuse_gpu_device(Device::Cpu, "--device", "x"); }), "(no error)");
}

TEST(DeviceChoice, GpuDevicesTrainInBf16Only) {
  cli::PrecisionChoice c = cli::choose_device_precision(Device::Emulated, "", "--precision");
  EXPECT_EQ(c.precision, Precision::Bf16);
  EXPECT_NE(c.line.find("default"), std::string::npos) << c.line;
  c = cli::choose_device_precision(Device::Emulated, "bf16", "--precision");
  EXPECT_EQ(c.precision, Precision::Bf16);
  EXPECT_NE(c.line.find("asked"), std::string::npos) << c.line;
  const std::string e =
      error_of([] { cli::choose_device_precision(Device::Emulated, "fp32", "--prec-flag"); });
  EXPECT_NE(e.find("--prec-flag"), std::string::npos) << e;
  EXPECT_NE(e.find("bf16 only"), std::string::npos) << e;
  // On the CPU the flag is the CPU's choice: fp32 stays fp32.
  EXPECT_EQ(cli::choose_device_precision(Device::Cpu, "fp32", "--precision").precision,
            Precision::Fp32);
}

}  // namespace
}  // namespace eth::device_choice_test
