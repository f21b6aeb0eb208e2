// The runtime's memory policies (runtime/device_memory_policy.h): host memory is plain memory
// (zeroed buffers, overlapping copies, no communicator table); the emulated device's buffers are
// device memory, zeroed, copied and zeroed on the device, and its communicator table copies,
// sums and maxes f32 and f64 on the device as the host computes them; a RuntimeBuffer frees its
// allocation once, whoever holds it last.
#include "runtime/device_memory_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/emulated/runtime.h"

namespace eth::device_memory_policy_test {
namespace {

TEST(RuntimeMemory, HostMemoryIsPlainMemory) {
  const RuntimeMemory& host = runtime_memory(ComputeDevice::Cpu);
  EXPECT_FALSE(host.on_device());
  EXPECT_EQ(host.comm_ops(), nullptr);
  RuntimeBuffer b(host, 64);
  ASSERT_EQ(b.size(), 64u);
  EXPECT_TRUE(std::all_of(b.data(), b.data() + 64, [](std::byte x) { return x == std::byte{0}; }));
  for (int i = 0; i < 64; ++i) b.data()[i] = static_cast<std::byte>(i);
  host.copy(b.data() + 8, b.data(), 32);  // overlapping: as memmove
  for (int i = 0; i < 32; ++i) ASSERT_EQ(b.data()[8 + i], static_cast<std::byte>(i)) << i;
  host.copy(b.data(), b.data(), 64);  // onto itself: nothing
  EXPECT_EQ(b.data()[1], std::byte{1});
  host.zero(b.data() + 60, 4);
  EXPECT_EQ(b.data()[59], std::byte{59});  // past the copy: untouched
  EXPECT_EQ(b.data()[60], std::byte{0});
  EXPECT_TRUE(RuntimeBuffer(host, 0).empty());
  EXPECT_EQ(RuntimeBuffer(host, 0).data(), nullptr);
}

template <typename T>
std::vector<T> download(const DeviceMemoryOps& ops, const std::byte* p, std::size_t n) {
  std::vector<T> out(n);
  ops.download(out.data(), p, n * sizeof(T));
  return out;
}

TEST(RuntimeMemory, EmulatedBuffersAreDeviceMemoryCopiedAndReducedOnTheDevice) {
  const RuntimeMemory& dev = runtime_memory(ComputeDevice::Emulated);
  EXPECT_TRUE(dev.on_device());
  ASSERT_NE(dev.comm_ops(), nullptr);
  const DeviceMemoryOps& ops = *dev.comm_ops();
  EXPECT_STREQ(ops.name, "emulated");
  const std::size_t before = emu::allocated_bytes();
  {
    constexpr std::size_t n = 10;
    RuntimeBuffer a(dev, n * 8), b(dev, n * 8);
    EXPECT_TRUE(emu::is_device_memory(a.data(), n * 8));
    EXPECT_EQ(download<double>(ops, a.data(), n), std::vector<double>(n, 0.0));  // zeroed
    std::vector<float> x(n), y(n);
    for (std::size_t i = 0; i < n; ++i) {
      x[i] = static_cast<float>(i) - 4.5f;
      y[i] = 2.0f - static_cast<float>(i) * 0.75f;
    }
    ops.upload(a.data(), x.data(), n * 4);
    ops.upload(b.data(), y.data(), n * 4);
    ops.reduce(a.data(), b.data(), n, DType::F32, ReduceOp::Sum);
    std::vector<float> want(n);
    for (std::size_t i = 0; i < n; ++i) want[i] = x[i] + y[i];
    EXPECT_EQ(download<float>(ops, a.data(), n), want);
    ops.reduce(a.data(), b.data(), n, DType::F32, ReduceOp::Max);
    for (std::size_t i = 0; i < n; ++i) want[i] = std::max(want[i], y[i]);
    EXPECT_EQ(download<float>(ops, a.data(), n), want);
    std::vector<double> dx(n, 0.1), dy(n);
    for (std::size_t i = 0; i < n; ++i) dy[i] = 1e-17 * static_cast<double>(i);
    ops.upload(a.data(), dx.data(), n * 8);
    ops.upload(b.data(), dy.data(), n * 8);
    ops.reduce(a.data(), b.data(), n, DType::F64, ReduceOp::Sum);
    std::vector<double> dwant(n);
    for (std::size_t i = 0; i < n; ++i) dwant[i] = dx[i] + dy[i];  // f64, not rounded to f32
    EXPECT_EQ(download<double>(ops, a.data(), n), dwant);
    // Copies and zeroing on the device, through the policy and the communicator table.
    dev.copy(b.data(), a.data(), 4 * 8);
    EXPECT_EQ(download<double>(ops, b.data(), 4),
              std::vector<double>(dwant.begin(), dwant.begin() + 4));
    dev.zero(b.data(), 2 * 8);
    EXPECT_EQ(download<double>(ops, b.data(), 3)[1], 0.0);
    ops.copy(b.data(), a.data(), n * 8);
    ops.synchronize();
    EXPECT_EQ(download<double>(ops, b.data(), n), dwant);
    // A buffer moved is freed once, by its last holder.
    RuntimeBuffer moved(std::move(a));
    RuntimeBuffer last;
    last = std::move(moved);
    EXPECT_EQ(download<double>(ops, last.data(), n), dwant);
  }
  EXPECT_EQ(emu::allocated_bytes(), before) << "a buffer outlived its RuntimeBuffer";
}

}  // namespace
}  // namespace eth::device_memory_policy_test
