// The emulated device's memory (kernels/emulated/runtime.h): host code that reads or writes
// device memory outside the device layer crashes (death tests), the same data is reachable
// through the copies, the scopes nest and are shared by threads, the allocator keeps
// allocations apart and aligned and gives memory back, and the copies and kernels refuse
// pointers on the wrong side.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "kernels/emulated/kernels.h"
#include "kernels/emulated/runtime.h"

namespace eth {
namespace {

using emu::DeviceBuffer;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif
#else
constexpr bool kAsan = false;
#endif

// A SIGSEGV; under AddressSanitizer, which catches the signal and exits, its report.
bool crashed_on_segv(int status) {
  if (WIFSIGNALED(status)) return WTERMSIG(status) == SIGSEGV;
  return kAsan && WIFEXITED(status) && WEXITSTATUS(status) != 0;
}
constexpr const char* kSegvMessage = kAsan ? "SEGV" : "";

// Reads through a volatile pointer, so the compiler cannot drop or hoist the access.
float host_read(const float* p) { return *static_cast<const volatile float*>(p); }
void host_write(float* p, float v) { *static_cast<volatile float*>(p) = v; }

std::vector<float> iota_floats(std::size_t n, float first) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

std::vector<float> download(const DeviceBuffer<float>& d) {
  std::vector<float> h(d.size());
  emu::copy_to_host(h.data(), d.data(), d.bytes());
  return h;
}

class EmulatedDevice : public ::testing::Test {
 protected:
  // Fork-and-exec death tests: the kernels' OpenMP threads make a plain fork unsafe.
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(EmulatedDevice, HostAccessOutsideTheDeviceLayerCrashes) {
  const std::vector<float> want = iota_floats(1000, 1.5f);
  DeviceBuffer<float> d(want.size());
  emu::copy_to_device(d.data(), want.data(), d.bytes());
  EXPECT_EXIT(host_read(d.data() + 17), crashed_on_segv, kSegvMessage);
  EXPECT_EXIT(host_write(d.data() + 999, 2.0f), crashed_on_segv, kSegvMessage);
  // The same memory through the device layer: the values uploaded, at the same addresses.
  EXPECT_EQ(download(d), want);
  // Inside a scope the host may touch it (the device layer's own access).
  {
    const emu::DeviceScope scope;
    EXPECT_EQ(host_read(d.data() + 17), want[17]);
    host_write(d.data() + 999, -4.0f);
  }
  EXPECT_EXIT(host_read(d.data() + 999), crashed_on_segv, kSegvMessage);
  EXPECT_EQ(download(d)[999], -4.0f);
}

TEST_F(EmulatedDevice, AllocationsMadeInsideAScopeAreClosedAfterIt) {
  // An allocation made while a scope is open must be reachable in it and protected after.
  float* p = nullptr;
  {
    const emu::DeviceScope scope;
    p = static_cast<float*>(emu::alloc(3 << 20));  // past the pages the scope opened
    host_write(p + (3 << 18) - 1, 7.0f);
    EXPECT_EQ(host_read(p + (3 << 18) - 1), 7.0f);
  }
  EXPECT_EXIT(host_read(p), crashed_on_segv, kSegvMessage);
  float back = 0;
  emu::copy_to_host(&back, p + (3 << 18) - 1, sizeof back);
  EXPECT_EQ(back, 7.0f);
  emu::free(p);
}

TEST_F(EmulatedDevice, ScopesNestAndTheLastOneCloses) {
  DeviceBuffer<float> d(64);
  d.zero();
  {
    const emu::DeviceScope outer;
    {
      const emu::DeviceScope inner;
      host_write(d.data(), 1.0f);
    }
    // The inner scope's end must not close the outer scope's pages.
    EXPECT_EQ(host_read(d.data()), 1.0f);
    // Nor may a device call's own scope.
    emu::memset_zero(d.data() + 1, sizeof(float));
    EXPECT_EQ(host_read(d.data()), 1.0f);
  }
  EXPECT_EXIT(host_read(d.data()), crashed_on_segv, kSegvMessage);
}

TEST_F(EmulatedDevice, ThreadsShareTheDeviceAndItClosesWhenTheyAreDone) {
  // Ranks as threads: each allocates, uploads, copies on the device, runs a kernel and
  // downloads, many times, concurrently; every thread must see its own data.
  constexpr int kThreads = 4, kRounds = 200;
  std::vector<int> bad(kThreads, 0);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kThreads; ++r) {
    ranks.emplace_back([r, &bad] {
      for (int round = 0; round < kRounds; ++round) {
        const std::size_t n = 256 + 97 * static_cast<std::size_t>((r + round) % 7);
        const std::vector<float> x = iota_floats(n, static_cast<float>(r * 1000 + round));
        DeviceBuffer<float> a(n), b(n);
        emu::copy_to_device(a.data(), x.data(), a.bytes());
        emu::copy_on_device(b.data(), a.data(), a.bytes());
        emu::add_inplace(b.data(), a.data(), static_cast<std::int64_t>(n));
        std::vector<float> got(n);
        emu::copy_to_host(got.data(), b.data(), b.bytes());
        for (std::size_t i = 0; i < n; ++i) bad[r] += got[i] != 2 * x[i];
      }
    });
  }
  for (std::thread& t : ranks) t.join();
  EXPECT_EQ(bad, std::vector<int>(kThreads, 0));
  DeviceBuffer<float> d(8);
  d.zero();
  EXPECT_EXIT(host_read(d.data()), crashed_on_segv, kSegvMessage);
}

TEST_F(EmulatedDevice, AllocatorKeepsAllocationsApartAlignedAndGivesMemoryBack) {
  const std::size_t before = emu::allocated_bytes();
  EXPECT_EQ(emu::alloc(0), nullptr);
  emu::free(nullptr);
  std::vector<void*> ps;
  std::vector<std::size_t> sizes;
  for (std::size_t i = 0; i < 40; ++i) {
    sizes.push_back(1 + i * 37 % 5000);
    ps.push_back(emu::alloc(sizes.back()));
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(ps.back()) % 256, 0u) << i;
    EXPECT_TRUE(emu::is_device_memory(ps.back(), sizes.back()));
    EXPECT_FALSE(emu::is_device_memory(ps.back(), sizes.back() + 1));
  }
  // Each allocation holds its own bytes: fill every one with its index, read all back.
  for (std::size_t i = 0; i < ps.size(); ++i) {
    const std::vector<unsigned char> fill(sizes[i], static_cast<unsigned char>(i));
    emu::copy_to_device(ps[i], fill.data(), sizes[i]);
  }
  for (std::size_t i = 0; i < ps.size(); ++i) {
    std::vector<unsigned char> got(sizes[i]);
    emu::copy_to_host(got.data(), ps[i], sizes[i]);
    EXPECT_EQ(got, std::vector<unsigned char>(sizes[i], static_cast<unsigned char>(i))) << i;
  }
  // Free every other one, reallocate into the holes, free all: nothing is left allocated.
  for (std::size_t i = 0; i < ps.size(); i += 2) emu::free(ps[i]);
  for (std::size_t i = 0; i < ps.size(); i += 2) ps[i] = emu::alloc(sizes[i]);
  for (void* p : ps) emu::free(p);
  EXPECT_EQ(emu::allocated_bytes(), before);
  // A freed pointer is no longer device memory, so the copies refuse it.
  std::vector<float> host(4);
  void* gone = emu::alloc(64);
  emu::free(gone);
  if (!emu::is_device_memory(gone)) {
    EXPECT_THROW(emu::copy_to_device(gone, host.data(), 16), emu::EmuError);
  }
}

TEST_F(EmulatedDevice, CopiesAndKernelsRefusePointersOnTheWrongSide) {
  DeviceBuffer<float> d(16), e(16);
  std::vector<float> h(16, 1.0f);
  // Past the end of the allocation.
  EXPECT_THROW(emu::copy_to_device(d.data() + 8, h.data(), 9 * sizeof(float)), emu::EmuError);
  EXPECT_THROW(emu::memset_zero(d.data(), 17 * sizeof(float)), emu::EmuError);
  // Host memory where device memory belongs, and device memory where host memory belongs.
  EXPECT_THROW(emu::copy_to_device(h.data(), h.data(), 16), emu::EmuError);
  EXPECT_THROW(emu::copy_to_host(h.data(), h.data(), 16), emu::EmuError);
  EXPECT_THROW(emu::copy_to_host(e.data(), d.data(), 16), emu::EmuError);
  EXPECT_THROW(emu::copy_on_device(d.data(), h.data(), 16), emu::EmuError);
  EXPECT_THROW(emu::add_inplace(d.data(), h.data(), 16), emu::EmuError);
  EXPECT_THROW((void)emu::sum_squares(h.data(), 16), emu::EmuError);
  // The loss of the cross-entropy is a host double, as on the GPU.
  DeviceBuffer<double> dloss(1);
  DeviceBuffer<float> losses(1), lse(1);
  DeviceBuffer<Bf16> logits(4);
  DeviceBuffer<std::int32_t> targets(1);
  EXPECT_THROW(emu::crossentropy_forward(dloss.data(), losses.data(), lse.data(), logits.data(),
                                         targets.data(), 1.0, 1, 4),
               emu::EmuError);
  EXPECT_THROW(emu::set_device(1), emu::EmuError);
  emu::set_device(0);
  EXPECT_EQ(emu::device_count(), 1);
  EXPECT_TRUE(emu::unavailable_reason().empty());
}

}  // namespace
}  // namespace eth
