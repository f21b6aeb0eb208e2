// validate_plan: every rule of docs/plan-format.md is broken once here, and the exact path and
// message are checked. The base plan is valid; each test changes one thing.
#include "plan/validate.h"

#include <gtest/gtest.h>

#include <random>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "plan/plan.h"

namespace eth {
namespace {

using Violations = std::vector<PlanViolation>;

// Node 0: fast devices 0..3; node 1: slow devices 4..7; node 2: fast devices 8, 9.
ClusterSpec test_cluster() {
  const Json j = Json::parse(R"({"name": "test", "nodes": [
      {"device_type": "fast", "devices": 4}, {"device_type": "slow", "devices": 4},
      {"device_type": "fast", "devices": 2}],
    "device_types": {
      "fast": {"tflops": 2, "memory_gb": 8, "intra_node_bandwidth_gbps": 80},
      "slow": {"tflops": 1, "memory_gb": 4, "intra_node_bandwidth_gbps": 80},
      "spare": {"tflops": 1, "memory_gb": 4, "intra_node_bandwidth_gbps": 80}}})");
  return parse_cluster(JsonCursor(j, {"cluster", "test", ""}));
}

// Model tiny: units 0..5. Pipeline 0 on fast devices 0..3 (two tp=2 stages), pipeline 1 on
// slow devices 4..6 (three stages); devices 7, 8, 9 stay free for the tests to use.
Plan base_plan() {
  const Json j = Json::parse(R"({"model": "tiny", "gbs": 12, "seq_len": 64, "pipelines": [
    {"micro_batch_size": 2, "local_batch": 8, "stages": [
      {"device_type": "fast", "devices": [0, 1], "tp": 2, "units": [0, 2]},
      {"device_type": "fast", "devices": [2, 3], "tp": 2, "units": [3, 5]}]},
    {"micro_batch_size": 1, "local_batch": 4, "stages": [
      {"device_type": "slow", "devices": [4], "units": [0, 1]},
      {"device_type": "slow", "devices": [5], "units": [2, 3]},
      {"device_type": "slow", "devices": [6], "units": [4, 5]}]}]})");
  return parse_plan(JsonCursor(j, {"plan", "test", ""}));
}

Violations validate(const Plan& p) { return validate_plan(p, test_cluster()); }

TEST(ValidatePlan, BasePlanIsValid) {
  EXPECT_EQ(validate(base_plan()), Violations{});
  Plan p = base_plan();
  p.schedule = "gpipe";
  EXPECT_EQ(validate(p), Violations{});
}

TEST(ValidatePlan, GbsIsTheSumOfLocalBatches) {
  Plan p = base_plan();
  p.gbs = 13;
  EXPECT_EQ(
      validate(p),
      (Violations{{"gbs", "expected the sum of the pipelines' local_batch (8 + 4 = 12), got 13"}}));
  p.gbs = 0;
  EXPECT_EQ(validate(p), (Violations{{"gbs", "expected an integer >= 1, got 0"},
                                     {"gbs",
                                      "expected the sum of the pipelines' local_batch (8 + 4 = "
                                      "12), got 0"}}));
}

TEST(ValidatePlan, GbsMessageSummarizesManyPipelines) {
  Plan p = base_plan();
  while (p.pipelines.size() < 9) p.pipelines.push_back(p.pipelines[1]);  // 8 + 8 * 4 = 40
  p.gbs = 41;
  Violations gbs;
  for (const auto& v : validate(p)) {
    if (v.path == "gbs") gbs.push_back(v);
  }
  EXPECT_EQ(gbs, (Violations{{"gbs",
                              "expected the sum of the pipelines' local_batch over 9 "
                              "pipelines (40), got 41"}}));
}

TEST(ValidatePlan, SeqLenAtMostTheModels) {
  Plan p = base_plan();
  p.seq_len = 65;
  EXPECT_EQ(validate(p),
            (Violations{{"seq_len", "expected at most the model's seq_len (64), got 65"}}));
  p.seq_len = 0;
  EXPECT_EQ(validate(p), (Violations{{"seq_len", "expected an integer >= 1, got 0"}}));
}

