// Reading a measured trace back and comparing it with the simulation: the phases of a
// hand-written trace and of a hand-worked 1F1B simulation, the per-stage errors, refusals of a
// trace of another plan or format, and the comparison SVG and Chrome trace.
#include "sim/measured.h"

#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "sim/trace.h"
#include "sim_fixture.h"
#include "test_util.h"

namespace eth {
namespace {

using test::make_plan;
using test::PipeSpec;

// One pipeline of two stages (devices 0 and 1), micro-batch 1, local batch 2: k = 2.
Plan two_stage_plan() { return make_plan(test::sim_model(4), {PipeSpec{1, 2, {{0, 2}, {3, 5}}}}); }

Json slice(const std::string& cat, std::int64_t rank, double ts_us, double dur_us,
           std::int64_t step, std::int64_t mb = -1) {
  Json args{{"step", step}};
  if (mb >= 0) args["microbatch"] = mb;
  return Json{{"name", cat}, {"cat", cat}, {"ph", "X"}, {"pid", rank}, {"tid", 0},
              {"ts", ts_us}, {"dur", dur_us},  {"args", args}};
}

// A trace as eth train --trace writes it, with two steps of hand-chosen times (microseconds).
Json hand_trace(const Plan& plan) {
  Json ranks = Json::array();
  for (std::int64_t r = 0; r < 2; ++r) {
    ranks.push_back(Json{{"rank", r}, {"device", r}, {"pipeline", 0}, {"stage", r}});
  }
  Json ev = Json::array();
  ev.push_back(Json{{"name", "process_name"}, {"ph", "M"}, {"pid", 0}, {"args", {{"name", "r0"}}}});
  for (std::int64_t step : {5, 6}) {
    const double o = step == 5 ? 1000 : 20000;  // step origins; step 6 starts on rank 1 first
    ev.push_back(slice("step", 0, o + (step == 6 ? 10 : 0), 9000, step));
    ev.push_back(slice("step", 1, o + (step == 6 ? 0 : 50), 8000, step));
    // rank 0: F0 F1 B0 B1, then sync and the optimizer (norm + update).
    ev.push_back(slice("forward", 0, o + 100, 1000, step, 0));
    ev.push_back(slice("forward", 0, o + 1100, 1200, step, 1));
    ev.push_back(slice("recv_gradient", 0, o + 2300, 700, step, 0));
    ev.push_back(slice("backward", 0, o + 3000, 2000, step, 0));
    ev.push_back(slice("backward", 0, o + 5000, 2500, step, 1));
    ev.push_back(slice("sync", 0, o + 7500, 400, step));
    ev.push_back(slice("optimizer", 0, o + 7900, 100, step));
    ev.push_back(slice("optimizer", 0, o + 8000, 300, step));
    // rank 1: waits for the activation first.
    ev.push_back(slice("recv_activation", 1, o + 60, 1040, step, 0));
    ev.push_back(slice("forward", 1, o + 1100, 900, step, 0));
    ev.push_back(slice("stretch", 1, o + 1500, 500, step));
    ev.push_back(slice("send_wait", 1, o + 7000, 30, step));
  }
  Json other{{"format", "eth-measured-trace"}, {"version", 1}, {"plan", plan_to_json(plan)},
             {"aggregation", "block"},         {"emulated_slowdown", {{"A100", 3.0}}},
             {"precision", "bf16"},            {"ranks", ranks}};
  return Json{{"otherData", other}, {"traceEvents", ev}};
}

TEST(Measured, ReadsStepsFromTheirOriginAndSumsPhases) {
  const Plan plan = two_stage_plan();
  const MeasuredRun run = measured_from_json(hand_trace(plan), plan, "t.json");
  EXPECT_EQ(run.aggregation, "block");
  EXPECT_EQ(run.precision, Precision::Bf16);
  EXPECT_EQ(run.slowdown.at("A100"), 3.0);
  ASSERT_EQ(run.steps.size(), 2u);
  EXPECT_EQ(run.steps[0].step, 5);
  // Step 5's origin is rank 0's start (1000 us); rank 0 ends at 9000 us after it.
  EXPECT_EQ(run.steps[0].iteration, 9'000'000);
  // Step 6's origin is rank 1's start; rank 0 starts 10 us later and ends at 9010 us.
  EXPECT_EQ(run.steps[1].iteration, 9'010'000);
  // Step 4 was not traced, so step 5 has no period; step 6 was done on every rank at 29010 us
  // (rank 0: 20010 + 9000), step 5 at 10000 us (rank 0: 1000 + 9000; rank 1 ended at 9050).
  EXPECT_EQ(run.steps[0].period, 0);
  EXPECT_EQ(run.steps[1].period, 19'010'000);
  EXPECT_EQ(run.steps[0].iteration_or_period(), 9'000'000);
  const PhaseTimes r0 = measured_phase_times(run.steps[0], 0);
  EXPECT_DOUBLE_EQ(r0.forward_ms, 2.2);
  EXPECT_DOUBLE_EQ(r0.backward_ms, 4.5);
  EXPECT_DOUBLE_EQ(r0.wait_ms, 0.7);
  EXPECT_DOUBLE_EQ(r0.sync_ms, 0.4);
  EXPECT_DOUBLE_EQ(r0.optimizer_ms, 0.4);
  EXPECT_DOUBLE_EQ(r0.iteration_ms, 9.0);
  const PhaseTimes r1 = measured_phase_times(run.steps[1], 1);
  EXPECT_DOUBLE_EQ(r1.forward_ms, 0.9);
  EXPECT_DOUBLE_EQ(r1.wait_ms, 1.04 + 0.03);  // the receive and the send drain
  EXPECT_DOUBLE_EQ(r1.iteration_ms, 8.0);
  EXPECT_EQ(run.steps[1].stretch.size(), 1u);
}

TEST(Measured, SimulatedPhasesOfAHandWorked1F1B) {
  // f = 1, b = 2, free communication, optimizer 0.5: stage 0 runs F0 [0,1] F1 [1,2], waits for
  // B0's gradient until 4, B0 [4,6], B1 [7,9]; stage 1 F0 [1,2] B0 [2,4] F1 [4,5] B1 [5,7].
  const Plan plan = two_stage_plan();
  const SimResult sim =
      simulate(plan, test::uniform_costs(plan, 1.0, 2.0, 0.0, 0.5), {}, SimOptions{});
  const PhaseTimes d0 = simulated_phase_times(sim, 0);
  EXPECT_NEAR(d0.forward_ms, 2, 1e-9);
  EXPECT_NEAR(d0.backward_ms, 4, 1e-9);
  EXPECT_NEAR(d0.wait_ms, 9 - 6, 1e-9);
  EXPECT_NEAR(d0.sync_ms, 0, 1e-9);
  EXPECT_NEAR(d0.optimizer_ms, 0.5, 1e-9);
  EXPECT_NEAR(d0.iteration_ms, 9.5, 1e-9);
  const PhaseTimes d1 = simulated_phase_times(sim, 1);
  EXPECT_NEAR(d1.wait_ms, 7 - 6, 1e-9);
  EXPECT_NEAR(d1.iteration_ms, 7.5, 1e-9);
}

TEST(Measured, ComparisonAveragesStepsAndReportsRelativeErrors) {
  const Plan plan = two_stage_plan();
  const MeasuredRun run = measured_from_json(hand_trace(plan), plan, "t.json");
  const SimResult sim =
      simulate(plan, test::uniform_costs(plan, 1.0, 2.0, 0.0, 0.5), {}, SimOptions{});
  const MeasuredComparison c = compare_measured(plan, sim, run);
  EXPECT_EQ(c.steps, (std::vector<std::int64_t>{5, 6}));
  // Step 5 by its span, step 6 by its period (the gap between the two steps counts).
  EXPECT_NEAR(c.measured_iteration_ms, (9.0 + 19.01) / 2, 1e-12);
  EXPECT_NEAR(c.simulated_iteration_ms, 9.5, 1e-9);
  ASSERT_EQ(c.stages.size(), 2u);
  // Both steps of rank 0 are alike: forward 2.2 ms measured against 2 simulated.
  EXPECT_NEAR(c.stages[0].measured.forward_ms, 2.2, 1e-12);
  EXPECT_NEAR(relative_error(c.stages[0].simulated.forward_ms, c.stages[0].measured.forward_ms),
              (2.0 - 2.2) / 2.2, 1e-12);
  // Rank 1's step 5 starts 50 us after the origin: its iterations are 8.05 and 8.0 ms.
  EXPECT_NEAR(c.stages[1].measured.iteration_ms, (8.05 + 8.0) / 2, 1e-12);
  EXPECT_EQ(relative_error(0, 0), 0);
  EXPECT_TRUE(std::isinf(relative_error(1, 0)));
}

TEST(Measured, RefusesAnotherPlanOrFormat) {
  const Plan plan = two_stage_plan();
  Json doc = hand_trace(plan);
  const Plan other = make_plan(test::sim_model(4), {PipeSpec{1, 2, {{0, 1}, {2, 5}}}});
  std::string e = test::error_of([&] { measured_from_json(doc, other, "t.json"); });
  EXPECT_NE(e.find("otherData.plan.pipelines"), std::string::npos) << e;
  EXPECT_NE(e.find("t.json"), std::string::npos) << e;
  doc["otherData"]["format"] = "chrome";
  e = test::error_of([&] { measured_from_json(doc, plan, "t.json"); });
  EXPECT_NE(e.find("eth-measured-trace"), std::string::npos) << e;
  Json no_step = hand_trace(plan);
  Json kept = Json::array();
  for (const Json& ev : no_step["traceEvents"]) {
    if (ev.value("cat", "") != "step") kept.push_back(ev);
  }
  no_step["traceEvents"] = kept;
  e = test::error_of([&] { measured_from_json(no_step, plan, "t.json"); });
  EXPECT_NE(e.find("no \"step\" event"), std::string::npos) << e;
}

TEST(Measured, MedianStepAndComparisonPictures) {
  const Plan plan = two_stage_plan();
  const MeasuredRun run = measured_from_json(hand_trace(plan), plan, "t.json");
  EXPECT_EQ(median_step(run).step, 5);  // 9.0 ms is the lower middle of {9.0, 9.01}
  const SimResult sim =
      simulate(plan, test::uniform_costs(plan, 1.0, 2.0, 0.0, 0.5), {}, SimOptions{});
  const std::string svg = comparison_svg(plan, sim, run.steps[0]);
  EXPECT_NE(svg.find("p0 s1 dev 1 simulated"), std::string::npos);
  EXPECT_NE(svg.find("p0 s1 dev 1 measured"), std::string::npos);
  EXPECT_NE(svg.find("blocked on a neighbour"), std::string::npos);
  const Json both = Json::parse(comparison_trace_json(plan, sim, run.steps[0]));
  std::size_t sim_x = 0, measured_x = 0;
  for (const Json& ev : both.at("traceEvents")) {
    if (ev.at("ph") != "X") continue;
    (ev.at("pid") == 0 ? sim_x : measured_x) += 1;
  }
  EXPECT_EQ(sim_x, sim.timeline.entries.size());
  EXPECT_EQ(measured_x, run.steps[0].timeline.entries.size());
}

}  // namespace
}  // namespace eth
