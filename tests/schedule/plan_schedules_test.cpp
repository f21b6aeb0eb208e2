// The programs of a whole plan (schedule/plan_schedules.h): each stage reduces exactly the
// collectives one of its devices holds, after its last backward and before its optimizer step;
// and the cross-pipeline check refuses programs whose holders disagree on a collective, while
// a collective dropped by every holder is a program that runs as written.
#include "schedule/plan_schedules.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "schedule/validate.h"

namespace eth::plan_schedules_test {
namespace {

bool any_contains(const std::vector<std::string>& v, const std::string& needle) {
  return std::any_of(v.begin(), v.end(),
                     [&](const std::string& x) { return x.find(needle) != std::string::npos; });
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

// Two pipelines: (devices 0 | 1 2) with 3 micro-batches, (3 | 4) with 2; dp 2 on pipeline 0's
// second stage.
Plan two_pipelines() {
  Plan p;
  auto stage = [](std::vector<std::int64_t> devices) {
    StagePlan s;
    s.dp = static_cast<std::int64_t>(devices.size());
    s.devices = std::move(devices);
    return s;
  };
  PipelinePlan a;
  a.micro_batch_size = 2;
  a.local_batch = 6;
  a.stages = {stage({0}), stage({1, 2})};
  PipelinePlan b;
  b.micro_batch_size = 1;
  b.local_batch = 2;
  b.stages = {stage({3}), stage({4})};
  p.pipelines = {a, b};
  return p;
}

// Collectives: the first stages (0, 3), the second stages (1, 2, 4), a pair across stages of
// one pipeline (0, 2: as a tied matrix would be), and the dp pair alone (1, 2).
const CollectiveHolders kHolders = {{0, 3}, {1, 2, 4}, {0, 2}, {1, 2}};

std::vector<std::int64_t> reductions(const RankProgram& prog) {
  std::vector<std::int64_t> out;
  for (const Action& a : prog.actions) {
    if (a.kind == ActionKind::ReduceGradients) out.push_back(a.block);
  }
  return out;
}

TEST(PlanSchedules, EachStageReducesWhatItsDevicesHoldAfterItsLastBackward) {
  const Plan plan = two_pipelines();
  for (ScheduleKind kind : {ScheduleKind::OneFOneB, ScheduleKind::GPipe}) {
    const std::vector<Schedule> ss = lower_plan_schedules(plan, kind, kHolders);
    ASSERT_EQ(ss.size(), 2u);
    EXPECT_TRUE(validate_plan_schedules(plan, ss, kHolders).empty())
        << join(validate_plan_schedules(plan, ss, kHolders));
    // Read off the holder lists by hand: stage (pipeline, stage) -> collectives.
    const std::vector<std::vector<std::vector<std::int64_t>>> want = {{{0, 2}, {1, 2, 3}},
                                                                      {{0}, {1}}};
    for (std::size_t p = 0; p < 2; ++p) {
      EXPECT_EQ(ss[p].num_microbatches, plan.pipelines[p].num_microbatches());
      EXPECT_TRUE(validate_schedule(ss[p]).empty()) << join(validate_schedule(ss[p]));
      for (std::size_t s = 0; s < 2; ++s) {
        const RankProgram& prog = ss[p].programs[s];
        EXPECT_EQ(reductions(prog), want[p][s]) << "pipeline " << p << " stage " << s;
        EXPECT_EQ(prog.actions.back().kind, ActionKind::OptimizerStep);
        // Nothing but reductions between the last backward's send and the optimizer step.
        const std::size_t tail = want[p][s].size() + 1;
        for (std::size_t i = prog.actions.size() - tail; i + 1 < prog.actions.size(); ++i) {
          EXPECT_EQ(prog.actions[i].kind, ActionKind::ReduceGradients);
        }
      }
    }
  }
}

// Drops RD`block` from pipeline p's stage s.
void drop(std::vector<Schedule>& ss, std::size_t p, std::size_t s, std::int64_t block) {
  auto& acts = ss[p].programs[s].actions;
  acts.erase(std::remove_if(acts.begin(), acts.end(), [&](const Action& a) {
               return a.kind == ActionKind::ReduceGradients && a.block == block;
             }), acts.end());
}

TEST(PlanSchedules, HoldersThatDisagreeOnACollectiveAreRefused) {
  const Plan plan = two_pipelines();
  const std::vector<Schedule> lowered =
      lower_plan_schedules(plan, ScheduleKind::OneFOneB, kHolders);
  // Collective 1 dropped by pipeline 1's second stage only: devices 1 and 2 would wait for 4.
  std::vector<Schedule> ss = lowered;
  drop(ss, 1, 1, 1);
  std::vector<std::string> p = validate_plan_schedules(plan, ss, kHolders);
  EXPECT_TRUE(any_contains(p, "pipeline 1 stage 1: lacks RD1")) << join(p);
  EXPECT_EQ(p.size(), 1u) << join(p);
  // Dropped by every holder: the run does without it, as the program says.
  drop(ss, 0, 1, 1);
  EXPECT_TRUE(validate_plan_schedules(plan, ss, kHolders).empty());
  // A stage that reduces a collective none of its devices holds, and one that does not exist.
  ss = lowered;
  ss[1].programs[0].actions.insert(ss[1].programs[0].actions.end() - 1,
                                   Action{ActionKind::ReduceGradients, 0, -1, 3});
  ss[1].programs[1].actions.insert(ss[1].programs[1].actions.end() - 1,
                                   Action{ActionKind::ReduceGradients, 1, -1, 7});
  p = validate_plan_schedules(plan, ss, kHolders);
  EXPECT_TRUE(any_contains(p, "pipeline 1 stage 0 RD3: no device of the stage holds")) << join(p);
  EXPECT_TRUE(any_contains(p, "pipeline 1 stage 1 RD7: no such collective")) << join(p);
  // No optimizer step; a schedule short.
  ss = lowered;
  ss[0].programs[1].actions.pop_back();
  p = validate_plan_schedules(plan, ss, kHolders);
  EXPECT_TRUE(any_contains(p, "pipeline 0 stage 1: the program must end with one OptimizerStep"))
      << join(p);
  ss.pop_back();
  EXPECT_TRUE(any_contains(validate_plan_schedules(plan, ss, kHolders), "1 schedules for 2"));
}

}  // namespace
}  // namespace eth::plan_schedules_test