TEST(ValidatePlan, ScheduleIsKnown) {
  Plan p = base_plan();
  p.schedule = "zb-h1";
  EXPECT_EQ(validate(p),
            (Violations{{"schedule", "expected \"1f1b\" or \"gpipe\", got \"zb-h1\""}}));
}

TEST(ValidatePlan, AtLeastOnePipelineAndStage) {
  Plan p = base_plan();
  p.pipelines.clear();
  EXPECT_EQ(validate(p), (Violations{{"pipelines", "expected at least one pipeline"}}));
  p = base_plan();
  p.pipelines[1].stages.clear();
  EXPECT_EQ(validate(p),
            (Violations{{"pipelines[1].stages",
                         "expected at least one stage (the stages cover units 0..5)"}}));
}

TEST(ValidatePlan, MicroBatchWithinLocalBatch) {
  Plan p = base_plan();
  p.pipelines[1].micro_batch_size = 5;
  EXPECT_EQ(
      validate(p),
      (Violations{{"pipelines[1].micro_batch_size", "expected at most local_batch (4), got 5"}}));
  p.pipelines[1].micro_batch_size = 0;
  EXPECT_EQ(validate(p),
            (Violations{{"pipelines[1].micro_batch_size", "expected an integer >= 1, got 0"}}));
  p = base_plan();
  p.pipelines[1].local_batch = 0;
  p.gbs = 8;
  EXPECT_EQ(validate(p),
            (Violations{{"pipelines[1].local_batch", "expected an integer >= 1, got 0"}}));
}

TEST(ValidatePlan, TpAndDpPositive) {
  Plan p = base_plan();
  p.pipelines[0].stages[1].tp = 0;
  p.pipelines[1].stages[0].dp = -1;
  EXPECT_EQ(validate(p),
            (Violations{{"pipelines[0].stages[1].tp", "expected an integer >= 1, got 0"},
                        {"pipelines[1].stages[0].dp", "expected an integer >= 1, got -1"}}));
}

TEST(ValidatePlan, DpAtMostMicroBatch) {
  Plan p = base_plan();
  p.pipelines[1].stages[2].dp = 2;
  p.pipelines[1].stages[2].devices = {6, 7};
  EXPECT_EQ(validate(p),
            (Violations{{"pipelines[1].stages[2].dp",
                         "expected at most the pipeline's micro_batch_size (1, so every "
                         "replica gets a sample of each micro-batch), got 2"}}));
  p.pipelines[1].micro_batch_size = 2;
  EXPECT_EQ(validate(p), Violations{});
}

TEST(ValidatePlan, DeviceCountIsTpTimesDp) {
  Plan p = base_plan();
  p.pipelines[0].stages[0].devices = {0};
  EXPECT_EQ(validate(p), (Violations{{"pipelines[0].stages[0].devices",
                                      "expected tp * dp = 2 * 1 = 2 devices, got 1"}}));
  p.pipelines[0].stages[0].devices = {0, 1, 8};
  p.pipelines[0].stages[0].span_nodes = true;
  EXPECT_EQ(validate(p), (Violations{{"pipelines[0].stages[0].devices",
                                      "expected tp * dp = 2 * 1 = 2 devices, got 3"}}));
}

TEST(ValidatePlan, DeviceTypeKnownInTheCluster) {
  Plan p = base_plan();
  p.pipelines[0].stages[0].device_type = "medium";
  // Every device then also disagrees with the stage's type, and says what it really is.
  EXPECT_EQ(
      validate(p),
      (Violations{{"pipelines[0].stages[0].device_type",
                   "unknown device type \"medium\"; the cluster's nodes have: fast, slow"},
                  {"pipelines[0].stages[0].devices[0]",
                   "device 0 (node 0) has type fast, but the stage's device_type is medium"},
                  {"pipelines[0].stages[0].devices[1]",
                   "device 1 (node 0) has type fast, but the stage's device_type is medium"}}));
  // Defined under device_types but on no node: no device can match it either.
  p.pipelines[0].stages[0].device_type = "spare";
  EXPECT_EQ(validate(p)[0],
            (PlanViolation{"pipelines[0].stages[0].device_type",
                           "unknown device type \"spare\"; the cluster's nodes have: fast, slow"}));
}

