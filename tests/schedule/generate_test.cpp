// The generators against the definitions of their schedules, checked by code written here (not
// the validator): each (stage, micro-batch) has one Forward before one Backward, forwards and
// backwards run in micro-batch order, 1F1B keeps at most S - s micro-batches in flight and
// warms up with min(S - s - 1, k) forwards, GPipe runs every forward first, and a timeless run
// of the programs in which F(s, mb) waits for F(s - 1, mb) and B(s, mb) for B(s + 1, mb)
// finishes. Small cases are compared with the orders written out by hand from the papers.
#include "schedule/generate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "schedule/schedule.h"
#include "schedule/validate.h"

namespace eth::generate_test {
namespace {

// Every program of `s` run step by step, each action waiting only on the cross-stage
// dependency of its micro-batch; true when all of them finish.
bool dependencies_allow_completion(const Schedule& s) {
  const auto S = static_cast<std::size_t>(s.num_stages);
  const auto k = static_cast<std::size_t>(s.num_microbatches);
  std::vector<std::vector<char>> fdone(S, std::vector<char>(k, 0)), bdone = fdone;
  std::vector<std::size_t> pc(S, 0);
  for (bool moved = true; moved;) {
    moved = false;
    for (std::size_t st = 0; st < S; ++st) {
      const auto& acts = s.programs[st].actions;
      while (pc[st] < acts.size()) {
        const Action& a = acts[pc[st]];
        const auto mb = static_cast<std::size_t>(a.microbatch);
        if (a.kind == ActionKind::Forward) {
          if (st > 0 && !fdone[st - 1][mb]) break;
          fdone[st][mb] = 1;
        } else {
          if (st + 1 < S && !bdone[st + 1][mb]) break;
          bdone[st][mb] = 1;
        }
        ++pc[st];
        moved = true;
      }
    }
  }
  for (std::size_t st = 0; st < S; ++st) {
    if (pc[st] != s.programs[st].actions.size()) return false;
  }
  return true;
}

struct ProgramFacts {
  bool only_compute = true;
  bool one_f_one_b_each = true;
  bool f_before_b = true;
  bool forwards_in_order = true;
  bool backwards_in_order = true;
  std::int64_t warmup = 0;  // forwards before the first backward
  std::int64_t peak_in_flight = 0;
};

ProgramFacts facts_of(const RankProgram& p, std::int64_t k) {
  ProgramFacts out;
  std::vector<int> f(static_cast<std::size_t>(k), 0), b = f;
  std::int64_t next_f = 0, next_b = 0, in_flight = 0;
  bool seen_b = false;
  for (const Action& a : p.actions) {
    if (a.stage != p.stage || a.microbatch < 0 || a.microbatch >= k ||
        (a.kind != ActionKind::Forward && a.kind != ActionKind::Backward)) {
      out.only_compute = false;
      continue;
    }
    const auto mb = static_cast<std::size_t>(a.microbatch);
    if (a.kind == ActionKind::Forward) {
      ++f[mb];
      out.forwards_in_order = out.forwards_in_order && a.microbatch == next_f++;
      if (!seen_b) ++out.warmup;
      ++in_flight;
    } else {
      seen_b = true;
      ++b[mb];
      out.f_before_b = out.f_before_b && f[mb] == 1;
      out.backwards_in_order = out.backwards_in_order && a.microbatch == next_b++;
      --in_flight;
    }
    out.peak_in_flight = std::max(out.peak_in_flight, in_flight);
  }
  for (std::size_t mb = 0; mb < f.size(); ++mb) {
    out.one_f_one_b_each = out.one_f_one_b_each && f[mb] == 1 && b[mb] == 1;
  }
  return out;
}

TEST(ScheduleGenerate, OneFOneBHoldsItsDefiningInvariantsOverTheGrid) {
  for (std::int64_t S = 1; S <= 8; ++S) {
    for (std::int64_t k = 1; k <= 24; ++k) {
      const Schedule s = make_1f1b(S, k);
      ASSERT_EQ(s.kind, ScheduleKind::OneFOneB);
      ASSERT_EQ(s.num_stages, S);
      ASSERT_EQ(s.num_microbatches, k);
      ASSERT_EQ(s.programs.size(), static_cast<std::size_t>(S));
      for (std::int64_t st = 0; st < S; ++st) {
        const RankProgram& p = s.programs[static_cast<std::size_t>(st)];
        ASSERT_EQ(p.stage, st);
        const ProgramFacts x = facts_of(p, k);
        EXPECT_TRUE(x.only_compute && x.one_f_one_b_each && x.f_before_b) << S << " " << k;
        EXPECT_TRUE(x.forwards_in_order && x.backwards_in_order) << S << " " << k;
        // Warm-up of min(S - s - 1, k) forwards, then the steady phase's first forward (when
        // micro-batches are left for it) before the first backward.
        const std::int64_t w = std::min(S - st - 1, k);
        EXPECT_EQ(x.warmup, w < k ? w + 1 : k) << S << " " << k << " stage " << st;
        EXPECT_EQ(x.peak_in_flight, std::min(S - st, k)) << S << " " << k << " stage " << st;
      }
      EXPECT_TRUE(dependencies_allow_completion(s)) << S << " " << k;
    }
  }
}

TEST(ScheduleGenerate, GPipeRunsEveryForwardThenEveryBackward) {
  for (std::int64_t S = 1; S <= 6; ++S) {
    for (std::int64_t k = 1; k <= 12; ++k) {
      const Schedule s = make_gpipe(S, k);
      ASSERT_EQ(s.kind, ScheduleKind::GPipe);
      for (const RankProgram& p : s.programs) {
        const ProgramFacts x = facts_of(p, k);
        EXPECT_TRUE(x.only_compute && x.one_f_one_b_each && x.f_before_b);
        EXPECT_TRUE(x.forwards_in_order && x.backwards_in_order);
        EXPECT_EQ(x.warmup, k);
        EXPECT_EQ(x.peak_in_flight, k);
      }
      EXPECT_TRUE(dependencies_allow_completion(s)) << S << " " << k;
    }
  }
}

TEST(ScheduleGenerate, SmallCasesMatchTheOrdersWrittenOutByHand) {
  // Megatron's figure of 1F1B with 4 stages and 6 micro-batches (PipeDream-flush).
  const Schedule s = make_1f1b(4, 6);
  EXPECT_EQ(format_schedule(s),
            "s0: F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5\n"
            "s1: F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5\n"
            "s2: F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5\n"
            "s3: F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5\n");
  // Fewer micro-batches than stages: stage 0 forwards all of them before any backward.
  EXPECT_EQ(format_schedule(make_1f1b(3, 1)), "s0: F0 B0\ns1: F0 B0\ns2: F0 B0\n");
  EXPECT_EQ(format_schedule(make_gpipe(2, 3)), "s0: F0 F1 F2 B0 B1 B2\ns1: F0 F1 F2 B0 B1 B2\n");
}

TEST(ScheduleGenerate, MakeScheduleDispatchesOnTheKind) {
  EXPECT_EQ(make_schedule(ScheduleKind::OneFOneB, 3, 5), make_1f1b(3, 5));
  EXPECT_EQ(make_schedule(ScheduleKind::GPipe, 3, 5), make_gpipe(3, 5));
  EXPECT_NE(make_1f1b(3, 5).programs, make_gpipe(3, 5).programs);
}

// The validator, an independent reader of the same rules, accepts every generated order.
TEST(ScheduleGenerate, GeneratedOrdersPassTheValidator) {
  for (std::int64_t S = 1; S <= 8; ++S) {
    for (std::int64_t k = 1; k <= 32; ++k) {
      for (auto kind : {ScheduleKind::OneFOneB, ScheduleKind::GPipe}) {
        const Schedule s = make_schedule(kind, S, k);
        const auto problems = validate_schedule(s);
        ASSERT_TRUE(problems.empty()) << S << " " << k << ": " << problems.front();
      }
    }
  }
}

}  // namespace
}  // namespace eth::generate_test
