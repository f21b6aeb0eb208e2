// The validator refuses a schedule broken in each way it checks, naming the stage and action,
// and reports every problem rather than the first; deadlocks come with the step x stage grid.
// Each broken schedule is written by hand (or is a generated one with one edit), so what is
// wrong with it is known here without the validator.
#include "schedule/validate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "core/error.h"
#include "schedule/generate.h"
#include "schedule/lower.h"
#include "schedule/schedule.h"

namespace eth::validate_test {
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

Schedule lowered_1f1b(std::int64_t S, std::int64_t k) {
  Schedule s = make_1f1b(S, k);
  insert_p2p(s);
  return s;
}

TEST(ScheduleValidate, DeadlockIsReportedWithTheGrid) {
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

TEST(ScheduleValidate, BrokenRulesAreEachReported) {
  // Missing backward of micro-batch 1 on stage 1.
  auto p = validate_schedule(parse_schedule_text("s0: F0 F1 B0 B1\ns1: F0 B0 F1\n"));
  EXPECT_TRUE(any_contains(p, "stage 1 micro-batch 1: no Backward")) << join(p);
  // Backward before forward.
  p = validate_schedule(parse_schedule_text("s0: B0 F0\n"));
  EXPECT_TRUE(any_contains(p, "Backward before Forward")) << join(p);
  // A send without its receive.
  Schedule s = lowered_1f1b(2, 2);
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
}

TEST(ScheduleValidate, StagesAndMicroBatchesOutOfPlaceAreNamed) {
  Schedule s = make_1f1b(2, 2);
  s.programs[1].stage = 0;  // program 1 claims to be stage 0
  auto p = validate_schedule(s);
  EXPECT_TRUE(any_contains(p, "program 1 names stage 0")) << join(p);
  s = make_1f1b(2, 2);
  s.programs[0].actions[0].stage = 1;  // an action of stage 1 in stage 0's program
  p = validate_schedule(s);
  EXPECT_TRUE(any_contains(p, "program 0 holds stage 1 F0")) << join(p);
  s = make_1f1b(1, 2);
  s.programs[0].actions.push_back({ActionKind::Forward, 0, 2, -1});  // k = 2: only 0 and 1
  p = validate_schedule(s);
  EXPECT_TRUE(any_contains(p, "stage 0 F2: micro-batch outside [0, 2)")) << join(p);
  s = make_1f1b(1, 2);
  s.programs[0].actions.push_back({ActionKind::Backward, 0, 1, -1});
  p = validate_schedule(s);
  EXPECT_TRUE(any_contains(p, "stage 0 B1: appears more than once")) << join(p);
  // A schedule with no programs, or fewer programs than stages.
  Schedule empty;
  p = validate_schedule(empty);
  EXPECT_TRUE(any_contains(p, "needs >= 1 stage")) << join(p);
  s = make_1f1b(3, 2);
  s.programs.pop_back();
  p = validate_schedule(s);
  EXPECT_TRUE(any_contains(p, "3 stages, 2 programs")) << join(p);
}

TEST(ScheduleValidate, TransfersMissingMisplacedOrUnexpectedAreNamed) {
  // One transfer present makes every one required: drop stage 0's SA0.
  Schedule s = lowered_1f1b(2, 2);
  auto& a0 = s.programs[0].actions;
  a0.erase(std::find(a0.begin(), a0.end(), Action{ActionKind::SendActivation, 0, 0, -1}));
  auto p = validate_schedule(s);
  EXPECT_TRUE(any_contains(p, "stage 0 micro-batch 0: no SendActivation")) << join(p);
  EXPECT_TRUE(any_contains(p, "RA0: no matching SendActivation on stage 0")) << join(p);
  // A receive after the forward it feeds.
  p = validate_schedule(parse_schedule_text("s0: F0 SA0 RG0 B0\ns1: F0 RA0 B0 SG0\n"));
  EXPECT_TRUE(any_contains(p, "stage 1 micro-batch 0: RecvActivation after its compute"))
      << join(p);
  // A send before the backward it carries.
  p = validate_schedule(parse_schedule_text("s0: F0 SA0 RG0 B0\ns1: RA0 F0 SG0 B0\n"));
  EXPECT_TRUE(any_contains(p, "stage 1 micro-batch 0: SendGradient before its compute"))
      << join(p);
  // The first stage receives no activation: there is no stage before it.
  s = lowered_1f1b(2, 1);
  s.programs[0].actions.insert(s.programs[0].actions.begin(),
                               Action{ActionKind::RecvActivation, 0, 0, -1});
  p = validate_schedule(s);
  EXPECT_TRUE(any_contains(p, "stage 0 micro-batch 0: unexpected RecvActivation")) << join(p);
  // A send twice.
  s = lowered_1f1b(2, 1);
  s.programs[0].actions.insert(s.programs[0].actions.begin() + 2,
                               Action{ActionKind::SendActivation, 0, 0, -1});
  p = validate_schedule(s);
  EXPECT_TRUE(any_contains(p, "stage 0 SA0: appears more than once")) << join(p);
}

TEST(ScheduleValidate, DryRunOrderCatchesForwardBeforeItsInput) {
  // Compute-only: stage 1 runs F1 before F0 and B0 before F1 in a way that is consistent
  // locally but whose B order waits on a forward that never comes -> deadlock.
  auto p = validate_schedule(parse_schedule_text("s0: F0 B0 F1 B1\ns1: F1 B1 F0 B0\n"));
  EXPECT_TRUE(any_contains(p, "deadlock")) << join(p);
}

TEST(ScheduleValidate, CheckScheduleThrowsEveryProblemNamingTheSource) {
  // One problem: one InputError naming the source.
  try {
    check_schedule(parse_schedule_text("s0: B0 F0\n"), "sched.txt");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.source(), "sched.txt");
    EXPECT_EQ(std::string(e.what()),
              "[schedule] sched.txt: stage 0 micro-batch 0: Backward before Forward");
  }
  // Two problems: both in one InputErrors.
  try {
    check_schedule(parse_schedule_text("s0: F0 OPT B0 RD2 RD1\n"), "two.txt");
    FAIL() << "expected InputErrors";
  } catch (const InputErrors& e) {
    EXPECT_GE(e.errors().size(), 2u);
    for (const auto& one : e.errors()) EXPECT_EQ(one.source(), "two.txt");
  }
  EXPECT_NO_THROW(check_schedule(make_1f1b(3, 3), "test"));
}

}  // namespace
}  // namespace eth::validate_test
