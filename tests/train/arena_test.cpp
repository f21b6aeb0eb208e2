// The run's arena (train/arena.h): sizes rounded up to 64 bytes, planned sums, and buffers taken
// in order at 64-byte aligned, zeroed, non-overlapping addresses; a move hands the mapping over.
#include "train/arena.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>

#include "kernels/bf16.h"

namespace eth::arena_test {
namespace {

TEST(Arena, SizesRoundUpToWholeCacheLines) {
  EXPECT_EQ(arena_bytes<float>(0), 0u);
  EXPECT_EQ(arena_bytes<float>(1), 64u);
  EXPECT_EQ(arena_bytes<float>(16), 64u);   // exactly one line
  EXPECT_EQ(arena_bytes<float>(17), 128u);
  EXPECT_EQ(arena_bytes<double>(9), 128u);  // 72 bytes
  EXPECT_EQ(arena_bytes<Bf16>(33), 128u);   // 66 bytes
  ArenaSize plan;
  plan.add<float>(17);
  plan.add<Bf16>(32);
  plan.add<std::int32_t>(0);
  EXPECT_EQ(plan.bytes(), 128u + 64u);
}

TEST(Arena, TakesAlignedZeroedBuffersInOrderUpToItsCapacity) {
  ArenaSize plan;
  plan.add<float>(100);
  plan.add<double>(3);
  plan.add<Bf16>(1000);
  Arena a(plan.bytes());
  EXPECT_EQ(a.capacity(), plan.bytes());
  EXPECT_EQ(a.used(), 0u);
  float* f = a.take<float>(100);
  double* d = a.take<double>(3);
  Bf16* b = a.take<Bf16>(1000);
  EXPECT_EQ(a.used(), a.capacity());
  for (const void* p : {static_cast<const void*>(f), static_cast<const void*>(d),
                        static_cast<const void*>(b)}) {
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % kArenaAlign, 0u);
  }
  // Back to back at the rounded sizes: each buffer ends before the next begins.
  const auto at = [&](const void* p) {
    return reinterpret_cast<const unsigned char*>(p) - reinterpret_cast<const unsigned char*>(f);
  };
  EXPECT_EQ(at(d), 448);  // 400 bytes rounded up
  EXPECT_EQ(at(b), 448 + 64);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(f[i], 0.0f);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(b[i].bits, 0u);
  f[99] = 1.0f;  // writable through its end
  b[999].bits = 7;
  EXPECT_EQ(d[0], 0.0);
}

TEST(Arena, AMoveHandsTheMappingOver) {
  Arena a(256);
  float* p = a.take<float>(16);
  p[0] = 3.0f;
  Arena b(std::move(a));
  EXPECT_EQ(b.capacity(), 256u);
  EXPECT_EQ(b.used(), 64u);
  EXPECT_EQ(a.capacity(), 0u);  // NOLINT(bugprone-use-after-move): the moved-from state
  EXPECT_EQ(p[0], 3.0f);        // the same memory, still mapped
  Arena c;
  c = std::move(b);
  EXPECT_EQ(c.take<float>(16), p + 16);
  Arena empty(0);
  EXPECT_EQ(empty.capacity(), 0u);
}

TEST(ArenaDeathTest, TakingMoreThanPlannedStops) {
  Arena a(64);
  (void)a.take<float>(16);
  EXPECT_DEATH((void)a.take<float>(1), "arena overflow");
}

}  // namespace
}  // namespace eth::arena_test
