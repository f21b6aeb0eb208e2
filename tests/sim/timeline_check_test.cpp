// The timeline checker against a timeline written out by hand: a two-stage pipeline (stage 0 on
// devices 0 and 1, stage 1 on device 2), two micro-batches, one gradient collective and one
// weight gather, every interval placed here from the costs. The checker accepts it, and refuses
// it broken in each way it checks, each time naming the device, micro-batch or collective.
#include "sim/timeline_check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "sim/sim_fixture.h"
#include "sim/simulator.h"

namespace eth::timeline_check_test {
namespace {

using K = ActionKind;

struct Case {
  Plan plan;
  std::vector<PipelineCosts> costs;
  std::vector<SimCollective> collectives;
  SimResult result;
  SimOptions options;
  std::vector<std::string> check() const {
    return check_timeline(plan, costs, collectives, result, options);
  }
  std::vector<TimelineEntry>& entries() { return result.timeline.entries; }
  void add(std::int64_t dev, K kind, std::int64_t mb, double start_ms, double end_ms,
           std::int64_t block = -1) {
    const std::int64_t stage = dev == 2 ? 1 : 0;
    entries().push_back(
        {dev, 0, stage, kind, mb, block, ms_to_ns(start_ms), ms_to_ns(end_ms)});
  }
  std::vector<TimelineEntry>::iterator find(std::int64_t dev, K kind, std::int64_t mb,
                                            std::int64_t block) {
    auto it = std::find_if(entries().begin(), entries().end(), [&](const TimelineEntry& e) {
      return e.device == dev && e.kind == kind && e.microbatch == mb && e.block == block;
    });
    if (it == entries().end()) {
      ADD_FAILURE() << "the test names no entry of device " << dev;
    }
    return it;
  }
  void remove(std::int64_t dev, K kind, std::int64_t mb, std::int64_t block = -1) {
    const auto it = find(dev, kind, mb, block);
    if (it != entries().end()) entries().erase(it);
  }
  void move(std::int64_t dev, K kind, std::int64_t mb, double start_ms, double end_ms,
            std::int64_t block = -1) {
    const auto it = find(dev, kind, mb, block);
    if (it == entries().end()) return;
    it->start = ms_to_ns(start_ms);
    it->end = ms_to_ns(end_ms);
  }
};

// Costs (ms): forward 1 on both stages; backward 2, split over stage 0's units 0..2 as 0.5, 0.5,
// 1 and stage 1's units 3..5 as 1, 0.5, 0.5; activation and gradient transfers 0.5; optimizer
// 0.25. The collective of devices 0 and 1 is ready once their last backward has passed unit 2
// (ready_unit 2): units run last to first, so 1 ms into B1 [8, 10], at 9; it takes 1. The
// weight gather takes 0.5 after the optimizer step.
Case good_case() {
  Case c;
  const ModelSpec m = test::sim_model(4);  // units 0..5
  c.plan = test::make_plan(m, {{1, 2, {{0, 2, 1, 2}, {3, 5}}}});
  PipelineCosts pc;
  pc.full = {test::stage_cost(1, {0.5, 0.5, 1.0}, 0.5), test::stage_cost(1, {1.0, 0.5, 0.5}, 0)};
  pc.last = pc.full;
  pc.memory.resize(2);
  pc.optimizer_ms = {0.25, 0.25};
  c.costs = {pc};
  c.collectives = {SimCollective{{0, 1}, 2, 1.0, 0, {}}};
  c.options.overlap = true;
  c.options.weight_gathers = {SimCollective{{0, 1}, 0, 0.5, 0, {}}};
  for (std::int64_t d : {0, 1}) {
    c.add(d, K::Forward, 0, 0, 1);
    c.add(d, K::SendActivation, 0, 1, 1.5);
    c.add(d, K::Forward, 1, 1, 2);
    c.add(d, K::SendActivation, 1, 2, 2.5);
    c.add(d, K::RecvGradient, 0, 4.5, 5);
    c.add(d, K::Backward, 0, 5, 7);
    c.add(d, K::RecvGradient, 1, 7.5, 8);
    c.add(d, K::Backward, 1, 8, 10);
    c.add(d, K::ReduceGradients, -1, 9, 10, 0);
    c.add(d, K::OptimizerStep, -1, 10, 10.25);
    c.add(d, K::ReduceGradients, -1, 10.25, 10.75, 1);  // the gather: block 1 + index 0
  }
  c.add(2, K::RecvActivation, 0, 1, 1.5);
  c.add(2, K::Forward, 0, 1.5, 2.5);
  c.add(2, K::RecvActivation, 1, 2, 2.5);
  c.add(2, K::Backward, 0, 2.5, 4.5);
  c.add(2, K::SendGradient, 0, 4.5, 5);
  c.add(2, K::Forward, 1, 4.5, 5.5);
  c.add(2, K::Backward, 1, 5.5, 7.5);
  c.add(2, K::SendGradient, 1, 7.5, 8);
  c.add(2, K::OptimizerStep, -1, 7.5, 7.75);
  c.result.iteration_ms = 10.75;
  return c;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

TEST(TimelineCheck, AcceptsTheTimelineWrittenOutFromTheCosts) {
  const Case c = good_case();
  EXPECT_TRUE(c.check().empty()) << join(c.check());
}

TEST(TimelineCheck, RefusesATimelineBrokenInEachWayItChecks) {
  const std::string s0d0 = "device 0 (pipeline 0 stage 0)", s0d1 = "device 1 (pipeline 0 stage 0)",
                    s1 = "device 2 (pipeline 0 stage 1)";
  struct Broken {
    const char* what;
    std::function<void(Case&)> edit;
    std::string expect;
  };
  const std::vector<Broken> cases{
      {"compute overlap", [](Case& c) { c.move(2, K::Forward, 1, 4, 5); },
       s1 + " compute: [2500000 ns, 4500000 ns) overlaps [4000000 ns, 5000000 ns)"},
      {"sends overlap", [](Case& c) { c.move(2, K::SendGradient, 1, 4.75, 5.25); },
       s1 + " outgoing link: [4500000 ns, 5000000 ns) overlaps"},
      {"receives overlap", [](Case& c) { c.move(2, K::RecvActivation, 1, 1.25, 1.75); },
       s1 + " incoming link: [1000000 ns, 1500000 ns) overlaps"},
      {"forward length", [](Case& c) { c.move(2, K::Forward, 0, 1.5, 2.4); },
       s1 + " micro-batch 0: forward length"},
      {"backward length", [](Case& c) { c.move(0, K::Backward, 1, 8, 9.9); },
       s0d0 + " micro-batch 1: backward length"},
      {"backward before forward", [](Case& c) { c.move(2, K::Backward, 0, 2, 4); },
       s1 + " micro-batch 0: backward before its forward ended"},
      {"forward before activation", [](Case& c) { c.move(2, K::Forward, 0, 1.25, 2.25); },
       s1 + " micro-batch 0: forward before its activation arrived"},
      {"no activation received", [](Case& c) { c.remove(2, K::RecvActivation, 0); },
       s1 + " micro-batch 0: no activation received"},
      {"no gradient sent", [](Case& c) { c.remove(2, K::SendGradient, 1); },
       s1 + " micro-batch 1: no gradient sent"},
      {"gradient sent early", [](Case& c) { c.move(2, K::SendGradient, 0, 4, 4.5); },
       s1 + " micro-batch 0: gradient sent before backward ended"},
      {"no activation sent", [](Case& c) { c.remove(1, K::SendActivation, 0); },
       s0d1 + " micro-batch 0: no activation sent"},
      {"activation sent early", [](Case& c) { c.move(0, K::SendActivation, 1, 1.75, 2.25); },
       s0d0 + " micro-batch 1: activation sent before forward ended"},
      {"activation send length", [](Case& c) { c.move(0, K::SendActivation, 0, 1, 1.75); },
       s0d0 + " micro-batch 0: activation send length"},
      {"receive differs from send", [](Case& c) { c.move(2, K::RecvActivation, 1, 2.25, 2.75); },
       s0d0 + " micro-batch 1: the next stage's receive differs from the send"},
      {"gradient receive differs", [](Case& c) { c.move(1, K::RecvGradient, 1, 7.25, 7.75); },
       s0d1 + " micro-batch 1: the gradient receive differs from the next stage's send"},
      {"gradient transfer length",
       [](Case& c) {
         c.move(2, K::SendGradient, 0, 4.5, 4.75);
         for (std::int64_t d : {0, 1}) c.move(d, K::RecvGradient, 0, 4.5, 4.75);
       },
       s0d0 + " micro-batch 0: gradient transfer length"},
      {"no gradient received", [](Case& c) { c.remove(0, K::RecvGradient, 1); },
       s0d0 + " micro-batch 1: no gradient received"},
      {"backward before gradient", [](Case& c) { c.move(0, K::Backward, 0, 4.75, 6.75); },
       s0d0 + " micro-batch 0: backward before its gradient arrived"},
      {"two forwards", [](Case& c) { c.add(2, K::Forward, 0, 8, 9); },
       s1 + " micro-batch 0: 2 forwards and 1 backwards"},
      {"micro-batch out of range", [](Case& c) { c.add(2, K::Forward, 2, 8, 9); },
       "device 2: micro-batch 2 out of range"},
      {"a device not in the plan", [](Case& c) { c.add(7, K::Forward, 0, 0, 1); },
       "device 7: not a device of the plan"},
      {"interval ends first", [](Case& c) { c.move(2, K::OptimizerStep, -1, 7.75, 7.5); },
       "device 2: an interval ends before it starts"},
      {"two optimizer steps", [](Case& c) { c.add(2, K::OptimizerStep, -1, 7.75, 8); },
       s1 + ": more than one optimizer step"},
      {"optimizer before collectives", [](Case& c) { c.move(0, K::OptimizerStep, -1, 9.75, 10); },
       s0d0 + ": optimizer step before its collectives ended"},
      {"optimizer before backward", [](Case& c) { c.move(2, K::OptimizerStep, -1, 7.25, 7.5); },
       s1 + ": optimizer step before backward ended"},
      {"optimizer length", [](Case& c) { c.move(2, K::OptimizerStep, -1, 7.5, 8); },
       s1 + ": optimizer length"},
      {"collective missing", [](Case& c) { c.remove(1, K::ReduceGradients, -1, 0); },
       "collective 0 on device 1: missing"},
      {"collective holders disagree",
       [](Case& c) { c.move(1, K::ReduceGradients, -1, 9.25, 10.25, 0); },
       "collective 0 on device 1: holders disagree on its interval"},
      {"collective length",
       [](Case& c) {
         for (std::int64_t d : {0, 1}) c.move(d, K::ReduceGradients, -1, 9, 9.5, 0);
       },
       "collective 0 on device 0: length"},
      {"collective before gradients are final",
       [](Case& c) {
         for (std::int64_t d : {0, 1}) c.move(d, K::ReduceGradients, -1, 8.75, 9.75, 0);
       },
       "collective 0 on device 0: starts at 8750000 ns before the holder's gradients are final "
       "at 9000000 ns"},
      {"no overlap: collective before every backward ended",
       [](Case& c) { c.options.overlap = false; },
       "collective 0 on device 0: starts at 9000000 ns before the holder's gradients are final "
       "at 10000000 ns"},
      {"collective twice", [](Case& c) { c.add(0, K::ReduceGradients, -1, 11, 12, 0); },
       "device 0: collective 0 twice"},
      {"collectives overlap", [](Case& c) { c.add(0, K::ReduceGradients, -1, 9.5, 10, 0); },
       s0d0 + " collectives: [9000000 ns, 10000000 ns) overlaps"},
      {"gather missing", [](Case& c) { c.remove(1, K::ReduceGradients, -1, 1); },
       "weight gather 0 on device 1: missing"},
      {"gather holders disagree",
       [](Case& c) { c.move(0, K::ReduceGradients, -1, 10.5, 11, 1); },
       "weight gather 0 on device 1: holders disagree on its interval"},
      {"gather length",
       [](Case& c) {
         for (std::int64_t d : {0, 1}) c.move(d, K::ReduceGradients, -1, 10.25, 10.5, 1);
       },
       "weight gather 0 on device 0: length"},
      {"gather before the step",
       [](Case& c) {
         for (std::int64_t d : {0, 1}) c.move(d, K::ReduceGradients, -1, 10, 10.5, 1);
       },
       "weight gather 0 on device 0: starts before the holder's optimizer step ended"},
      {"gather twice", [](Case& c) { c.add(1, K::ReduceGradients, -1, 11, 11.5, 1); },
       "device 1: weight gather 0 twice"},
      {"iteration time", [](Case& c) { c.result.iteration_ms = 11; },
       "iteration time 11000000 ns is not the last end 10750000 ns"},
  };
  for (const Broken& b : cases) {
    Case c = good_case();
    b.edit(c);
    const auto problems = c.check();
    const bool found = std::any_of(problems.begin(), problems.end(), [&](const std::string& p) {
      return p.find(b.expect) != std::string::npos;
    });
    EXPECT_TRUE(found) << b.what << ": expected \"" << b.expect << "\" among\n" << join(problems);
  }
}

// The iteration time may differ from the last end by the 1 ns of rounding ms to ns, no more.
TEST(TimelineCheck, IterationTimeToleratesOneNanosecondOfRounding) {
  Case c = good_case();
  c.result.iteration_ms = 10.75 + 1e-6;  // 1 ns later
  EXPECT_TRUE(c.check().empty()) << join(c.check());
  c.result.iteration_ms = 10.75 + 2e-6;
  EXPECT_FALSE(c.check().empty());
}

}  // namespace
}  // namespace eth::timeline_check_test
