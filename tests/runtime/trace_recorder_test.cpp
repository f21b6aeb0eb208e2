// The trace recorder on its own: it keeps only the chosen steps, turns a collective's post and
// wait into one slice that never overlaps the previous collective's, gathers every rank's events
// on rank 0 (LocalWorld threads share one clock, so each measured offset lies within its own
// error bound), formats a trace whose slices are exactly the recorded ones, and parses
// --trace-steps strictly.
#include "runtime/trace_recorder.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <mutex>

#include "comm/local/local_comm.h"
#include "test_util.h"

namespace eth {
namespace {

TraceEvent at(TraceKind kind, std::int64_t start, std::int64_t end, std::int64_t index = -1) {
  TraceEvent e;
  e.kind = kind;
  e.start_ns = start;
  e.end_ns = end;
  e.index = index;
  return e;
}

TEST(TraceRecorder, KeepsOnlyChosenStepsAndNestsCollectivesInOrder) {
  TraceRecorder rec({3, 1, 3});
  EXPECT_EQ(rec.steps(), (std::vector<std::int64_t>{1, 3}));
  rec.begin_step(0);
  EXPECT_FALSE(rec.on());
  rec.add(at(TraceKind::Forward, 1, 2));
  { TraceScope s(&rec, TraceKind::Backward, 0); }
  rec.end_step();
  EXPECT_TRUE(rec.events().empty());

  rec.begin_step(1);
  EXPECT_TRUE(rec.on());
  rec.add(at(TraceKind::CollectivePost, 100, 110, 0));  // posted at 110
  rec.add(at(TraceKind::CollectivePost, 120, 130, 1));  // posted at 130
  rec.add(at(TraceKind::CollectiveWait, 200, 300, 0));  // seen complete at 300
  rec.add(at(TraceKind::CollectiveWait, 300, 310, 1));  // runs after 0: from 300, not 130
  rec.end_step();
  const auto& ev = rec.events();
  ASSERT_EQ(ev.size(), 3u);  // two collectives and the step
  EXPECT_EQ(ev[0].kind, TraceKind::Collective);
  EXPECT_EQ(ev[0].start_ns, 110);
  EXPECT_EQ(ev[0].end_ns, 300);
  EXPECT_EQ(ev[1].start_ns, 300);
  EXPECT_EQ(ev[1].end_ns, 310);
  EXPECT_EQ(ev[2].kind, TraceKind::Step);
  for (const TraceEvent& e : ev) EXPECT_EQ(e.step, 1);
  // A wait for a collective never posted is our bug, not input.
  rec.begin_step(3);
  EXPECT_DEATH(rec.add(at(TraceKind::CollectiveWait, 1, 2, 7)), "never posted");
}

TEST(TraceRecorder, ScopesRecordNothingWhenOffAndCpuTimeWhenComputing) {
  TraceScope off(nullptr, TraceKind::Forward, 0);  // tracing off: a null pointer, nothing else
  TraceRecorder rec({0});
  rec.begin_step(0);
  {
    TraceScope f(&rec, TraceKind::Forward, 4);
    volatile double x = 0;
    for (int i = 0; i < 100000; ++i) x = x + 1;
  }
  { TraceScope r(&rec, TraceKind::RecvActivation, 4, 0); }
  rec.end_step();
  ASSERT_EQ(rec.events().size(), 3u);
  const TraceEvent& f = rec.events()[0];
  EXPECT_EQ(f.microbatch, 4);
  EXPECT_GT(f.cpu_ns, 0);
  EXPECT_LE(f.cpu_ns, f.end_ns - f.start_ns + 1'000'000);  // CPU time within its wall time
  EXPECT_EQ(rec.events()[1].cpu_ns, -1);  // a wait is not compute
}

TEST(TraceRecorder, GatherBringsEveryRankToRankZeroOnOneClock) {
  const int n = 3;
  LocalWorld world(n);
  std::vector<RankTrace> got;
  std::mutex mu;
  auto errors = run_on_threads(world, [&](Communicator c) {
    TraceRecorder rec({5});
    rec.begin_step(5);
    for (int k = 0; k <= c.rank(); ++k) {  // rank r records r + 1 forwards
      rec.add(at(TraceKind::Forward, 1000 * k, 1000 * k + 500));
    }
    rec.end_step();
    std::vector<RankTrace> all = gather_trace(rec, c);
    if (c.rank() != 0) {
      EXPECT_TRUE(all.empty());
      return;
    }
    std::lock_guard lock(mu);
    got = std::move(all);
  });
  for (const auto& e : errors) ASSERT_FALSE(e);
  ASSERT_EQ(got.size(), static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    const RankTrace& t = got[static_cast<std::size_t>(r)];
    EXPECT_EQ(t.rank, r);
    ASSERT_EQ(t.events.size(), static_cast<std::size_t>(r + 2));  // forwards and the step
    // One process, one steady clock: the offset is 0 up to the measurement's own bound.
    EXPECT_LE(std::llabs(t.clock_offset_ns), t.clock_error_ns + 1000) << "rank " << r;
    EXPECT_EQ(t.events[0].start_ns, t.clock_offset_ns);  // shifted by exactly the offset
    EXPECT_EQ(t.events[0].end_ns - t.events[0].start_ns, 500);
    EXPECT_EQ(t.events.back().kind, TraceKind::Step);
  }
}

TEST(TraceRecorder, ParsesTraceStepsStrictly) {
  EXPECT_EQ(parse_trace_steps("2-4,8", 0, 10, "--trace-steps"),
            (std::vector<std::int64_t>{2, 3, 4, 8}));
  EXPECT_EQ(parse_trace_steps("5,5,3", 0, 10, "--trace-steps"),
            (std::vector<std::int64_t>{3, 5}));
  // Default: the three steps after the run's first (here a resumed run from step 4).
  EXPECT_EQ(parse_trace_steps("", 4, 20, "--trace-steps"),
            (std::vector<std::int64_t>{5, 6, 7}));
  EXPECT_EQ(parse_trace_steps("", 4, 6, "--trace-steps"), (std::vector<std::int64_t>{5}));
  EXPECT_EQ(parse_trace_steps("", 4, 5, "--trace-steps"), (std::vector<std::int64_t>{4}));
  for (const char* bad : {"x", "3-", "-3", "4-2", "1,,2", "2.5", " 1"}) {
    const std::string e = test::error_of([&] { parse_trace_steps(bad, 0, 10, "--trace-steps"); });
    EXPECT_NE(e.find("--trace-steps"), std::string::npos) << bad << ": " << e;
  }
}

}  // namespace
}  // namespace eth