TEST(ValidatePlan, DeviceIdsExist) {
  Plan p = base_plan();
  p.pipelines[1].stages[1].devices = {10};
  p.pipelines[1].stages[2].devices = {-1};
  EXPECT_EQ(validate(p),
            (Violations{{"pipelines[1].stages[1].devices[0]",
                         "device 10 does not exist: the cluster has 10 devices (ids 0..9)"},
                        {"pipelines[1].stages[2].devices[0]",
                         "device -1 does not exist: the cluster has 10 devices (ids 0..9)"}}));
}

TEST(ValidatePlan, DeviceTypeMatchesTheStage) {
  Plan p = base_plan();
  p.pipelines[1].stages[0].devices = {8};  // a free fast device in a slow stage
  EXPECT_EQ(validate(p),
            (Violations{{"pipelines[1].stages[0].devices[0]",
                         "device 8 (node 2) has type fast, but the stage's device_type is slow"}}));
}

TEST(ValidatePlan, NoDeviceUsedTwice) {
  Plan p = base_plan();
  p.pipelines[1].stages[1].devices = {4};
  EXPECT_EQ(validate(p),
            (Violations{{"pipelines[1].stages[1].devices[0]",
                         "device 4 is also used by pipelines[1].stages[0].devices[0]; a "
                         "device serves at most one stage of the plan"}}));
  p = base_plan();
  p.pipelines[0].stages[1].devices = {3, 3};  // twice in one stage
  p.pipelines[1].stages[2].devices = {1};     // in another pipeline, and of another type
  EXPECT_EQ(validate(p),
            (Violations{{"pipelines[0].stages[1].devices[1]",
                         "device 3 is also used by pipelines[0].stages[1].devices[0]; a "
                         "device serves at most one stage of the plan"},
                        {"pipelines[1].stages[2].devices[0]",
                         "device 1 is also used by pipelines[0].stages[0].devices[1]; a "
                         "device serves at most one stage of the plan"},
                        {"pipelines[1].stages[2].devices[0]",
                         "device 1 (node 0) has type fast, but the stage's device_type is slow"}}));
}

TEST(ValidatePlan, StageStaysInOneNodeUnlessSpanNodes) {
  Plan p = base_plan();
  p.pipelines[0].stages[1].devices = {3, 8};
  const Violations expected{
      {"pipelines[0].stages[1].devices",
       "devices sit in 2 nodes (device 3 on node 0, device 8 on node 2); a stage "
       "stays in one node unless it sets \"span_nodes\": true"}};
  EXPECT_EQ(validate(p), expected);
  p.pipelines[0].stages[1].span_nodes = true;
  EXPECT_EQ(validate(p), Violations{});
}

// A custom model on one fast node: a single pipeline whose stages all use tp.
Plan tp_plan(const ModelSpec& m, std::int64_t tp) {
  Plan p;
  p.model = m;
  p.model_is_preset = false;
  p.gbs = 1;
  p.seq_len = m.seq_len;
  PipelinePlan pipe;
  pipe.local_batch = 1;
  StagePlan st;
  st.device_type = "fast";
  st.tp = tp;
  for (std::int64_t d = 0; d < tp; ++d) st.devices.push_back(d);
  st.first_unit = 0;
  st.last_unit = m.num_units() - 1;
  pipe.stages.push_back(st);
  p.pipelines.push_back(pipe);
  return p;
}

