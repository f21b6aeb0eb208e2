// Plan files: the shipped examples load and are valid, and every plan survives a write/read
// round trip unchanged (preset and custom models, embedded clusters, optional fields).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "core/json_file.h"
#include "plan/plan.h"
#include "plan/validate.h"

namespace eth {
namespace {

const std::string kExamples = ETH_EXAMPLES_DIR;

Plan round_trip(const Plan& p) {
  const std::string text = plan_to_json(p).dump(2);
  const Json j = parse_json_text(text, "mem", "plan");
  return parse_plan(JsonCursor(j, {"plan", "mem", ""}));
}

TEST(ExamplePlans, ThirteenBOnTheTable2Cluster) {
  const Plan p = load_plan(kExamples + "/13b-hpp.json");
  ASSERT_TRUE(p.cluster.has_value());  // the file names its cluster preset
  EXPECT_EQ(p.cluster->name, "13b-910b2-910b4");
  EXPECT_EQ(validate_plan(p, load_cluster("13b-910b2-910b4")), std::vector<PlanViolation>{});
  EXPECT_EQ(p.model, model_preset("gpt3-13b"));
  EXPECT_EQ(p.gbs, 1024);
  // Every one of the 64 devices is used exactly once.
  std::vector<std::int64_t> all(64);
  for (std::int64_t i = 0; i < 64; ++i) all[static_cast<std::size_t>(i)] = i;
  EXPECT_EQ(p.device_ids(), all);
  // HPP: pipelines that differ in stage count, micro-batch size and local batch.
  std::set<std::size_t> stage_counts;
  std::set<std::int64_t> mbs, local;
  for (const auto& pipe : p.pipelines) {
    stage_counts.insert(pipe.stages.size());
    mbs.insert(pipe.micro_batch_size);
    local.insert(pipe.local_batch);
  }
  EXPECT_GE(stage_counts.size(), 2u);
  EXPECT_GE(mbs.size(), 2u);
  EXPECT_GE(local.size(), 2u);
  // The slower 910B4 pipelines recompute somewhere; nothing recomputes the whole unit redundantly.
  bool b4_recompute = false;
  for (const auto& pipe : p.pipelines)
    for (const auto& st : pipe.stages)
      b4_recompute |= st.device_type == "910B4" && !st.recompute.empty();
  EXPECT_TRUE(b4_recompute);
  // Under the wrong cluster the same plan is refused (device types disagree).
  EXPECT_FALSE(validate_plan(p, load_cluster("13b-a100-rtx3090")).empty());
}

TEST(ExamplePlans, TinyOnItsOwnCluster) {
  const Plan p = load_plan(kExamples + "/tiny-hpp.json");
  ASSERT_TRUE(p.cluster.has_value());
  EXPECT_EQ(validate_plan(p, *p.cluster), std::vector<PlanViolation>{});
  EXPECT_EQ(p.cluster->custom_types.size(), 2u);
  EXPECT_EQ(p.device_ids(), (std::vector<std::int64_t>{0, 1, 2, 3}));
  ASSERT_EQ(p.pipelines.size(), 2u);
  EXPECT_NE(p.pipelines[0].stages[0].device_type, p.pipelines[1].stages[0].device_type);
}

TEST(PlanJson, ExamplesRoundTrip) {
  for (const char* name : {"13b-hpp.json", "tiny-hpp.json"}) {
    const Plan p = load_plan(kExamples + "/" + name);
    EXPECT_EQ(round_trip(p), p) << name;
  }
}

TEST(PlanJson, RoundTripsEveryField) {
  Plan p = load_plan(kExamples + "/tiny-hpp.json");
  p.model = ModelSpec{"my-model", 3, 96, 6, 128, 1000, 200};
  p.model_is_preset = false;
  p.seq_len = 100;
  p.schedule = "gpipe";
  p.pipelines[0].stages[0].span_nodes = true;
  p.pipelines[0].stages[1].predicted_peak_memory_bytes = 1.5e9;
  RecomputeSet rc;
  rc.add(RecomputeOp::Unit);
  p.pipelines[1].stages[1].recompute = rc;
  p.pipelines[1].stages[1].tp = 2;
  p.pipelines[1].stages[1].dp = 3;
  p.predicted = Json{{"iteration_ms", 12.5}, {"stages", Json::array({1, 2})}};
  p.search = Json{{"evaluated", 7}};
  const Plan back = round_trip(p);
  EXPECT_EQ(back, p);
  EXPECT_FALSE(back.model_is_preset);

  // Through a file, with the atomic writer.
  const auto dir =
      std::filesystem::temp_directory_path() / ("eth_plan_io_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "p.json").string();
  save_plan(p, path);
  EXPECT_EQ(load_plan(path), p);
  std::filesystem::remove_all(dir);
}

TEST(PlanJson, DefaultsAndMicroBatchArithmetic) {
  const Json j = Json::parse(R"({"model": "tiny", "gbs": 11, "pipelines": [
      {"micro_batch_size": 4, "local_batch": 11, "stages": [
        {"device_type": "cpu", "devices": [0], "units": [0, 5]}]}]})");
  const Plan p = parse_plan(JsonCursor(j, {"plan", "mem", ""}));
  EXPECT_EQ(p.seq_len, 64);  // the model's
  EXPECT_EQ(p.schedule, "1f1b");
  EXPECT_FALSE(p.cluster.has_value());
  const StagePlan& st = p.pipelines[0].stages[0];
  EXPECT_EQ(st.tp, 1);
  EXPECT_EQ(st.dp, 1);
  EXPECT_TRUE(st.recompute.empty());
  EXPECT_FALSE(st.span_nodes);
  EXPECT_EQ(st.num_units(), 6);
  // k = ceil(11 / 4) = 3 micro-batches of 4, 4 and 11 - 2 * 4 = 3 samples.
  EXPECT_EQ(p.pipelines[0].num_microbatches(), 3);
  EXPECT_EQ(p.pipelines[0].last_microbatch_size(), 3);
  EXPECT_EQ(p.num_devices(), 1);
}

}  // namespace
}  // namespace eth
