// The lowering passes against the schedule they came from: insert_p2p adds, around each compute
// action and nowhere else, exactly the transfers its stage's position calls for, and leaves the
// compute order as it was; append_reductions adds the given blocks, in order, then one
// OptimizerStep, after everything else; has_p2p sees any transfer.
#include "schedule/lower.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "schedule/generate.h"
#include "schedule/schedule.h"

namespace eth::lower_test {
namespace {

bool is_transfer(ActionKind k) {
  return k == ActionKind::SendActivation || k == ActionKind::RecvActivation ||
         k == ActionKind::SendGradient || k == ActionKind::RecvGradient;
}

std::vector<Action> compute_only(const RankProgram& p) {
  std::vector<Action> out;
  for (const Action& a : p.actions) {
    if (!is_transfer(a.kind)) out.push_back(a);
  }
  return out;
}

TEST(ScheduleLower, TransfersSurroundEachComputeAsTheStagePositionAsks) {
  for (std::int64_t S = 1; S <= 6; ++S) {
    for (std::int64_t k = 1; k <= 8; ++k) {
      for (auto kind : {ScheduleKind::OneFOneB, ScheduleKind::GPipe}) {
        const Schedule before = make_schedule(kind, S, k);
        Schedule s = before;
        insert_p2p(s);
        for (std::int64_t st = 0; st < S; ++st) {
          const auto& orig = before.programs[static_cast<std::size_t>(st)];
          const auto& p = s.programs[static_cast<std::size_t>(st)];
          // The compute order is untouched.
          EXPECT_EQ(compute_only(p), orig.actions);
          // Rebuild the expected program from the definition and compare whole.
          std::vector<Action> want;
          for (const Action& a : orig.actions) {
            const std::int64_t mb = a.microbatch;
            if (a.kind == ActionKind::Forward) {
              if (st > 0) want.push_back({ActionKind::RecvActivation, st, mb, -1});
              want.push_back(a);
              if (st < S - 1) want.push_back({ActionKind::SendActivation, st, mb, -1});
            } else {
              if (st < S - 1) want.push_back({ActionKind::RecvGradient, st, mb, -1});
              want.push_back(a);
              if (st > 0) want.push_back({ActionKind::SendGradient, st, mb, -1});
            }
          }
          EXPECT_EQ(p.actions, want) << S << " " << k << " stage " << st;
          // Counts: 4 transfers per micro-batch in the middle, 2 at either end, none alone.
          const auto transfers = std::count_if(p.actions.begin(), p.actions.end(),
                                               [](const Action& a) { return is_transfer(a.kind); });
          const std::int64_t per_mb = S == 1 ? 0 : (st == 0 || st == S - 1 ? 2 : 4);
          EXPECT_EQ(transfers, per_mb * k);
        }
        EXPECT_EQ(has_p2p(s), S > 1);
        EXPECT_FALSE(has_p2p(before));
      }
    }
  }
}

TEST(ScheduleLower, EverySendHasItsReceiveOnTheNeighbour) {
  Schedule s = make_1f1b(4, 5);
  insert_p2p(s);
  auto holds = [&](std::int64_t st, ActionKind kind, std::int64_t mb) {
    const auto& acts = s.programs[static_cast<std::size_t>(st)].actions;
    return std::count(acts.begin(), acts.end(), Action{kind, st, mb, -1});
  };
  for (std::int64_t st = 0; st < 4; ++st) {
    for (std::int64_t mb = 0; mb < 5; ++mb) {
      if (st + 1 < 4) {
        EXPECT_EQ(holds(st, ActionKind::SendActivation, mb), 1);
        EXPECT_EQ(holds(st + 1, ActionKind::RecvActivation, mb), 1);
        EXPECT_EQ(holds(st, ActionKind::RecvGradient, mb), 1);
        EXPECT_EQ(holds(st + 1, ActionKind::SendGradient, mb), 1);
      }
    }
  }
  EXPECT_EQ(holds(0, ActionKind::RecvActivation, 0), 0);
  EXPECT_EQ(holds(0, ActionKind::SendGradient, 0), 0);
  EXPECT_EQ(holds(3, ActionKind::SendActivation, 0), 0);
  EXPECT_EQ(holds(3, ActionKind::RecvGradient, 0), 0);
  // Written out: stage 1 of 3 with 2 micro-batches (1F1B warm-up of one forward).
  Schedule small = make_1f1b(3, 2);
  insert_p2p(small);
  EXPECT_EQ(format_schedule(small),
            "s0: F0 SA0 F1 SA1 RG0 B0 RG1 B1\n"
            "s1: RA0 F0 SA0 RA1 F1 SA1 RG0 B0 SG0 RG1 B1 SG1\n"
            "s2: RA0 F0 B0 SG0 RA1 F1 B1 SG1\n");
}

TEST(ScheduleLower, ReductionsThenTheOptimizerStepCloseEveryProgram) {
  Schedule s = make_gpipe(3, 2);
  insert_p2p(s);
  const Schedule before = s;
  const std::vector<std::vector<std::int64_t>> blocks{{0, 3}, {}, {1, 2, 5}};
  append_reductions(s, blocks);
  for (std::size_t st = 0; st < 3; ++st) {
    const auto& p = s.programs[st].actions;
    const auto& orig = before.programs[st].actions;
    ASSERT_EQ(p.size(), orig.size() + blocks[st].size() + 1);
    EXPECT_TRUE(std::equal(orig.begin(), orig.end(), p.begin()));
    for (std::size_t i = 0; i < blocks[st].size(); ++i) {
      EXPECT_EQ(p[orig.size() + i],
                (Action{ActionKind::ReduceGradients, static_cast<std::int64_t>(st), -1,
                        blocks[st][i]}));
    }
    EXPECT_EQ(p.back(), (Action{ActionKind::OptimizerStep, static_cast<std::int64_t>(st), -1, -1}));
  }
  EXPECT_EQ(format_schedule(s).substr(0, format_schedule(s).find('\n')),
            "s0: F0 SA0 F1 SA1 RG0 B0 RG1 B1 RD0 RD3 OPT");
}

}  // namespace
}  // namespace eth::lower_test