TEST(ValidatePlan, TpDividesHeads) {
  // hidden 48 = 6 heads of 8; ffn 192 and vocab 64 are multiples of 4, the 6 heads are not.
  const ModelSpec m{"m", 2, 48, 6, 16, 64, 192};
  EXPECT_EQ(validate(tp_plan(m, 4)),
            (Violations{{"pipelines[0].stages[0].tp",
                         "expected a divisor of the model's heads (6), got 4"}}));
  EXPECT_EQ(validate(tp_plan(m, 2)), Violations{});
}

TEST(ValidatePlan, TpDividesFfn) {
  const ModelSpec m{"m", 2, 64, 4, 16, 64, 202};  // 202 = 2 * 101
  EXPECT_EQ(validate(tp_plan(m, 4)),
            (Violations{{"pipelines[0].stages[0].tp",
                         "expected a divisor of the model's ffn size (202), got 4"}}));
  EXPECT_EQ(validate(tp_plan(m, 2)), Violations{});
}

TEST(ValidatePlan, TpDividesKvHeadsUnderGroupedQueryAttention) {
  // llama-tiny: 4 query heads, 2 kv heads, ffn 128. tp 4 divides the heads and ffn, not the
  // kv heads (which are not replicated), so it is refused on the stage's tp field; tp 2 is fine.
  const ModelSpec m = model_preset("llama-tiny");
  ASSERT_EQ(m.heads, 4);
  ASSERT_EQ(m.num_kv_heads(), 2);
  EXPECT_EQ(validate(tp_plan(m, 4)),
            (Violations{{"pipelines[0].stages[0].tp",
                         "expected a divisor of the model's kv_heads (2), got 4"}}));
  EXPECT_EQ(validate(tp_plan(m, 2)), Violations{});
}

TEST(ValidatePlan, VocabNeedNotDivideByTpButMustGiveEveryRankARow) {
  // The vocabulary is cut in floor-division row ranges, so an odd vocabulary is fine.
  const ModelSpec m{"m", 2, 64, 4, 16, 251, 256};  // units 0..3; 251 is odd
  EXPECT_EQ(validate(tp_plan(m, 2)), Violations{});
  EXPECT_EQ(validate(tp_plan(m, 4)), Violations{});
  // A vocabulary smaller than tp would leave a rank without a row, where the stage holds the
  // embedding or the head; a middle stage holds neither.
  const ModelSpec small{"m", 2, 64, 4, 16, 1, 256};
  Plan p = tp_plan(small, 2);
  StagePlan st = p.pipelines[0].stages[0];
  p.pipelines[0].stages.clear();
  const std::int64_t ranges[3][2] = {{0, 0}, {1, 2}, {3, 3}};
  const std::int64_t devices[3][2] = {{0, 1}, {2, 3}, {8, 9}};
  for (int s = 0; s < 3; ++s) {
    st.first_unit = ranges[s][0];
    st.last_unit = ranges[s][1];
    st.devices = {devices[s][0], devices[s][1]};
    p.pipelines[0].stages.push_back(st);
  }
  EXPECT_EQ(validate(p),
            (Violations{{"pipelines[0].stages[0].tp",
                         "expected at most the model's vocab (1), since the stage holds unit 0 "
                         "(embedding), sharded by vocabulary (one row per rank at least); got 2"},
                        {"pipelines[0].stages[2].tp",
                         "expected at most the model's vocab (1), since the stage holds unit 3 "
                         "(LM head), sharded by vocabulary (one row per rank at least); got 2"}}));
}

TEST(ValidatePlan, RecomputeUnitWithOthersIsRedundant) {
  Plan p = base_plan();
  RecomputeSet rc;
  rc.add(RecomputeOp::Unit);
  rc.add(RecomputeOp::MlpAct);
  p.pipelines[1].stages[0].recompute = rc;
  EXPECT_EQ(validate(p), (Violations{{"pipelines[1].stages[0].recompute",
                                      "\"unit\" already recomputes the whole unit, so mlp_act is "
                                      "redundant; list \"unit\" alone or only operators"}}));
  rc.add(RecomputeOp::Qkv);
  p.pipelines[1].stages[0].recompute = rc;
  EXPECT_EQ(validate(p),
            (Violations{{"pipelines[1].stages[0].recompute",
                         "\"unit\" already recomputes the whole unit, so qkv, mlp_act are "
                         "redundant; list \"unit\" alone or only operators"}}));
  RecomputeSet alone;
  alone.add(RecomputeOp::Unit);
  p.pipelines[1].stages[0].recompute = alone;
  p.pipelines[1].stages[1].recompute = RecomputeSet::all_ops();
  EXPECT_EQ(validate(p), Violations{});
}

