// The run's compute device (train/compute_device.h): names, which device trains in which
// precision (refusals in words), where each device's model state lives, the GPU name to preset
// table, and one allocation on each device that can run here: zeroed, uploaded, counted by the
// device's memory figures while it lives, and handed over by a move.
#include "train/compute_device.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/runtime.h"
#include "kernels/emulated/runtime.h"
#include "train/state_backend.h"

namespace eth::compute_device_test {
namespace {

TEST(ComputeDevice, NamesGpusTheirPresetsAndTheCpusFigures) {
  EXPECT_STREQ(compute_device_name(ComputeDevice::Cpu), "cpu");
  EXPECT_STREQ(compute_device_name(ComputeDevice::Emulated), "emulated");
  EXPECT_STREQ(compute_device_name(ComputeDevice::Cuda), "cuda");
  EXPECT_FALSE(is_gpu_device(ComputeDevice::Cpu));
  EXPECT_TRUE(is_gpu_device(ComputeDevice::Emulated));
  EXPECT_TRUE(is_gpu_device(ComputeDevice::Cuda));
  EXPECT_EQ(gpu_device_type_preset("NVIDIA H200"), "H200");
  EXPECT_EQ(gpu_device_type_preset("NVIDIA H100 80GB HBM3"), "H100");
  EXPECT_EQ(gpu_device_type_preset("NVIDIA A100-SXM4-40GB"), "A100");
  EXPECT_EQ(gpu_device_type_preset("NVIDIA GeForce RTX 3090"), "RTX3090");
  EXPECT_EQ(gpu_device_type_preset("NVIDIA GeForce RTX 4090"), "");
  EXPECT_EQ(gpu_device_type_preset("cpu"), "");
  // The host's memory is the CLI's to read: the CPU reports none.
  const DeviceMemoryInfo m = device_memory(ComputeDevice::Cpu);
  EXPECT_EQ(m.name, "cpu");
  EXPECT_EQ(m.total_bytes, 0.0);
  EXPECT_EQ(m.in_use_bytes, 0.0);
  synchronize_device(ComputeDevice::Cpu);  // nothing queued: returns
}

TEST(ComputeDevice, GpusTrainInBf16OnlyWithTheStateInDeviceMemory) {
  EXPECT_EQ(compute_device_refusal(ComputeDevice::Cpu, Precision::Fp32), "");
  EXPECT_EQ(compute_device_refusal(ComputeDevice::Cpu, Precision::Bf16), "");
  EXPECT_EQ(compute_device_refusal(ComputeDevice::Emulated, Precision::Bf16), "");
  for (ComputeDevice d : {ComputeDevice::Emulated, ComputeDevice::Cuda}) {
    const std::string why = compute_device_refusal(d, Precision::Fp32);
    EXPECT_NE(why.find("bf16 only"), std::string::npos) << why;
    EXPECT_NE(why.find(compute_device_name(d)), std::string::npos) << why;
  }
  const std::string cuda = compute_device_refusal(ComputeDevice::Cuda, Precision::Bf16);
  if (cuda::compiled() && cuda::device_count() > 0) {
    EXPECT_EQ(cuda, "");
  } else {
    EXPECT_NE(cuda.find("cuda cannot run here"), std::string::npos) << cuda;
  }
  const auto cpu = state_backend_maker(ComputeDevice::Cpu)(Precision::Fp32, 4096);
  EXPECT_TRUE(cpu->host_visible());
  const auto emulated = state_backend_maker(ComputeDevice::Emulated)(Precision::Bf16, 4096);
  EXPECT_FALSE(emulated->host_visible());
}

TEST(DeviceBytes, OnTheCpuZeroedUploadedAndMoved) {
  DeviceBytes b(ComputeDevice::Cpu, 100);
  ASSERT_EQ(b.size(), 100u);
  for (std::size_t i = 0; i < 100; ++i) ASSERT_EQ(b.data()[i], std::byte{0}) << i;
  const std::vector<unsigned char> src{1, 2, 3, 4, 5};
  b.upload(src.data(), src.size());
  EXPECT_EQ(b.data()[4], std::byte{5});
  EXPECT_EQ(b.data()[5], std::byte{0});
  std::byte* p = b.data();
  DeviceBytes c(std::move(b));
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(b.data(), nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(DeviceBytes(ComputeDevice::Cpu, 0).data(), nullptr);
}

TEST(DeviceBytes, OnTheEmulatedDeviceAreDeviceMemoryCountedWhileTheyLive) {
  const std::size_t before = emu::allocated_bytes();
  std::vector<unsigned char> back(1000, 0xff);
  {
    DeviceBytes b(ComputeDevice::Emulated, 1000);
    EXPECT_TRUE(emu::is_device_memory(b.data(), 1000));
    const DeviceMemoryInfo m = device_memory(ComputeDevice::Emulated);
    EXPECT_GE(m.in_use_bytes, static_cast<double>(before + 1000));
    EXPECT_GT(m.total_bytes, 0.0);
    emu::copy_to_host(back.data(), b.data(), 1000);
    EXPECT_EQ(back, std::vector<unsigned char>(1000, 0));  // zeroed
    std::vector<unsigned char> src(600);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7);
    b.upload(src.data(), src.size());
    DeviceBytes moved;
    moved = std::move(b);
    synchronize_device(ComputeDevice::Emulated);
    emu::copy_to_host(back.data(), moved.data(), 1000);
    EXPECT_TRUE(std::equal(src.begin(), src.end(), back.begin()));
    EXPECT_EQ(back[600], 0);
  }
  EXPECT_EQ(emu::allocated_bytes(), before) << "the allocation outlived its DeviceBytes";
}

}  // namespace
}  // namespace eth::compute_device_test
