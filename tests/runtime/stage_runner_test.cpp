// The executor alone (runtime/stage_runner.cpp), on LocalWorld threads: it hands every compute
// action of its stage's program to the compute chain in program order (less the micro-batches
// its replica holds no sample of), every ReduceGradients it joins and then the OptimizerStep to
// its StepActions in program order, the early "units done" calls only inside the replica's last
// backward from the stage's last unit down, and it runs a program as written (a reduction taken
// out is never asked for). The trainer's side and the numbers are program_execution_test.cpp's
// and equivalence_test.cpp's.
#include "runtime/stage_runner.h"

#include <gtest/gtest.h>

#include <mutex>

#include "comm/local/local_comm.h"
#include "runtime/grad_layout.h"
#include "runtime_test_util.h"

namespace eth {
namespace {

constexpr std::int64_t kSeq = 4;

// One pipeline, micro-batch 2 over a local batch of 5 (3 micro-batches, the last of one
// sample): stage 0 holds units 0-1 on device 0, stage 1 units 2-4 on devices 1 and 2 (dp 2), so
// replica 0 of stage 1 holds no sample of the last micro-batch (replica r of dp takes samples
// [r*b/dp, (r+1)*b/dp): [0, 0) of b = 1).
Plan runner_plan() {
  return test::make_plan(test::small3(), kSeq, {{2, 5, {{0, 1}, {2, 4, 2}}}});
}

struct Call {
  ActionKind kind;
  std::int64_t microbatch;
  bool operator==(const Call&) const = default;
};

// What the executor did on one rank, in order.
struct Log {
  std::vector<Call> compute;
  std::vector<std::int64_t> begun, reduced;
  std::vector<std::pair<Call, std::int64_t>> units;  // (the compute call it came in, unit)
  std::vector<double> optimizer_losses;
  std::vector<std::string> order;  // "compute", "reduce", "optimizer"
  const Call* running = nullptr;   // the compute call in progress
};

class Recording final : public ActionCompute {
 public:
  Recording(std::unique_ptr<ActionCompute> inner, Log& log) : inner_(std::move(inner)), log_(log) {}
  double run(ComputeCall& c) override {
    log_.compute.push_back({c.kind, c.microbatch});
    log_.order.push_back("compute");
    const Call now{c.kind, c.microbatch};
    log_.running = &now;
    const double s = inner_->run(c);
    log_.running = nullptr;
    return s;
  }

 private:
  std::unique_ptr<ActionCompute> inner_;
  Log& log_;
};

// Joins the even collectives only, so the executor must pass over the odd ones.
class FakeActions final : public StepActions {
 public:
  explicit FakeActions(Log& log) : log_(log) {}
  bool joins(std::int64_t block) const override { return block % 2 == 0; }
  void begin(const std::vector<std::int64_t>& blocks) override { log_.begun = blocks; }
  bool posts_early() const override { return true; }
  void units_done(float*, std::int64_t unit) override {
    ASSERT_NE(log_.running, nullptr) << "units done outside a compute call";
    log_.units.emplace_back(*log_.running, unit);
  }
  void reduce(float*, std::int64_t block, RankTimes&) override {
    log_.reduced.push_back(block);
    log_.order.push_back("reduce");
  }
  void optimizer_step(double loss, RankTimes&) override {
    log_.optimizer_losses.push_back(loss);
    log_.order.push_back("optimizer");
  }
  bool progress() override { return false; }