TEST(ValidatePlan, RecomputeBitsNameKnownOperators) {
  // Files cannot hold an unknown name (parse_plan refuses it); a plan built in code could.
  Plan p = base_plan();
  p.pipelines[0].stages[0].recompute = RecomputeSet::from_bits(0x40);
  EXPECT_EQ(validate(p),
            (Violations{{"pipelines[0].stages[0].recompute",
                         "holds operator bits beyond the known operators (qkv, attn_score, "
                         "attn_softmax, attn_dropout, mlp_act, unit)"}}));
}

// Pipeline 1 of the base plan, with its three stages' unit ranges replaced.
Violations with_units(std::initializer_list<std::pair<std::int64_t, std::int64_t>> ranges) {
  Plan p = base_plan();
  auto& stages = p.pipelines[1].stages;
  std::size_t s = 0;
  for (auto [first, last] : ranges) {
    stages.at(s).first_unit = first;
    stages.at(s).last_unit = last;
    ++s;
  }
  return validate(p);
}

TEST(ValidatePlan, UnitsGapInTheMiddle) {
  EXPECT_EQ(with_units({{0, 1}, {3, 3}, {4, 5}}),
            (Violations{{"pipelines[1].stages[1].units",
                         "unit 2 is covered by no stage: stages[0] ends at unit 1 and stages[1] "
                         "starts at unit 3"}}));
  EXPECT_EQ(with_units({{0, 0}, {3, 3}, {4, 5}}),
            (Violations{{"pipelines[1].stages[1].units",
                         "units 1..2 are covered by no stage: stages[0] ends at unit 0 and "
                         "stages[1] starts at unit 3"}}));
}

TEST(ValidatePlan, UnitsGapAtTheStartAndEnd) {
  EXPECT_EQ(
      with_units({{2, 2}, {3, 3}, {4, 5}}),
      (Violations{{"pipelines[1].stages[0].units",
                   "units 0..1 are covered by no stage: the first stage must start at unit 0"}}));
  EXPECT_EQ(
      with_units({{0, 1}, {2, 3}, {4, 4}}),
      (Violations{
          {"pipelines[1].stages[2].units",
           "unit 5 is covered by no stage: the last stage must end at unit 5 (the LM head)"}}));
}

TEST(ValidatePlan, UnitsOverlap) {
  EXPECT_EQ(with_units({{0, 1}, {1, 3}, {4, 5}}),
            (Violations{
                {"pipelines[1].stages[1].units",
                 "unit 1 is also in stages[0] [0, 1]; every unit belongs to exactly one stage"}}));
  // Units 2..3 of stages[2] are held by both earlier stages.
  EXPECT_EQ(
      with_units({{0, 3}, {1, 2}, {2, 5}}),
      (Violations{
          {"pipelines[1].stages[1].units",
           "units 1..2 are also in stages[0] [0, 3]; every unit belongs to exactly one stage"},
          {"pipelines[1].stages[2].units",
           "units 2..3 are also in stages[0] [0, 3] and stages[1] [1, 2]; every unit "
           "belongs to exactly one stage"}}));
}

TEST(ValidatePlan, UnitsInOrder) {
  EXPECT_EQ(
      with_units({{2, 3}, {0, 1}, {4, 5}}),
      (Violations{{"pipelines[1].stages[1].units",
                   "stages must follow unit order: stages[1] starts at unit 0, before stages[0], "
                   "which starts at unit 2"}}));
}

