// The emulator's deferred hand-overs: a result handed on mid-op leaves no earlier than the point
// the emulated device would have reached (op start + slowdown x compute so far), before the op
// finishes, in the order it was handed on; with nothing stretched it leaves at once. The lower
// bounds hold on any machine: a sleep to a deadline on the monotonic clock never ends early.
#include "runtime/emulation.h"

#include <gtest/gtest.h>

#include <vector>

namespace eth {
namespace {

// Burns this thread's CPU time for about `ns` (the emulator stretches CPU time, not wall time).
void burn_cpu_ns(std::int64_t ns) {
  const std::int64_t start = TraceRecorder::thread_cpu_ns();
  volatile double x = 1.0;
  while (TraceRecorder::thread_cpu_ns() - start < ns) x = x * 1.0000001 + 1e-9;
}

TEST(Emulation, AHandOverMidOpLeavesAtTheEmulatedTimeBeforeTheOpFinishes) {
  Emulator emulator(4.0);
  std::vector<std::int64_t> left;
  std::int64_t earliest_first = 0, earliest_second = 0;
  const std::int64_t wall0 = TraceRecorder::now_ns();
  EmulatedOp op(emulator);
  const std::int64_t cpu0 = TraceRecorder::thread_cpu_ns();
  burn_cpu_ns(2'000'000);
  earliest_first = wall0 + 4 * (TraceRecorder::thread_cpu_ns() - cpu0);
  emulator.at_emulated_now([&] { left.push_back(TraceRecorder::now_ns()); });
  EXPECT_TRUE(left.empty()) << "a stretched op's hand-over ran at its real time";
  burn_cpu_ns(2'000'000);
  earliest_second = wall0 + 4 * (TraceRecorder::thread_cpu_ns() - cpu0);
  emulator.at_emulated_now([&] { left.push_back(TraceRecorder::now_ns()); });
  op.finish();
  const std::int64_t finished = TraceRecorder::now_ns();
  ASSERT_EQ(left.size(), 2u);
  // The op's CPU clock started a moment after wall0, so these bounds are slightly loose.
  EXPECT_GE(left[0], earliest_first - 4 * 200'000);
  EXPECT_GE(left[1], earliest_second - 4 * 200'000);
  EXPECT_LE(left[0], left[1]);
  EXPECT_LE(left[1], finished);
}

TEST(Emulation, WithoutAStretchOrOutsideAnOpTheHandOverRunsAtOnce) {
  Emulator plain(1.0);
  bool ran = false;
  {
    EmulatedOp op(plain);
    plain.at_emulated_now([&] { ran = true; });
    EXPECT_TRUE(ran);
    op.finish();
  }
  Emulator slow(4.0);
  ran = false;
  slow.at_emulated_now([&] { ran = true; });  // no op is running
  EXPECT_TRUE(ran);
}

TEST(Emulation, AnOpLeftWithoutFinishingDropsWhatItDeferred) {
  Emulator emulator(8.0);
  bool ran = false;
  {
    EmulatedOp op(emulator);
    burn_cpu_ns(500'000);
    emulator.at_emulated_now([&] { ran = true; });
  }  // as when an exception leaves the op
  EXPECT_FALSE(ran);
  EmulatedOp next(emulator);
  next.finish();
  EXPECT_FALSE(ran);
}

TEST(Emulation, AnOpOfANominalLengthLastsItAndHandsOverAtItsOffsets) {
  // 1 ms of compute in an op of nominal length 30 ms lasts at least 30 ms (by its CPU time,
  // 4 x 1 = 4 ms); a hand-over at offset 12 ms leaves no earlier than 12 ms after the start,
  // one without an offset as at_emulated_now, and both before the op ends.
  Emulator emulator(4.0);
  std::vector<std::int64_t> left;
  const std::int64_t wall0 = TraceRecorder::now_ns();
  EmulatedOp op(emulator, 30'000'000);
  burn_cpu_ns(1'000'000);
  emulator.at_emulated_offset(12'000'000, [&] { left.push_back(TraceRecorder::now_ns()); });
  EXPECT_TRUE(left.empty());
  emulator.at_emulated_offset(-1, [&] { left.push_back(TraceRecorder::now_ns()); });
  const double seconds = op.finish();
  const std::int64_t finished = TraceRecorder::now_ns();
  EXPECT_GE(seconds, 0.030);
  ASSERT_EQ(left.size(), 2u);
  EXPECT_GE(left[0], wall0 + 12'000'000);
  EXPECT_LE(left[1], finished);
  // Without a slowdown the nominal length does nothing: the op is as long as its compute.
  Emulator plain(1.0);
  bool ran = false;
  EmulatedOp lone(plain, 30'000'000);
  plain.at_emulated_offset(12'000'000, [&] { ran = true; });
  EXPECT_TRUE(ran);
  lone.finish();
}

}  // namespace
}  // namespace eth
