// The simulator against closed forms and a hand-worked example: 1F1B and GPipe makespans and
// bubble fractions over a grid, the in-flight memory of 1F1B, a two-pipeline heterogeneous plan
// with collectives worked out by hand (with and without overlap), and deadlock reporting.
#include <gtest/gtest.h>

#include <algorithm>

#include "cost/predictor.h"
#include "schedule/generate.h"
#include "schedule/lower.h"
#include "schedule/schedule.h"
#include "sim/simulator.h"
#include "sim/timeline_check.h"
#include "sim_fixture.h"

namespace eth {
namespace {

using test::make_plan;
using test::PipeSpec;
using test::sim_model;
using test::stage_cost;
using test::uniform_costs;

// One device per stage, S stages over units 0..S+1 (the first stage takes the extra units).
Plan chain_plan(std::int64_t S, std::int64_t k) {
  ModelSpec m = sim_model(S);  // S + 2 units
  PipeSpec p{1, k, {}};
  for (std::int64_t s = 0; s < S; ++s) {
    p.stages.push_back({s == 0 ? 0 : s + 1, s == S - 1 ? S + 1 : s + 1});
  }
  return make_plan(m, {p});
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size() && i < 20; ++i) s += v[i] + "\n";
  return s;
}

TEST(Simulator, UniformOneFOneBMatchesTheClosedFormOverTheGrid) {
  // Times exact in nanoseconds, so the makespan is exact: (S - 1 + k)(f + b).
  const std::pair<double, double> fbs[] = {{1.0, 2.0}, {1.5, 3.0}, {2.0, 2.0}, {0.25, 1.75}};
  for (std::int64_t S = 1; S <= 8; ++S) {
    for (std::int64_t k = 1; k <= 32; ++k) {
      for (auto [f, b] : fbs) {
        const Plan plan = chain_plan(S, k);
        const auto costs = uniform_costs(plan, f, b);
        const SimResult r = simulate(plan, costs, {}, SimOptions{});
        const TimeNs expected = (S - 1 + k) * (ms_to_ns(f) + ms_to_ns(b));
        ASSERT_EQ(ms_to_ns(r.iteration_ms), expected) << "S=" << S << " k=" << k << " f=" << f;
        const double bubble = static_cast<double>(S - 1) / static_cast<double>(k + S - 1);
        for (const auto& d : r.devices) {
          ASSERT_NEAR(d.bubble_fraction, bubble, 1e-12) << "S=" << S << " k=" << k;
          ASSERT_NEAR(d.idle_fraction, bubble, 1e-12);  // no optimizer, no collectives
        }
      }
    }
  }
}

TEST(Simulator, UniformGPipeMatchesItsClosedForm) {
  // GPipe, free communication: the forward wave ends on the last stage at (S - 1 + k) f, its
  // backwards follow back to back and the backward wave reaches stage 0 after (S - 1 + k) b.
  for (std::int64_t S = 1; S <= 8; ++S) {
    for (std::int64_t k = 1; k <= 32; k += 3) {
      const Plan plan = chain_plan(S, k);
      SimOptions o;
      o.schedule = ScheduleKind::GPipe;
      const SimResult r = simulate(plan, uniform_costs(plan, 1.0, 2.5), {}, o);
      EXPECT_EQ(ms_to_ns(r.iteration_ms), (S - 1 + k) * (ms_to_ns(1.0) + ms_to_ns(2.5)));
    }
  }
}

TEST(Simulator, OneFOneBMemoryHoldsMinOfStagesLeftAndMicrobatches) {
  // Activations of A bytes live from their forward's start to their backward's end; 1F1B keeps
  // min(S - s, k) of them on stage s (0-based), GPipe all k.
  const double A = 1000, base = 50000;
  for (std::int64_t S = 1; S <= 6; ++S) {
    for (std::int64_t k = 1; k <= 9; ++k) {
      const Plan plan = chain_plan(S, k);
      const auto costs = uniform_costs(plan, 1.0, 2.0, 0.125, 0.5, A, base);
      for (auto kind : {ScheduleKind::OneFOneB, ScheduleKind::GPipe}) {
        SimOptions o;
        o.schedule = kind;
        const SimResult r = simulate(plan, costs, {}, o);
        for (const auto& st : r.stages) {
          const std::int64_t held = kind == ScheduleKind::GPipe ? k : std::min(S - st.stage, k);
          EXPECT_EQ(st.peak_in_flight, held) << S << " " << k;
          EXPECT_DOUBLE_EQ(st.peak_memory_bytes, base + static_cast<double>(held) * A);
          EXPECT_DOUBLE_EQ(st.memory.back().bytes, base);  // everything freed at the end
        }
        EXPECT_TRUE(check_timeline(plan, costs, {}, r, o).empty());
      }
    }
  }
}

// The hand-worked example: two pipelines cutting a 6-unit model differently.
//   pipeline 0: mbs 2, batch 5 -> k = 3, the last micro-batch holds 1 sample.
//     stage 0 = device 0, units 0-2: full F 2, B 1+1+2 = 4, send 0.5; last F 1, B 0.5+0.5+1, send
//     0.25 stage 1 = device 1, units 3-5: full F 3, B 2+2+2 = 6;             last F 1.5, B 1+1+1
//   pipeline 1: mbs 1, batch 2 -> k = 2 (last = full).
//     stage 0 = device 2, units 0-3: F 5, B 1+3+3+3 = 10, send 1
//     stage 1 = device 3, units 4-5: F 2, B 2+2 = 4
//   optimizer: 0.3, 0.2 (pipeline 0), 0.4, 0.1 (pipeline 1).
// Block-wise collectives, in the global (descending unit) order:
//   c0 units 4-5 over {1, 3}: 1 ms;  c1 unit 3 over {1, 2}: 0.5 ms;  c2 units 0-2 over {0, 2}: 2
//   ms.
struct HandExample {
  Plan plan;
  std::vector<PipelineCosts> costs;
  std::vector<SimCollective> colls;
};

HandExample hand_example() {
  HandExample h;
  h.plan =
      make_plan(sim_model(4), {PipeSpec{2, 5, {{0, 2}, {3, 5}}}, PipeSpec{1, 2, {{0, 3}, {4, 5}}}});
  PipelineCosts p0, p1;
  p0.full = {stage_cost(2, {1, 1, 2}, 0.5), stage_cost(3, {2, 2, 2}, 0)};
  p0.last = {stage_cost(1, {0.5, 0.5, 1}, 0.25), stage_cost(1.5, {1, 1, 1}, 0)};
  p0.memory.resize(2);
  p0.optimizer_ms = {0.3, 0.2};
  p1.full = {stage_cost(5, {1, 3, 3, 3}, 1), stage_cost(2, {2, 2}, 0)};
  p1.last = p1.full;
  p1.memory.resize(2);
  p1.optimizer_ms = {0.4, 0.1};
  h.costs = {p0, p1};
  h.colls = {SimCollective{{1, 3}, 4, 1.0, 0}, SimCollective{{1, 2}, 3, 0.5, 0},
             SimCollective{{0, 2}, 0, 2.0, 0}};
  return h;
}

const TimelineEntry* find_entry(const SimResult& r, std::int64_t device, ActionKind kind,
                                std::int64_t mb, std::int64_t block = -1) {
  for (const auto& e : r.timeline.entries) {
    if (e.device == device && e.kind == kind && e.microbatch == mb && e.block == block) return &e;
  }
  return nullptr;
}

void expect_interval(const SimResult& r, std::int64_t device, ActionKind kind, std::int64_t mb,
                     double start_ms, double end_ms, std::int64_t block = -1) {
  const TimelineEntry* e = find_entry(r, device, kind, mb, block);
  ASSERT_NE(e, nullptr) << "device " << device << " " << action_kind_name(kind) << " " << mb;
  EXPECT_EQ(e->start, ms_to_ns(start_ms))
      << "device " << device << " " << action_kind_name(kind) << mb;
  EXPECT_EQ(e->end, ms_to_ns(end_ms)) << "device " << device << " " << action_kind_name(kind) << mb;
}

TEST(Simulator, HandWorkedHeterogeneousTwoPipelineExample) {
  const HandExample h = hand_example();
  // The collectives above are the ones cost/ derives for this plan (holders and order).
  const auto derived = aggregation_collectives(h.plan, AggregationMode::Block);
  std::vector<std::vector<std::int64_t>> groups;
  for (const auto& b : derived) {
    if (b.holders.size() >= 2) groups.push_back(b.holders);
  }
  EXPECT_EQ(groups, (std::vector<std::vector<std::int64_t>>{{1, 3}, {1, 2}, {0, 2}}));

  const SimResult r = simulate(h.plan, h.costs, h.colls, SimOptions{});
  using K = ActionKind;
  // Pipeline 0 (1F1B, S = 2, k = 3). Stage 0: F0 F1 B0 F2 B1 B2; stage 1: F0 B0 F1 B1 F2 B2.
  expect_interval(r, 0, K::Forward, 0, 0, 2);
  expect_interval(r, 0, K::SendActivation, 0, 2, 2.5);
  expect_interval(r, 0, K::Forward, 1, 2, 4);
  expect_interval(r, 0, K::SendActivation, 1, 4, 4.5);  // after F1, link free since 2.5
  expect_interval(r, 1, K::Forward, 0, 2.5, 5.5);       // activation 0 arrived at 2.5
  expect_interval(r, 1, K::Backward, 0, 5.5, 11.5);
  expect_interval(r, 1, K::SendGradient, 0, 11.5, 12);  // costs stage 0's send, 0.5
  expect_interval(r, 1, K::Forward, 1, 11.5, 14.5);
  expect_interval(r, 0, K::Backward, 0, 12, 16);
  expect_interval(r, 0, K::Forward, 2, 16, 17);            // last micro-batch: F 1
  expect_interval(r, 0, K::SendActivation, 2, 17, 17.25);  // last send 0.25
  expect_interval(r, 1, K::Backward, 1, 14.5, 20.5);
  expect_interval(r, 1, K::SendGradient, 1, 20.5, 21);
  expect_interval(r, 1, K::Forward, 2, 20.5, 22);  // F 1.5
  expect_interval(r, 0, K::Backward, 1, 21, 25);
  expect_interval(r, 1, K::Backward, 2, 22, 25);  // B 3
  expect_interval(r, 1, K::SendGradient, 2, 25, 25.25);
  expect_interval(r, 0, K::Backward, 2, 25.25, 27.25);  // B 2
  // Pipeline 1 (S = 2, k = 2). Stage 0: F0 F1 B0 B1; stage 1: F0 B0 F1 B1.
  expect_interval(r, 2, K::Forward, 0, 0, 5);
  expect_interval(r, 2, K::Forward, 1, 5, 10);
  expect_interval(r, 3, K::Forward, 0, 6, 8);  // send 0 over [5, 6]
  expect_interval(r, 3, K::Backward, 0, 8, 12);
  expect_interval(r, 3, K::Forward, 1, 12, 14);  // send 1 over [10, 11]
  expect_interval(r, 3, K::Backward, 1, 14, 18);
  expect_interval(r, 2, K::Backward, 0, 13, 23);  // gradient 0 over [12, 13]
  expect_interval(r, 2, K::Backward, 1, 23, 33);  // gradient 1 over [18, 19]
  // Collectives. A holder is ready when its last backward has passed the block's lowest unit:
  //   c0: device 1 at 22 + (units 5, 4: 1 + 1) = 24; device 3 at 14 + (2 + 2) = 18 -> [24, 25]
  //   c1: device 1 at 22 + 3 = 25 (after c0 too); device 2 at 23 + 3 (unit 3) = 26 -> [26, 26.5]
  //   c2: device 0 at 25.25 + 2 = 27.25; device 2 at 23 + 10 = 33 -> [33, 35]
  expect_interval(r, 1, K::ReduceGradients, -1, 24, 25, 0);
  expect_interval(r, 3, K::ReduceGradients, -1, 24, 25, 0);
  expect_interval(r, 1, K::ReduceGradients, -1, 26, 26.5, 1);
  expect_interval(r, 2, K::ReduceGradients, -1, 26, 26.5, 1);
  expect_interval(r, 0, K::ReduceGradients, -1, 33, 35, 2);
  expect_interval(r, 2, K::ReduceGradients, -1, 33, 35, 2);
  // Optimizer after each device's collectives: 35 + 0.3, 26.5 + 0.2, 35 + 0.4, 25 + 0.1.
  expect_interval(r, 0, K::OptimizerStep, -1, 35, 35.3);
  expect_interval(r, 1, K::OptimizerStep, -1, 26.5, 26.7);
  expect_interval(r, 2, K::OptimizerStep, -1, 35, 35.4);
  expect_interval(r, 3, K::OptimizerStep, -1, 25, 25.1);
  EXPECT_NEAR(r.iteration_ms, 35.4, 1e-3);  // to the microsecond
  EXPECT_EQ(ms_to_ns(r.iteration_ms), ms_to_ns(35.4));
  ASSERT_EQ(r.pipeline_ms.size(), 2u);
  EXPECT_EQ(ms_to_ns(r.pipeline_ms[0]), ms_to_ns(27.25));
  EXPECT_EQ(ms_to_ns(r.pipeline_ms[1]), ms_to_ns(33));
  // Device 2 computes F 5 + 5, B 10 + 10 and the optimizer 0.4 = 30.4 ms of 35.4.
  EXPECT_NEAR(r.devices[2].busy_fraction, 30.4 / 35.4, 1e-9);
  // Its bubble over the pipeline span [0, 33]: (33 - 30) / 33.
  EXPECT_NEAR(r.devices[2].bubble_fraction, 3.0 / 33.0, 1e-9);
  EXPECT_TRUE(check_timeline(h.plan, h.costs, h.colls, r, SimOptions{}).empty())
      << join(check_timeline(h.plan, h.costs, h.colls, r, SimOptions{}));
}

TEST(Simulator, HandWorkedExampleWithoutOverlap) {
  // Collectives wait for every backward of the plan: the last ends at 33 (device 2).
  //   c0 [33, 34]; c1: device 1 busy until 34 -> [34, 34.5]; c2: device 2 busy until 34.5 ->
  //   [34.5, 36.5]. Optimizer: device 0 36.5 + 0.3, device 2 36.5 + 0.4 = 36.9 (the end).
  const HandExample h = hand_example();
  SimOptions o;
  o.overlap = false;
  const SimResult r = simulate(h.plan, h.costs, h.colls, o);
  expect_interval(r, 3, ActionKind::ReduceGradients, -1, 33, 34, 0);
  expect_interval(r, 2, ActionKind::ReduceGradients, -1, 34, 34.5, 1);
  expect_interval(r, 0, ActionKind::ReduceGradients, -1, 34.5, 36.5, 2);
  expect_interval(r, 1, ActionKind::OptimizerStep, -1, 34.5, 34.7);
  EXPECT_EQ(ms_to_ns(r.iteration_ms), ms_to_ns(36.9));
  EXPECT_TRUE(check_timeline(h.plan, h.costs, h.colls, r, o).empty());
}

TEST(Simulator, ASharedNodeRunsOneCollectiveAtATimeAsThePredictorSays) {
  // Two identical pipelines cut at the same unit on one node whose 4 devices share one memory
  // system: pairs {0, 2} and {1, 3} are disjoint, yet run one after the other.
  ClusterSpec c;
  c.nodes = {{"host", 4}};
  DeviceType t{"host", 1, 1, 8, std::nullopt, 1.0};
  t.node_shared_bandwidth_gbps = 8;
  c.device_types["host"] = t;
  c.custom_types = {"host"};
  const PipeSpec pipe{1, 2, {{0, 2, 1, 1, "host"}, {3, 5, 1, 1, "host"}}};
  const Plan plan = make_plan(sim_model(4), {pipe, pipe});
  const auto colls = make_collectives(plan, c, AggregationMode::Block, 0.05, 4.0);
  ASSERT_EQ(colls.size(), 2u);
  for (const SimCollective& coll : colls) EXPECT_EQ(coll.shared_nodes, std::vector<std::int64_t>{0});
  SimOptions o;
  o.overlap = false;  // both start after the pipelines: the aggregation alone
  const auto costs = uniform_costs(plan, 1, 2);
  const SimResult r = simulate(plan, costs, colls, o);
  const double pipelines = *std::max_element(r.pipeline_ms.begin(), r.pipeline_ms.end());
  PredictOptions po;
  po.collective_latency_ms = 0.05;
  const double predicted = predict_aggregation(plan, c, AggregationMode::Block, po).end_ms;
  EXPECT_NEAR(r.iteration_ms - pipelines, predicted, 1e-5);
  EXPECT_NEAR(predicted, colls[0].duration_ms + colls[1].duration_ms, 1e-9);
  EXPECT_TRUE(check_timeline(plan, costs, colls, r, o).empty());
}

TEST(Simulator, DeadlockReportsTheStuckGrid) {
  // Stage 0 waits for the gradient of micro-batch 0 before it sends the activation stage 1
  // needs: both wait forever on a receive.
  const Plan plan = chain_plan(2, 1);
  const auto costs = uniform_costs(plan, 1, 2, 0.5);
  Schedule broken = parse_schedule_text("s0: F0 RG0 SA0 B0 OPT\ns1: RA0 F0 B0 SG0 OPT\n");
  try {
    simulate(plan, costs, {}, {broken}, SimOptions{});
    FAIL() << "expected SimDeadlock";
  } catch (const SimDeadlock& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("pipeline 0"), std::string::npos) << what;
    EXPECT_NE(what.find("RG0*"), std::string::npos) << what;
    EXPECT_NE(what.find("RA0*"), std::string::npos) << what;
  }
  // A collective one holder never joins is a deadlock too (its partner waits at OPT).
  const Plan two = make_plan(sim_model(4), {PipeSpec{1, 1, {{0, 5}}}, PipeSpec{1, 1, {{0, 5}}}});
  const auto c2 = uniform_costs(two, 1, 1);
  std::vector<SimCollective> colls{SimCollective{{0, 1}, 0, 1.0, 0}};
  std::vector<Schedule> scheds = build_schedules(two, ScheduleKind::OneFOneB, colls);
  auto& acts = scheds[1].programs[0].actions;
  acts.erase(std::remove_if(acts.begin(), acts.end(),
                            [](const Action& a) { return a.kind == ActionKind::ReduceGradients; }),
             acts.end());
  EXPECT_THROW(simulate(two, c2, colls, scheds, SimOptions{}), SimDeadlock);
}

