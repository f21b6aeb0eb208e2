// `eth launch --elastic` end to end under mpirun (label mpi): ranks killed by the fault injection
// (ETH_TEST_KILL_RANK, launch/fault_injection.h) at chosen steps, the supervisor re-plans on the
// devices left and resumes from the newest whole checkpoint. The losses of every step (the last
// time each step ran) must equal those of one uninterrupted single-process `eth train` on the same
// global batches: the property that makes recovery invisible in the loss curve. A loss that
// leaves no plan must stop with exit 5 and the last checkpoint loading whole.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "eth_run.h"
#include "core/json_cursor.h"
#include "model/model_spec.h"
#include "test_util.h"
#include "train/checkpoint.h"
#include "train/model_state.h"

namespace eth {
namespace {

namespace fs = std::filesystem;

// tiny on two fast and two slow devices (tests/data/elastic/fast-slow-4.json, also
// elastic_bench's): pipeline A on the fast pair (micro-batch 2 over 6 samples), pipeline B on the
// slow pair (micro-batch 1 over 2), cut in different places.
const std::string kPlanFile = std::string(ETH_TEST_DATA_DIR) + "/elastic/fast-slow-4.json";

// The same types with 1.2 MB each: tiny at global batch 8 fits on the four devices, on no three
// of them (checked by eth plan in the test before it relies on it).
const char* kTightCluster = R"({"name": "tight", "nodes": [
   {"device_type": "fast", "devices": 2}, {"device_type": "slow", "devices": 2}],
   "inter_node_bandwidth_gbps": 80, "device_types": {
   "fast": {"tflops": 0.19, "memory_gb": 0.0012, "intra_node_bandwidth_gbps": 80},
   "slow": {"tflops": 0.095, "memory_gb": 0.0012, "intra_node_bandwidth_gbps": 80}}})";

constexpr int kSteps = 30;
// fp32: the exactness claim is fp32 rounding (bf16 plans agree to bf16 rounding, tests/runtime).
const std::string kOptions = " --lr 1e-3 --dropout 0.1 --print-every 0 --timeout 20 --precision fp32";
const std::string kTrain = "--steps 30" + kOptions;

std::vector<Json> json_lines(const fs::path& file) {
  std::vector<Json> out;
  std::istringstream lines(test::slurp(file));
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) out.push_back(Json::parse(line));
  }
  return out;
}

// step -> loss; a step logged again after a restart keeps its last value (the one that counts).
std::map<std::int64_t, double> losses(const fs::path& log) {
  std::map<std::int64_t, double> out;
  for (const Json& j : json_lines(log)) out[j["step"].get<std::int64_t>()] = j["loss"];
  return out;
}

class ElasticLaunchTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    shared_ = test::scratch("elastic_launch", "shared");
    data_ = (shared_ / "data.bin").string();
    const auto d = test::eth_cli("data --synthetic 20000 --vocab 256 --out " + data_, shared_);
    ASSERT_EQ(d.code, 0) << d.err;
    // The uninterrupted reference: one process, the plan's global batch and sequence length.
    const auto r = test::eth_cli("train --model tiny --batch 8 --seq-len 16 --data " + data_ +
                                     " " + kTrain + " --log " + (shared_ / "single.jsonl").string(),
                                 shared_);
    ASSERT_EQ(r.code, 0) << r.err;
    single_ = losses(shared_ / "single.jsonl");
    ASSERT_EQ(single_.size(), static_cast<std::size_t>(kSteps));
  }
  static void TearDownTestSuite() { fs::remove_all(shared_); }

  void SetUp() override {
    dir_ = test::scratch("elastic_launch",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    plan_ = test::write(dir_ / "plan.json", test::slurp(kPlanFile));
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }

  // eth launch --elastic with ETH_TEST_KILL_RANK=`faults`.
  test::EthRun launch(const std::string& faults, const std::string& elastic = "",
                      const std::string& train = kTrain) {
    return test::eth_cli(
        "launch --plan " + plan_ + " --elastic --checkpoint-dir " + (dir_ / "ckpt").string() +
            " --checkpoint-every 5 --elastic-log " + (dir_ / "elastic.jsonl").string() + " " +
            elastic + " -- --data " + data_ + " " + train,
        dir_,
        "export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ETH_TEST_KILL_RANK=" +
            faults);
  }

  std::vector<Json> events(const std::string& kind) const {
    std::vector<Json> out;
    for (const Json& j : json_lines(dir_ / "elastic.jsonl")) {
      if (j["event"] == kind) out.push_back(j);
    }
    return out;
  }

  // Every step ran (its last time) with the loss of the uninterrupted run.
  void expect_uninterrupted_losses() const {
    const auto got = losses(dir_ / "ckpt" / "train.jsonl");
    ASSERT_EQ(got.size(), single_.size());
    for (const auto& [step, want] : single_) {
      ASSERT_EQ(got.count(step), 1u) << "step " << step;
      EXPECT_NEAR(got.at(step), want, 1e-5 * want) << "step " << step;
    }
  }

  // The checkpoint of `step` loads whole (every tensor's checksum); no temporary is left.
  void expect_whole_checkpoint(std::int64_t step) const {
    const auto latest = latest_checkpoint(dir_ / "ckpt");
    ASSERT_TRUE(latest.has_value());
    EXPECT_EQ(*latest, checkpoint_path(dir_ / "ckpt", step));
    ModelState state(model_preset("tiny"), 0, model_preset("tiny").num_units() - 1);
    EXPECT_NO_THROW(load_checkpoint(*latest, state)) << latest->string();
    for (const auto& e : fs::directory_iterator(dir_ / "ckpt")) {
      EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
    }
  }

  // A rank killed before step `killed_at` (after the checkpoint of `checkpoint`): the run resumes
  // there. The supervisor counts steps from the run's log, whose lead may be killed by mpirun
  // before it logs the step the dead rank had finished: the step failed at is `killed_at` or the
  // one before, and the steps redone are those since the checkpoint.
  static void expect_redone(const Json& rec, std::int64_t killed_at, std::int64_t checkpoint) {
    const std::int64_t failed = rec["failed_at_step"];
    EXPECT_TRUE(failed == killed_at || failed == killed_at - 1) << failed;
    EXPECT_EQ(rec["resumed_from_step"], checkpoint);
    EXPECT_EQ(rec["steps_redone"], failed - checkpoint);
  }

  static std::vector<std::int64_t> devices(const Json& plan) {
    return plan["devices"].get<std::vector<std::int64_t>>();
  }

  static inline fs::path shared_;
  static inline std::string data_;
  static inline std::map<std::int64_t, double> single_;
  fs::path dir_;
  std::string plan_;
};

TEST_F(ElasticLaunchTest, RankKilledAtStep12FinishesOnThreeRanksWithUninterruptedLosses) {
  const auto r = launch("3:12:kill@4");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto rec = events("recovery");
  ASSERT_EQ(rec.size(), 1u) << r.err;
  EXPECT_EQ(rec[0]["lost"], Json(std::vector<std::int64_t>{3}));
  expect_redone(rec[0], 12, 10);
  EXPECT_EQ(devices(rec[0]["new_plan"]), (std::vector<std::int64_t>{0, 1, 2}));
  EXPECT_NE(r.err.find("lost device(s) 3 (slow, node 1): rank 3 (device 3, slow, pipeline 1 "
                       "stage 1) killed by SIGKILL (signal 9) at step 1"),
            std::string::npos)
      << r.err;
  // The second launch really ran on three ranks under the new plan.
  EXPECT_NE(r.err.find("on 3 ranks"), std::string::npos) << r.err;
  EXPECT_EQ(events("finished").size(), 1u);
  expect_uninterrupted_losses();
}

TEST_F(ElasticLaunchTest, TwoFailuresInOneRun) {
  // Rank 3 of the four-rank plan at step 12, then rank 1 of the three-rank re-plan at step 18.
  const auto r = launch("3:12:kill@4,1:18:kill@3");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto rec = events("recovery");
  ASSERT_EQ(rec.size(), 2u) << r.err;
  expect_redone(rec[0], 12, 10);
  expect_redone(rec[1], 18, 15);
  EXPECT_EQ(rec[1]["lost"].size(), 2u);
  // The device lost second is the one rank 1 of the first re-plan ran.
  const std::int64_t second = devices(rec[0]["new_plan"])[1];
  EXPECT_EQ(rec[1]["lost"], Json(std::vector<std::int64_t>{std::min<std::int64_t>(3, second),
                                                           std::max<std::int64_t>(3, second)}));
  EXPECT_EQ(rec[1]["new_plan"]["ranks"], 2);
  expect_uninterrupted_losses();
}

TEST_F(ElasticLaunchTest, RankThatStopsAnsweringIsTakenOut) {
  // SIGSTOP before step 12: the rank that waits on it gives up after --timeout 3 and names it.
  std::string train = kTrain;
  train.replace(train.find("--timeout 20"), 12, "--timeout 3");
  const auto r = launch("2:12:stop@4", "", train);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto rec = events("recovery");
  ASSERT_EQ(rec.size(), 1u) << r.err;
  EXPECT_EQ(rec[0]["lost"], Json(std::vector<std::int64_t>{2}));
  EXPECT_NE(rec[0]["cause"].get<std::string>().find("stopped answering"), std::string::npos)
      << rec[0].dump();
  expect_redone(rec[0], 12, 10);
  expect_uninterrupted_losses();
}

