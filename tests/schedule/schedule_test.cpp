// Schedule IR: generators over the (stages 1..8, micro-batches 1..32) grid pass the validator,
// 1F1B warm-up and in-flight counts match their formulas, lowering pairs every send with a
// receive, the text form round-trips, and broken schedules are reported (deadlock with grid).
#include "schedule/schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "core/error.h"
#include "schedule/generate.h"
#include "schedule/lower.h"
#include "schedule/validate.h"

namespace eth {
namespace {

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

bool any_contains(const std::vector<std::string>& v, const std::string& needle) {
  return std::any_of(v.begin(), v.end(),
                     [&](const std::string& x) { return x.find(needle) != std::string::npos; });
}

TEST(Schedule, GeneratorsPassTheValidatorOverTheGrid) {
  for (std::int64_t S = 1; S <= 8; ++S) {
    for (std::int64_t k = 1; k <= 32; ++k) {
      for (auto kind : {ScheduleKind::OneFOneB, ScheduleKind::GPipe}) {
        Schedule s = make_schedule(kind, S, k);
        ASSERT_TRUE(validate_schedule(s).empty()) << S << " " << k << "\n"
                                                  << join(validate_schedule(s));
        insert_p2p(s);
        std::vector<std::vector<std::int64_t>> blocks(static_cast<std::size_t>(S));
        for (std::int64_t st = 0; st < S; ++st) blocks[static_cast<std::size_t>(st)] = {st, S + st};
        append_reductions(s, blocks);
        ASSERT_TRUE(validate_schedule(s).empty()) << S << " " << k << "\n"
                                                  << join(validate_schedule(s));
      }
    }
  }
}

TEST(Schedule, OneFOneBWarmupAndInFlightFollowTheirFormulas) {
  for (std::int64_t S = 1; S <= 8; ++S) {
    for (std::int64_t k = 1; k <= 32; ++k) {
      const Schedule s = make_1f1b(S, k);
      for (const auto& p : s.programs) {
        // Warm-up: the forwards before the first backward number min(S - s - 1, k) + 1 when a
        // steady phase exists (its first forward precedes the first backward), else k.
        const auto first_b = std::find_if(p.actions.begin(), p.actions.end(), [](const Action& a) {
          return a.kind == ActionKind::Backward;
        });
        const std::int64_t warmup = std::min(S - p.stage - 1, k);
        const std::int64_t forwards_before = first_b - p.actions.begin();
        EXPECT_EQ(forwards_before, warmup < k ? warmup + 1 : k);
        // Peak in flight: warm-up plus the steady forward, capped by k: min(S - s, k).
        std::int64_t in_flight = 0, peak = 0;
        for (const auto& a : p.actions) {
          in_flight += a.kind == ActionKind::Forward ? 1 : -1;
          peak = std::max(peak, in_flight);
        }
        EXPECT_EQ(peak, std::min(S - p.stage, k));
        EXPECT_EQ(in_flight, 0);
        // Backwards run in micro-batch order on every stage.
        std::int64_t next_b = 0;
        for (const auto& a : p.actions) {
          if (a.kind == ActionKind::Backward) {
            EXPECT_EQ(a.microbatch, next_b++);
          }
        }
      }
    }
  }
}

TEST(Schedule, LoweringPairsSendsWithReceives) {
  Schedule s = make_1f1b(3, 4);
  insert_p2p(s);
  // Stage 0: no RecvActivation / SendGradient; stage 2: no SendActivation / RecvGradient; each
  // middle stage has 4 of each of the four kinds.
  auto count = [&](std::int64_t st, ActionKind k) {
    const auto& acts = s.programs[static_cast<std::size_t>(st)].actions;
    return std::count_if(acts.begin(), acts.end(), [k](const Action& a) { return a.kind == k; });
  };
  EXPECT_EQ(count(0, ActionKind::RecvActivation), 0);
  EXPECT_EQ(count(0, ActionKind::SendActivation), 4);
  EXPECT_EQ(count(0, ActionKind::RecvGradient), 4);
  EXPECT_EQ(count(0, ActionKind::SendGradient), 0);
  for (auto k : {ActionKind::RecvActivation, ActionKind::SendActivation, ActionKind::RecvGradient,
                 ActionKind::SendGradient}) {
    EXPECT_EQ(count(1, k), 4);
  }
  EXPECT_EQ(count(2, ActionKind::SendActivation), 0);
  EXPECT_EQ(count(2, ActionKind::RecvGradient), 0);
  // Stage 1 starts with RA0 F0 SA0 (warm-up of one forward).
  const auto& a1 = s.programs[1].actions;
  EXPECT_EQ(action_token(a1[0]) + " " + action_token(a1[1]) + " " + action_token(a1[2]),
            "RA0 F0 SA0");
}

TEST(Schedule, TextFormRoundTrips) {
  Schedule s = make_1f1b(4, 6);
  insert_p2p(s);
  append_reductions(s, {{0}, {1, 2}, {3}, {}});
  const std::string text = format_schedule(s);
  EXPECT_EQ(parse_schedule_text(text), s);
  EXPECT_EQ(format_schedule(make_1f1b(2, 3)), "s0: F0 F1 B0 F2 B1 B2\ns1: F0 B0 F1 B1 F2 B2\n");
}

TEST(Schedule, MalformedTextNamesLineAndToken) {
  try {
    parse_schedule_text("s0: F0 B0\ns1: F0 X0 B0\n");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "line 2");
    EXPECT_NE(std::string(e.what()).find("X0"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_schedule_text("s1: F0 B0\n"), InputError);  // must start at s0
  EXPECT_THROW(parse_schedule_text("s0: F B0\n"), InputError);   // index missing
}

TEST(Schedule, DeadlockIsReportedWithTheGrid) {
  // Stage 0 waits for the gradient of micro-batch 0 before sending its activation: stage 1
  // can never run F0, so both stages are stuck on their receive.
  Schedule s = parse_schedule_text(
      "s0: F0 RG0 SA0 B0\n"
      "s1: RA0 F0 B0 SG0\n");
  const auto problems = validate_schedule(s);
  ASSERT_TRUE(any_contains(problems, "deadlock")) << join(problems);
  EXPECT_TRUE(any_contains(problems, "RG0*")) << join(problems);
  EXPECT_TRUE(any_contains(problems, "RA0*")) << join(problems);
}

TEST(Schedule, BrokenRulesAreEachReported) {
  // Missing backward of micro-batch 1 on stage 1.
  auto p = validate_schedule(parse_schedule_text("s0: F0 F1 B0 B1\ns1: F0 B0 F1\n"));
  EXPECT_TRUE(any_contains(p, "stage 1 micro-batch 1: no Backward")) << join(p);
  // Backward before forward.
  p = validate_schedule(parse_schedule_text("s0: B0 F0\n"));
  EXPECT_TRUE(any_contains(p, "Backward before Forward")) << join(p);
  // A send without its receive.
  Schedule s = make_1f1b(2, 2);
  insert_p2p(s);
  auto& a1 = s.programs[1].actions;
  a1.erase(std::find(a1.begin(), a1.end(), Action{ActionKind::RecvActivation, 1, 1, -1}));
  p = validate_schedule(s);
  EXPECT_TRUE(any_contains(p, "SA1: no matching RecvActivation on stage 1")) << join(p);
  // GPipe's order claimed as 1F1B exceeds S - s in flight on stage 1 of 2 (k = 3 > 1).
  Schedule g = make_gpipe(2, 3);
  g.kind = ScheduleKind::OneFOneB;
  p = validate_schedule(g);
  EXPECT_TRUE(any_contains(p, "stage 1: 3 micro-batches in flight; 1F1B allows at most S - s = 1"))
      << join(p);
  // Optimizer step not last; reductions out of order.
  p = validate_schedule(parse_schedule_text("s0: F0 OPT B0 RD2 RD1\n"));
  EXPECT_TRUE(any_contains(p, "OptimizerStep must be the last action")) << join(p);
  EXPECT_TRUE(any_contains(p, "blocks must ascend")) << join(p);
  // A reduction before the last backward would post gradients still being added to.
  p = validate_schedule(parse_schedule_text("s0: F0 B0 RD0 F1 B1 OPT\n"));
  EXPECT_TRUE(any_contains(p, "RD0: ReduceGradients before the last Backward")) << join(p);
  EXPECT_TRUE(validate_schedule(parse_schedule_text("s0: F0 B0 F1 B1 RD0 OPT\n")).empty());
  // check_schedule turns problems into InputError.
  EXPECT_THROW(check_schedule(g, "test"), InputError);
  EXPECT_NO_THROW(check_schedule(make_1f1b(3, 3), "test"));
}

TEST(Schedule, DryRunOrderCatchesForwardBeforeItsInput) {
  // Compute-only: stage 1 runs F1 before F0 and B0 before F1 in a way that is consistent
  // locally but whose B order waits on a forward that never comes -> deadlock.
  auto p = validate_schedule(parse_schedule_text("s0: F0 B0 F1 B1\ns1: F1 B1 F0 B0\n"));
  EXPECT_TRUE(any_contains(p, "deadlock")) << join(p);
}

}  // namespace
}  // namespace eth