TEST(ValidatePlan, UnitRangeWellFormed) {
  // first > last: the range is dropped, so its units are reported as a gap too.
  EXPECT_EQ(with_units({{0, 1}, {3, 2}, {4, 5}}),
            (Violations{{"pipelines[1].stages[1].units", "expected first <= last, got [3, 2]"},
                        {"pipelines[1].stages[2].units",
                         "units 2..3 are covered by no stage: stages[0] ends at unit 1 and "
                         "stages[2] starts at unit 4"}}));
  EXPECT_EQ(
      with_units({{-1, 1}, {2, 3}, {4, 5}}),
      (Violations{{"pipelines[1].stages[0].units", "expected unit indices >= 0, got [-1, 1]"},
                  {"pipelines[1].stages[1].units",
                   "units 0..1 are covered by no stage: the first stage must start at unit 0"}}));
}

TEST(ValidatePlan, LastUnitExists) {
  EXPECT_EQ(
      with_units({{0, 1}, {2, 3}, {4, 6}}),
      (Violations{
          {"pipelines[1].stages[2].units",
           "unit 6 does not exist: model tiny has units 0..5 (embedding, 4 blocks, LM head)"}}));
}

TEST(ValidatePlan, ReportsEveryViolationInPlanOrder) {
  Plan p = base_plan();
  p.gbs = 20;
  p.pipelines[0].micro_batch_size = 9;
  p.pipelines[0].stages[1].devices = {2, 12};
  p.pipelines[1].stages[2].first_unit = 5;
  const Violations v = validate(p);
  std::vector<std::string> paths;
  for (const auto& x : v) paths.push_back(x.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"gbs", "pipelines[0].micro_batch_size",
                                             "pipelines[0].stages[1].devices[1]",
                                             "pipelines[1].stages[2].units"}));
}

TEST(CheckPlan, ThrowsOneInputErrorPerViolation) {
  EXPECT_NO_THROW(check_plan(base_plan(), test_cluster(), "p.json"));
  Plan p = base_plan();
  p.gbs = 13;
  p.schedule = "zb";
  try {
    check_plan(p, test_cluster(), "p.json");
    FAIL() << "no InputErrors";
  } catch (const InputErrors& e) {
    ASSERT_EQ(e.errors().size(), 2u);
    EXPECT_EQ(e.errors()[0].source(), "p.json");
    EXPECT_EQ(e.errors()[0].path(), "gbs");
    EXPECT_EQ(std::string(e.errors()[1].what()),
              "[plan] p.json: schedule: expected \"1f1b\" or \"gpipe\", got \"zb\"");
    EXPECT_EQ(std::string(e.what()),
              std::string(e.errors()[0].what()) + "\n" + e.errors()[1].what());
  }
}

// Any values at all (ids, units, tp far out of range) give violations, never a crash or UB.
TEST(ValidatePlan, RandomCorruptionNeverCrashes) {
  std::mt19937_64 rng(12345);
  std::uniform_int_distribution<std::int64_t> value(-3, 12);
  std::uniform_int_distribution<int> field(0, 6);
  for (int trial = 0; trial < 2000; ++trial) {
    Plan p = base_plan();
    for (int k = 0; k < 3; ++k) {
      auto& pipe = p.pipelines[static_cast<std::size_t>(trial + k) % p.pipelines.size()];
      auto& st = pipe.stages[static_cast<std::size_t>(k) % pipe.stages.size()];
      switch (field(rng)) {
        case 0:
          st.devices.push_back(value(rng));
          break;
        case 1:
          st.first_unit = value(rng);
          break;
        case 2:
          st.last_unit = value(rng);
          break;
        case 3:
          st.tp = value(rng);
          break;
        case 4:
          st.dp = value(rng);
          break;
        case 5:
          pipe.micro_batch_size = value(rng);
          break;
        default:
          pipe.local_batch = value(rng);
          break;
      }
    }
    const Violations v = validate(p);
    for (const auto& x : v) {
      EXPECT_FALSE(x.path.empty());
      EXPECT_FALSE(x.message.empty());
    }
  }
}

}  // namespace
}  // namespace eth
