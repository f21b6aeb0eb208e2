// The elastic loop (launch/elastic_run.h) in-process, over a stand-in for mpirun (a shell script
// that records each command line and ends as the test says): malformed device files are refused
// before any launch, no devices left ends with exit 5 without a launch, a lost rank's device is
// planned without on the next launch (fewer ranks, a new plan file, the loss recorded), a rank's
// own error stops with its code, and a run that ends early unasked is a bug. The end-to-end runs
// under a real mpirun are tests/launch/elastic_launch_test.cpp (label mpi).
#include "launch/elastic_run.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <optional>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/exit_codes.h"
#include "core/json_file.h"
#include "profile/analytic.h"
#include "test_util.h"

namespace eth::elastic_run_test {
namespace {

namespace fs = std::filesystem;

class ElasticRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::scratch("elastic_run",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    const ClusterSpec full = load_cluster("cpu-emulated");
    db_ = analytic_profile_db(model_preset("tiny"), full, {1}, {1, 2, 4}, 16);
    ReplanInputs& in = s_.replan;
    in.model = model_preset("tiny");
    in.full = full;
    in.profile = &*db_;
    in.gbs = 8;
    in.seq_len = 16;
    in.options.tp = {1};
    in.options.micro_batch_sizes = {1, 2, 4};
    s_.full = full;
    s_.user_plan = replan(in, {}).result.plan;
    s_.launch.plan = "user-plan.json";
    s_.launch.single_copy = "none";
    s_.launch.mpirun = (dir_ / "mpirun").string();
    s_.target = 4;
    s_.checkpoint_dir = (dir_ / "ckpt").string();
    s_.log = (dir_ / "elastic.jsonl").string();
    s_.lost_devices = (dir_ / "lost").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The stand-in mpirun: launch k writes its arguments to args.k and runs `endings[k-1]` (the
  // last one for later launches).
  void fake_mpirun(const std::vector<std::string>& endings) {
    std::string script = "#!/bin/sh\nd='" + dir_.string() +
                         "'\nn=$(($(cat \"$d/count\" 2>/dev/null || echo 0) + 1))\n"
                         "echo $n > \"$d/count\"\nprintf '%s\\n' \"$@\" > \"$d/args.$n\"\n"
                         "case $n in\n";
    for (std::size_t i = 0; i + 1 < endings.size(); ++i) {
      script += std::to_string(i + 1) + ") " + endings[i] + ";;\n";
    }
    script += "*) " + endings.back() + ";;\nesac\n";
    test::write(s_.launch.mpirun, script);
    ::chmod(s_.launch.mpirun.c_str(), 0755);
  }
  int launches() const {
    const std::string n = test::slurp(dir_ / "count");
    return n.empty() ? 0 : std::stoi(n);
  }
  std::vector<std::string> args_of(int k) const {
    std::istringstream in(test::slurp(dir_ / ("args." + std::to_string(k))));
    std::vector<std::string> out;
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
  }
  static std::string after(const std::vector<std::string>& a, const std::string& flag) {
    const auto it = std::find(a.begin(), a.end(), flag);
    return it == a.end() || it + 1 == a.end() ? "" : *(it + 1);
  }
  std::vector<Json> events() const {
    std::istringstream in(test::slurp(s_.log));
    std::vector<Json> out;
    for (std::string l; std::getline(in, l);) out.push_back(Json::parse(l));
    return out;
  }
  // The plan's devices in ascending order: rank i runs the i-th.
  static std::vector<std::int64_t> devices_of(const Plan& p) {
    std::vector<std::int64_t> d;
    for (const PipelinePlan& pipe : p.pipelines) {
      for (const StagePlan& st : pipe.stages) d.insert(d.end(), st.devices.begin(), st.devices.end());
    }
    std::sort(d.begin(), d.end());
    return d;
  }

  fs::path dir_;
  std::optional<ProfileDb> db_;
  ElasticSetup s_;
  std::ostringstream err_;
};

TEST_F(ElasticRunTest, MalformedDeviceFilesAreRefusedBeforeAnyLaunch) {
  fake_mpirun({"exit 0"});
  test::write(s_.lost_devices, "0\nzero\n");
  std::string e = test::error_of([&] { run_elastic(s_, err_); });
  EXPECT_NE(e.find(s_.lost_devices), std::string::npos) << e;
  EXPECT_NE(e.find("line 2"), std::string::npos) << e;
  fs::remove(s_.lost_devices);
  s_.launch.hostfile = test::write(dir_ / "hosts", "a\nb\na\n");
  e = test::error_of([&] { run_elastic(s_, err_); });
  EXPECT_NE(e.find(s_.launch.hostfile), std::string::npos) << e;
  EXPECT_NE(e.find("line 3"), std::string::npos) << e;
  EXPECT_EQ(launches(), 0);
}

TEST_F(ElasticRunTest, NoDeviceLeftEndsWithExit5WithoutALaunch) {
  fake_mpirun({"exit 0"});
  test::write(s_.lost_devices, "0-" + std::to_string(s_.full.num_devices() - 1) + "\n");
  EXPECT_EQ(run_elastic(s_, err_), kExitNoPlan);
  EXPECT_EQ(launches(), 0);
  EXPECT_NE(err_.str().find("no plan fits the devices left"), std::string::npos) << err_.str();
  const std::vector<Json> ev = events();
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(ev.back().at("event"), "stopped");
  EXPECT_EQ(ev.back().at("exit_code"), kExitNoPlan);
}

TEST_F(ElasticRunTest, ALostRanksDeviceIsPlannedWithoutOnTheNextLaunch) {
  const std::vector<std::int64_t> devices = devices_of(s_.user_plan);
  ASSERT_GE(devices.size(), 2u);
  const std::int64_t lost = devices[1];  // rank 1's
  fake_mpirun({"echo 'mpirun noticed that process rank 1 with PID 9 on node h exited on signal 9 "
               "(Killed).' >&2; exit 137",
               "exit 2"});
  EXPECT_EQ(run_elastic(s_, err_), 2);  // the second launch's own error ends the run
  ASSERT_EQ(launches(), 2);
  const std::vector<std::string> first = args_of(1), second = args_of(2);
  EXPECT_EQ(after(first, "-n"), std::to_string(devices.size()));
  EXPECT_EQ(after(first, "--plan"), "user-plan.json");
  EXPECT_EQ(after(first, "--checkpoint-dir"), s_.checkpoint_dir);
  EXPECT_EQ(after(first, "odls_base_sigkill_timeout"), "0");
  EXPECT_EQ(after(second, "-n"), std::to_string(devices.size() - 1));
  const std::string replanned = after(second, "--plan");
  EXPECT_EQ(fs::path(replanned).parent_path(), fs::path(s_.checkpoint_dir));
  // The new plan runs on the survivors; its search record maps its ids back, without `lost`.
  const Json plan = read_json_file(replanned, "test");
  const auto back = plan.at("search").at("elastic").at("full_cluster_device_of")
                        .get<std::vector<std::int64_t>>();
  EXPECT_EQ(back.size(), devices.size() - 1);
  EXPECT_EQ(std::count(back.begin(), back.end(), lost), 0);
  // The loss went into --lost-devices for a person to take out when the device is back.
  EXPECT_NE(test::slurp(s_.lost_devices).find(std::to_string(lost)), std::string::npos);
  bool recovery = false;
  for (const Json& e : events()) {
    if (e.at("event") == "recovery") {
      recovery = true;
      EXPECT_EQ(e.at("lost_now"), Json(std::vector<std::int64_t>{lost}));
    }
  }
  EXPECT_TRUE(recovery);
  EXPECT_EQ(events().back().at("event"), "stopped");
}

TEST_F(ElasticRunTest, ARunThatEndsEarlyUnaskedIsABug) {
  fake_mpirun({"exit 0"});  // every rank "finished" with no checkpoint at the target
  try {
    run_elastic(s_, err_);
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("without being asked to"), std::string::npos) << e.what();
  }
  EXPECT_EQ(launches(), 1);
}

}  // namespace
}  // namespace eth::elastic_run_test
