// Elastic runs' decisions without processes: the newest checkpoint that reads back (a truncated
// newer one and a write's temporary are passed over), and the plan for the devices left, checked
// against the full cluster independently of how it was made. (The lost-devices file and the
// hostfile arithmetic are tested in lost_devices_test.cpp.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cluster/cluster_spec.h"
#include "elastic/lost_devices.h"
#include "elastic/recovery.h"
#include "model/model_spec.h"
#include "plan/validate.h"
#include "profile/analytic.h"
#include "test_util.h"
#include "train/checkpoint.h"
#include "train/model_state.h"

namespace eth {
namespace {

namespace fs = std::filesystem;
using test::error_of;

class ResumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::scratch("elastic",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path save(std::int64_t step) {
    const ModelSpec m = model_preset("tiny");
    ModelState state(m, 0, m.num_units() - 1);
    CheckpointMeta meta;
    meta.model = m;
    meta.step = step;
    const fs::path p = checkpoint_path(dir_, step);
    write_checkpoint(p, state, meta);
    return p;
  }
  fs::path dir_;
};

TEST_F(ResumeTest, NewestWholeCheckpointPassingOverATruncatedOneAndATemporary) {
  EXPECT_FALSE(latest_whole_checkpoint(dir_).has_value());
  EXPECT_FALSE(latest_whole_checkpoint(dir_ / "missing").has_value());
  save(5);
  const fs::path ten = save(10);
  // Step 15 cut to half its length (not what AtomicFile leaves, but what a copy cut short does),
  // and the temporary of a write of step 20 cut short.
  const std::string whole = test::slurp(ten);
  test::write(checkpoint_path(dir_, 15), whole.substr(0, whole.size() / 2));
  test::write(dir_ / ".step_00000020.safetensors.tmp-123-0", whole.substr(0, 100));
  std::vector<std::string> skipped;
  const auto r = latest_whole_checkpoint(dir_, &skipped);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->step, 10);
  EXPECT_EQ(r->path, ten);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find("step_00000015"), std::string::npos) << skipped[0];
}

TEST_F(ResumeTest, StepsOrderByNumberPastTheZeroPadding) {
  save(99999999);
  save(100000000);  // nine digits: "step_100000000" sorts before "step_99999999" as text
  EXPECT_EQ(latest_whole_checkpoint(dir_)->step, 100000000);
}

ReplanInputs inputs(const ClusterSpec& full, const ProfileDb& db) {
  ReplanInputs in;
  in.model = model_preset("tiny");
  in.full = full;
  in.profile = &db;
  in.gbs = 8;
  in.seq_len = 16;
  in.options.tp = {1};
  in.options.micro_batch_sizes = {1, 2, 4};
  return in;
}

TEST(Replan, ThePlanForWhatIsLeftKeepsBatchModelAndDevicesTypes) {
  const ClusterSpec full = load_cluster("cpu-emulated");
  const ModelSpec tiny = model_preset("tiny");
  const ProfileDb db = analytic_profile_db(tiny, full, {1}, {1, 2, 4}, 16);
  for (const std::set<std::int64_t>& lost :
       {std::set<std::int64_t>{2}, std::set<std::int64_t>{0}, std::set<std::int64_t>{1, 3}}) {
    SCOPED_TRACE(device_ranges(lost));
    const Replan r = replan(inputs(full, db), lost);
    const Plan& p = r.result.plan;
    EXPECT_EQ(p.gbs, 8);
    EXPECT_EQ(p.seq_len, 16);
    EXPECT_EQ(p.model, tiny);
    ASSERT_TRUE(p.cluster.has_value());
    EXPECT_EQ(*p.cluster, r.surviving.cluster);
    EXPECT_TRUE(validate_plan(p, r.surviving.cluster).empty());
    EXPECT_FALSE(plan_uses_any(p, {}));
    std::int64_t samples = 0;
    for (const PipelinePlan& pipe : p.pipelines) {
      samples += pipe.local_batch;
      for (const StagePlan& st : pipe.stages) {
        for (std::int64_t d : st.devices) {
          ASSERT_LT(d, full.num_devices() - static_cast<std::int64_t>(lost.size()));
          const std::int64_t o = r.surviving.original[static_cast<std::size_t>(d)];
          EXPECT_EQ(lost.count(o), 0u) << "device " << d << " is lost device " << o;
          EXPECT_EQ(full.device(o).device_type, st.device_type);
        }
      }
    }
    EXPECT_EQ(samples, 8);
  }
}

TEST(Replan, NoPlanFitsNamesTheOverflowAndLosingEverythingIsRefused) {
  // Four devices of 1.5 MB hold tiny (four stages); three cannot.
  const Json j = Json::parse(R"({"name": "tight",
    "nodes": [{"device_type": "big", "devices": 2}, {"device_type": "small", "devices": 2}],
    "device_types": {
      "big": {"tflops": 2, "memory_gb": 0.0015, "intra_node_bandwidth_gbps": 10},
      "small": {"tflops": 1, "memory_gb": 0.0015, "intra_node_bandwidth_gbps": 10}}})");
  const ClusterSpec full = parse_cluster(JsonCursor(j, JsonOrigin{"cluster", "tight", ""}));
  const ProfileDb db = analytic_profile_db(model_preset("tiny"), full, {1}, {1, 2, 4}, 16);
  EXPECT_EQ(replan(inputs(full, db), {}).result.plan.num_devices(), 4);
  const std::string none = error_of([&] { replan(inputs(full, db), {3}); });
  EXPECT_NE(none.find("no eth plan fits memory"), std::string::npos) << none;
  EXPECT_NE(none.find("overflows stage"), std::string::npos) << none;
  EXPECT_NE(error_of([&] { replan(inputs(full, db), {0, 1, 2, 3}); }).find("nothing left"),
            std::string::npos);
}

TEST(Replan, PlanUsesAny) {
  const ClusterSpec full = load_cluster("cpu-emulated");
  const ProfileDb db = analytic_profile_db(model_preset("tiny"), full, {1}, {1, 2, 4}, 16);
  const Plan p = replan(inputs(full, db), {}).result.plan;
  for (std::int64_t d : p.device_ids()) EXPECT_TRUE(plan_uses_any(p, {d}));
  EXPECT_FALSE(plan_uses_any(p, {17}));
}

}  // namespace
}  // namespace eth
