// The lowered program is the whole truth of a distributed step (issue 27): every rank posts
// exactly the gradient collectives its stage's program names and it holds, in the program's
// order, in all three aggregation modes and with the sharded optimizer; a program without a
// collective runs without it (its holders keep their own gradients); and programs that cannot
// run as written are refused before any work, naming what is wrong.
#include <gtest/gtest.h>

#include <map>
#include <mutex>

#include "plan/sharding.h"
#include "runtime/grad_layout.h"
#include "runtime_test_util.h"
#include "sim/simulator.h"

namespace eth::program_execution_test {
namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kSeq = 8;

// Pipeline A: units 0-1 on a dp pair (devices 0, 1), 2-4 on device 2. Pipeline B: 0-2 on
// device 3, 3-4 on device 4.
Plan base_plan() {
  return test::make_plan(test::small3(), kSeq,
                         {{2, 6, {{0, 1, 2}, {2, 4}}}, {1, 2, {{0, 2}, {3, 4}}}});
}

Plan sharded_plan() {
  const std::map<std::int64_t, double> free{{0, 3e9}, {1, 1e9}, {2, 5e9}, {3, 2e9}, {4, 1.5e9}};
  return with_optimizer_sharding(base_plan(), OptimizerSharding::Memory, free);
}

// Holders of the collectives of `mode` with two or more holders: the programs' numbering.
std::vector<std::vector<std::int64_t>> holders(const Plan& plan, AggregationMode mode) {
  std::vector<std::vector<std::int64_t>> out;
  for (const GradBlock& b : aggregation_collectives(plan, mode)) {
    if (b.holders.size() >= 2) out.push_back(b.holders);
  }
  return out;
}

struct RankStep {
  RankPlace place;
  std::vector<std::int64_t> posted;
  std::vector<float> grads;
  ParamLayout layout;
};

// One step of `dc` on every rank; per rank what it posted and its gradients after the step.
std::map<std::int64_t, RankStep> one_step(DistTrainConfig dc, const fs::path& dir) {
  dc.train = test::train_config(dc.plan.model, test::synthetic_file(dir, 4000, 32), dc.plan.gbs,
                                kSeq, 1);
  LocalWorld world(static_cast<int>(dc.plan.num_devices()));
  std::mutex mu;
  std::map<std::int64_t, RankStep> out;
  auto errors = run_on_threads(world, [&](Communicator comm) {
    omp_set_num_threads(1);
    DistributedTrainer t(dc, comm);
    t.step();
    const auto n = static_cast<std::size_t>(t.state().layout().grad_numel());
    std::lock_guard lock(mu);
    out.emplace(t.place().device, RankStep{t.place(), t.last_collectives(),
                                           {t.state().grads(), t.state().grads() + n},
                                           t.state().layout()});
  });
  test::expect_no_errors(errors);
  return out;
}

// The ReduceGradients of device d's stage program whose collective d holds, in program order.
std::vector<std::int64_t> program_reductions(const std::vector<Schedule>& schedules,
                                             const RankPlace& p,
                                             const std::vector<std::vector<std::int64_t>>& hs) {
  std::vector<std::int64_t> out;
  const RankProgram& prog = schedules[static_cast<std::size_t>(p.pipeline)]
                                .programs[static_cast<std::size_t>(p.stage)];
  for (const Action& a : prog.actions) {
    if (a.kind != ActionKind::ReduceGradients) continue;
    const auto& h = hs[static_cast<std::size_t>(a.block)];
    if (std::binary_search(h.begin(), h.end(), p.device)) out.push_back(a.block);
  }
  return out;
}

TEST(ProgramExecution, TheRuntimeRunsTheProgramsTheSimulatorPrices) {
  const Plan plan = base_plan();
  for (AggregationMode mode :
       {AggregationMode::Block, AggregationMode::Tensor, AggregationMode::Device}) {
    const std::vector<SimCollective> colls =
        make_collectives(plan, test::cpu_cluster(plan.num_devices()), mode);
    EXPECT_EQ(lower_plan(plan, mode), build_schedules(plan, ScheduleKind::OneFOneB, colls))
        << aggregation_mode_name(mode);
  }
}

TEST(ProgramExecution, EveryRankPostsItsProgramsCollectivesInOrder) {
  const fs::path dir = test::temp_dir("program_posts");
  for (bool sharded : {false, true}) {
    for (AggregationMode mode :
         {AggregationMode::Block, AggregationMode::Tensor, AggregationMode::Device}) {
      SCOPED_TRACE(std::string(aggregation_mode_name(mode)) + (sharded ? " sharded" : ""));
      DistTrainConfig dc;
      dc.plan = sharded ? sharded_plan() : base_plan();
      dc.aggregation = mode;
      const std::vector<Schedule> schedules = lower_plan(dc.plan, mode);
      const auto hs = holders(dc.plan, mode);
      for (const auto& [device, r] : one_step(dc, dir)) {
        const std::vector<std::int64_t> want = program_reductions(schedules, r.place, hs);
        EXPECT_FALSE(want.empty()) << "device " << device;
        EXPECT_EQ(r.posted, want) << "device " << device;
      }
    }
  }
}

TEST(ProgramExecution, ACollectiveNoProgramNamesIsNotRun) {
  // Tensor-wise, take out of every program the first collective of the dp pair (devices 0 and 1,
  // with device 3): its holders keep their own gradients, which differ (other samples), while
  // every collective still in the programs leaves the pair bitwise equal.
  const fs::path dir = test::temp_dir("program_drop");
  DistTrainConfig dc;
  dc.plan = base_plan();
  dc.aggregation = AggregationMode::Tensor;
  const auto blocks = aggregation_collectives(dc.plan, dc.aggregation);
  std::vector<GradBlock> collectives;
  for (const GradBlock& b : blocks) {
    if (b.holders.size() >= 2) collectives.push_back(b);
  }
  std::int64_t dropped = -1;
  for (std::size_t c = 0; c < collectives.size() && dropped < 0; ++c) {
    if (collectives[c].holders == std::vector<std::int64_t>{0, 1, 3}) {
      dropped = static_cast<std::int64_t>(c);
    }
  }
  ASSERT_GE(dropped, 0);
  dc.schedules = lower_plan(dc.plan, dc.aggregation);
  for (Schedule& s : dc.schedules) {
    for (RankProgram& p : s.programs) {
      std::erase(p.actions, Action{ActionKind::ReduceGradients, p.stage, -1, dropped});
    }
  }
  const std::map<std::int64_t, RankStep> ranks = one_step(dc, dir);
  for (const auto& [device, r] : ranks) {
    EXPECT_EQ(std::count(r.posted.begin(), r.posted.end(), dropped), 0) << "device " << device;
  }
  const RankStep& a = ranks.at(0);
  const RankStep& b = ranks.at(1);
  std::int64_t same = 0;
  for (std::size_t c = 0; c < collectives.size(); ++c) {
    if (collectives[c].holders != std::vector<std::int64_t>{0, 1, 3}) continue;
    const std::vector<PackRun> ra = collective_runs(dc.plan, a.layout, 0, collectives[c]);
    const std::vector<PackRun> rb = collective_runs(dc.plan, b.layout, 1, collectives[c]);
    ASSERT_EQ(ra.size(), 1u);
    ASSERT_EQ(rb.size(), 1u);
    ASSERT_EQ(ra.front().count, rb.front().count);
    const auto* ga = a.grads.data() + ra.front().offset;
    const auto* gb = b.grads.data() + rb.front().offset;
    const bool equal = std::equal(ga, ga + ra.front().count, gb);
    if (static_cast<std::int64_t>(c) == dropped) {
      EXPECT_FALSE(equal) << "the dropped collective's gradients were summed anyway";
    } else {
      EXPECT_TRUE(equal) << "collective " << c;
      ++same;
    }
  }
  EXPECT_GT(same, 0);  // the check above compared a reduced collective too
}

// Every rank's error from building a trainer over `schedules`.
std::vector<std::string> refusals(const std::vector<Schedule>& schedules, const fs::path& dir) {
  DistTrainConfig dc;
  dc.plan = base_plan();
  dc.train = test::train_config(dc.plan.model, test::synthetic_file(dir, 4000, 32), dc.plan.gbs,
                                kSeq, 1);
  dc.schedules = schedules;
  LocalWorld world(static_cast<int>(dc.plan.num_devices()));
  std::vector<std::string> out;
  std::mutex mu;
  auto errors = run_on_threads(world, [&](Communicator comm) {
    try {
      DistributedTrainer t(dc, comm);
    } catch (const InputError& e) {
      EXPECT_EQ(e.path(), "schedules");
      std::lock_guard lock(mu);
      out.push_back(e.what());
    }
  });
  test::expect_no_errors(errors);
  return out;
}

TEST(ProgramExecution, ProgramsThatCannotRunAsWrittenAreRefusedBeforeAnyWork) {
  const fs::path dir = test::temp_dir("program_refused");
  const std::vector<Schedule> lowered = lower_plan(base_plan(), AggregationMode::Block);
  auto expect_refused = [&](const std::vector<Schedule>& s, const std::string& why) {
    const std::vector<std::string> errs = refusals(s, dir);
    ASSERT_EQ(errs.size(), 5u) << why;  // every rank, before any collective
    for (const std::string& e : errs) EXPECT_NE(e.find(why), std::string::npos) << e;
  };
  // Pipeline B's stage 0 (device 3) without its first reduction: its other holders would wait.
  std::vector<Schedule> s = lowered;
  auto& b0 = s[1].programs[0].actions;
  const auto rd = std::find_if(b0.begin(), b0.end(), [](const Action& a) {
    return a.kind == ActionKind::ReduceGradients;
  });
  ASSERT_NE(rd, b0.end());
  const Action first = *rd;
  b0.erase(rd);
  expect_refused(s, "pipeline 1 stage 0: lacks RD" + std::to_string(first.block));
  // The same reduction moved before the stage's last backward.
  s = lowered;
  auto& moved = s[1].programs[0].actions;
  moved.erase(std::find(moved.begin(), moved.end(), first));
  moved.insert(moved.begin() + 1, first);
  expect_refused(s, "ReduceGradients before the last Backward");
  // Two reductions swapped: holders would meet them in opposite orders.
  s = lowered;
  bool swapped = false;
  for (Schedule& sch : s) {
    for (RankProgram& p : sch.programs) {
      auto& acts = p.actions;
      const auto it = std::adjacent_find(acts.begin(), acts.end(), [](const Action& x, const Action& y) {
        return x.kind == ActionKind::ReduceGradients && y.kind == ActionKind::ReduceGradients;
      });
      if (swapped || it == acts.end()) continue;
      std::iter_swap(it, it + 1);
      swapped = true;
    }
  }
  ASSERT_TRUE(swapped) << "no stage with two reductions";
  expect_refused(s, "blocks must ascend");
}

}  // namespace
}  // namespace eth::program_execution_test