TEST_F(ElasticLaunchTest, FailureWhileACheckpointIsWrittenResumesFromThePreviousOne) {
  // Rank 0 dies after writing part of step 15's checkpoint.
  const auto r = launch("0:15:checkpoint@4");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto rec = events("recovery");
  ASSERT_EQ(rec.size(), 1u) << r.err;
  EXPECT_EQ(rec[0]["lost"], Json(std::vector<std::int64_t>{0}));
  EXPECT_EQ(rec[0]["resumed_from_step"], 10);
  EXPECT_EQ(rec[0]["steps_redone"], 5);
  expect_uninterrupted_losses();
  expect_whole_checkpoint(kSteps);
}

TEST_F(ElasticLaunchTest, NoPlanForTheDevicesLeftStopsWithExit5AndTheCheckpointWhole) {
  const std::string cluster = test::write(dir_ / "tight.json", kTightCluster);
  const auto three = test::write(
      dir_ / "three.json",
      std::string(kTightCluster).replace(std::string(kTightCluster).find("\"devices\": 2"), 12,
                                         "\"devices\": 1"));
  ASSERT_NE(test::eth_cli("plan --model tiny --cluster " + three + " --gbs 8 --seq 16", dir_).code,
            0)
      << "three of the tight devices must not fit tiny";
  const auto p = test::eth_cli("plan --model tiny --cluster " + cluster +
                                   " --gbs 8 --seq 16 --out " + plan_,
                               dir_);
  ASSERT_EQ(p.code, 0) << p.err;
  const auto r = launch("1:7:kill@4");
  EXPECT_EQ(r.code, 5) << r.err;
  EXPECT_NE(r.err.find("error: [elastic] no plan fits the 3 devices left (without 1 (fast, node "
                       "0))"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("no eth plan fits memory"), std::string::npos) << r.err;  // the planner's
  const auto stopped = events("stopped");
  ASSERT_EQ(stopped.size(), 1u);
  EXPECT_EQ(stopped[0]["exit_code"], 5);
  EXPECT_EQ(stopped[0]["checkpoint_step"], 5);
  expect_whole_checkpoint(5);
  EXPECT_TRUE(events("recovery").empty());
}

TEST_F(ElasticLaunchTest, DeviceBackInTheLostDevicesFileIsTakenAtTheNextCheckpoint) {
  const std::string lost = test::write(dir_ / "lost.txt", "3  # being serviced\n");
  // The run starts on three devices; rank 0 of that run holds before step 7 until the supervisor
  // asks the run to stop (the fault injection's hold), so the change below is seen while the run
  // is known to be going, whatever the machine's speed. Once six steps are logged (so the
  // checkpoint of step 5 and its stop check are behind the run), device 3 is back; the run stops
  // at the checkpoint of step 10 and goes on with four devices. After only two steps, a loaded
  // machine let the supervisor see the change before the checkpoint of step 5.
  test::EthRun r;
  // jthread: joined on every way out of the test, a failed assertion included.
  std::jthread run([&] { r = launch("0:7:hold@3", "--lost-devices " + lost); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(100);
  // Whole lines only: the log is read while rank 0 appends to it.
  const auto logged = [&] {
    const std::string log = test::slurp(dir_ / "ckpt" / "train.jsonl");
    return std::count(log.begin(), log.end(), '\n');
  };
  while (logged() < 6 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  test::write(dir_ / "lost.txt", "# device 3 is back\n");
  run.join();
  ASSERT_EQ(r.code, 0) << r.err;
  const auto start = events("start");
  ASSERT_EQ(start.size(), 1u);
  EXPECT_EQ(devices(start[0]["plan"]), (std::vector<std::int64_t>{0, 1, 2}));
  const auto rec = events("recovery");
  ASSERT_EQ(rec.size(), 1u) << r.err;
  EXPECT_EQ(rec[0]["cause"], "devices changed");
  EXPECT_EQ(rec[0]["returned"], Json(std::vector<std::int64_t>{3}));
  EXPECT_EQ(rec[0]["resumed_from_step"], 10);
  EXPECT_EQ(rec[0]["steps_redone"], 0);  // it stopped at a checkpoint
  EXPECT_EQ(devices(rec[0]["new_plan"]), (std::vector<std::int64_t>{0, 1, 2, 3}));
  expect_uninterrupted_losses();
}

}  // namespace
}  // namespace eth