 private:
  Log& log_;
};

struct RankResult {
  RankPlace place;
  RankProgram program;
  Log log;
  double loss = 0;
};

// One step of `schedule` on every rank of runner_plan().
std::vector<RankResult> run_step(const Schedule& schedule) {
  const Plan plan = runner_plan();
  const std::int64_t gbs = plan.gbs;
  std::vector<std::uint16_t> tokens(static_cast<std::size_t>(gbs * (kSeq + 1)));
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<std::uint16_t>((7 * i + 3) % static_cast<std::size_t>(plan.model.vocab));
  }
  std::vector<SampleRef> batch;
  for (std::int64_t i = 0; i < gbs; ++i) batch.push_back(SampleRef{i, i * (kSeq + 1)});
  std::vector<RankResult> out(static_cast<std::size_t>(plan.num_devices()));
  LocalWorld world(static_cast<int>(plan.num_devices()));
  auto errors = run_on_threads(world, [&](Communicator comm) {
    RankResult& r = out[static_cast<std::size_t>(comm.rank())];
    r.place = place_ranks(plan)[static_cast<std::size_t>(comm.rank())];
    ModelState state(plan.model, plan_layout(plan, r.place.device, AggregationMode::Block));
    state.init(5);
    StageRunnerConfig rc;
    rc.seq_len = kSeq;
    rc.layout = &state.layout();
    rc.wrap_compute = [&r](std::unique_ptr<ActionCompute> inner) {
      return std::make_unique<Recording>(std::move(inner), r.log);
    };
    StageRunner runner(plan, r.place, comm, rc, schedule);
    r.program = runner.program();
    StepInput in;
    in.batch = batch;
    in.tokens = TokenSpan(tokens);
    in.loss_scale = 1.0 / static_cast<double>(gbs * kSeq);
    FakeActions actions(r.log);
    RankTimes times;
    state.zero_grads();
    r.loss = runner.run(state, in, times, &actions);
  });
  test::expect_no_errors(errors);
  return out;
}

// The compute calls a rank's program asks for: its F and B in order, less the last
// micro-batch on the replica that holds none of its samples.
std::vector<Call> expected_compute(const RankResult& r) {
  std::vector<Call> want;
  for (const Action& a : r.program.actions) {
    if (a.kind != ActionKind::Forward && a.kind != ActionKind::Backward) continue;
    if (r.place.stage == 1 && r.place.dp_rank == 0 && a.microbatch == 2) continue;
    want.push_back({a.kind, a.microbatch});
  }
  return want;
}

std::vector<std::int64_t> expected_reductions(const RankProgram& program) {
  std::vector<std::int64_t> want;
  for (const Action& a : program.actions) {
    if (a.kind == ActionKind::ReduceGradients && a.block % 2 == 0) want.push_back(a.block);
  }
  return want;
}

TEST(StageRunner, RunsEveryActionOfItsProgramInOrder) {
  const Plan plan = runner_plan();
  // Tensor-wise: stage 1's pair reduces one collective per tensor; stage 0's units have one
  // holder and nothing to reduce.
  const Schedule schedule = lower_plan(plan, AggregationMode::Tensor).front();
  const std::vector<RankResult> ranks = run_step(schedule);
  for (const RankResult& r : ranks) {
    SCOPED_TRACE("device " + std::to_string(r.place.device));
    const Log& log = r.log;
    EXPECT_EQ(log.compute, expected_compute(r));
    const std::vector<std::int64_t> rd = expected_reductions(r.program);
    EXPECT_EQ(rd.empty(), r.place.stage == 0);
    EXPECT_EQ(log.begun, rd);
    EXPECT_EQ(log.reduced, rd);
    // Every compute call, then the reductions, then one optimizer step with run()'s loss.
    ASSERT_EQ(log.optimizer_losses.size(), 1u);
    EXPECT_EQ(log.optimizer_losses.front(), r.loss);
    EXPECT_EQ(log.order.back(), "optimizer");
    const std::size_t n = log.compute.size();
    for (std::size_t i = 0; i < log.order.size(); ++i) {
      EXPECT_EQ(log.order[i], i < n ? "compute" : i + 1 < log.order.size() ? "reduce" : "optimizer");
    }
    // The head's stage reports a loss, the other none.
    if (r.place.stage == 1) {
      EXPECT_GT(r.loss, 0.0);
    } else {
      EXPECT_EQ(r.loss, 0.0);
    }
    // Units done: inside the replica's last backward only, each of the stage's units once, from
    // its last unit down.
    const StagePlan& st = plan.pipelines[0].stages[static_cast<std::size_t>(r.place.stage)];
    const Call last_backward{ActionKind::Backward,
                             r.place.stage == 1 && r.place.dp_rank == 0 ? 1 : 2};
    ASSERT_EQ(log.units.size(), static_cast<std::size_t>(st.last_unit - st.first_unit + 1));
    for (std::size_t i = 0; i < log.units.size(); ++i) {
      EXPECT_EQ(log.units[i].first, last_backward);
      EXPECT_EQ(log.units[i].second, st.last_unit - static_cast<std::int64_t>(i));
    }
  }
}

TEST(StageRunner, RunsAProgramAsWritten) {
  // Stage 1's first even reduction taken out of its program: never begun nor asked for.
  const Plan plan = runner_plan();
  Schedule schedule = lower_plan(plan, AggregationMode::Tensor).front();
  auto& acts = schedule.programs[1].actions;
  const auto dropped = std::find_if(acts.begin(), acts.end(), [](const Action& a) {
    return a.kind == ActionKind::ReduceGradients && a.block % 2 == 0;
  });
  ASSERT_NE(dropped, acts.end());
  const std::int64_t block = dropped->block;
  acts.erase(dropped);
  for (const RankResult& r : run_step(schedule)) {
    SCOPED_TRACE("device " + std::to_string(r.place.device));
    EXPECT_EQ(r.log.reduced, expected_reductions(r.program));
    EXPECT_EQ(r.log.begun, expected_reductions(r.program));
    EXPECT_EQ(std::count(r.log.reduced.begin(), r.log.reduced.end(), block), 0);
    EXPECT_EQ(r.log.reduced.size() + 1,
              r.place.stage == 1 ? expected_reductions(lower_plan(plan, AggregationMode::Tensor)
                                                           .front()
                                                           .programs[1])
                                           .size()
                                 : 1u);
    EXPECT_EQ(r.log.optimizer_losses.size(), 1u);
  }
}

}  // namespace
}  // namespace eth