TEST(Simulator, TransfersQueueOnSharedLinks) {
  // S = 2, k = 2, F = B = 1, send 3. Stage 0: F0 [0, 1], activation 0 over [1, 4], F1 [1, 2],
  // activation 1 waits for the link: [4, 7]. Stage 1: F0 [4, 5], B0 [5, 6], gradient 0 [6, 9],
  // F1 [7, 8] once activation 1 arrived, B1 [8, 9], gradient 1 waits for stage 1's outgoing
  // link: [9, 12]. Stage 0: B0 [9, 10], B1 [12, 13]. End 13.
  const Plan plan = chain_plan(2, 2);
  const auto costs = uniform_costs(plan, 1, 1, 3);
  const SimResult r = simulate(plan, costs, {}, SimOptions{});
  expect_interval(r, 0, ActionKind::SendActivation, 1, 4, 7);
  expect_interval(r, 1, ActionKind::SendGradient, 0, 6, 9);
  expect_interval(r, 1, ActionKind::SendGradient, 1, 9, 12);
  expect_interval(r, 0, ActionKind::Backward, 1, 12, 13);
  EXPECT_EQ(ms_to_ns(r.iteration_ms), ms_to_ns(13));
  EXPECT_TRUE(check_timeline(plan, costs, {}, r, SimOptions{}).empty());
}

}  // namespace
}  // namespace eth
