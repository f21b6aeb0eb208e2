// `eth launch` supervising mpirun: a rank killed by SIGKILL ends the run with exit 4 and a
// message naming the rank and the device the plan gave it; SIGINT and SIGTERM to eth launch stop
// every rank, exit 130 and 143, and leave the last checkpoint whole (it loads, checksums and
// all) with no temporary beside it. Label mpi: runs mpirun.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "eth_run.h"
#include "launch/single_copy_probe.h"
#include "model/model_spec.h"
#include "test_util.h"
#include "train/checkpoint.h"
#include "train/model_state.h"

namespace eth {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// tiny on the cpu-2 preset: one pipeline of two stages, rank i on device i.
const char* kPlan = R"({"model": "tiny", "gbs": 4, "seq_len": 16, "pipelines": [
  {"micro_batch_size": 2, "local_batch": 4, "stages": [
    {"device_type": "cpu", "devices": [0], "units": [0, 2]},
    {"device_type": "cpu", "devices": [1], "units": [3, 5]}]}]})";

class LaunchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::scratch("launch", ::testing::UnitTest::GetInstance()->current_test_info()->name());
    plan_ = test::write(dir_ / "plan.json", kPlan);
    data_ = (dir_ / "data.bin").string();
    ASSERT_EQ(test::eth_cli("data --synthetic 20000 --vocab 256 --out " + data_, dir_).code, 0);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::vector<std::string> launch_args(int steps) const {
    return {"launch", "--plan", plan_, "--", "--cluster", "cpu-2", "--data", data_, "--steps",
            std::to_string(steps), "--print-every", "0", "--timeout", "20", "--checkpoint-dir",
            (dir_ / "ckpt").string(), "--checkpoint-every", "1", "--log",
            (dir_ / "log.jsonl").string()};
  }

  // Starts eth with `args` (stderr to a file) and returns its pid: the test signals only the
  // process it started.
  pid_t start(const std::vector<std::string>& args, const std::string& env = "") {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
      ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
      ::setenv("OMP_NUM_THREADS", "1", 1);
      if (!env.empty()) ::putenv(const_cast<char*>(env.c_str()));
      const int out = ::open((dir_ / "stdout").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int err = ::open((dir_ / "stderr").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(out, 1);
      ::dup2(err, 2);
      const std::string eth = test::eth_binary();
      std::vector<char*> argv{const_cast<char*>(eth.c_str())};
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(eth.c_str(), argv.data());
      ::_exit(127);
    }
    return pid;
  }

  // Exit status of `pid`, killing it (and failing) past a liveness bound.
  int wait_for(pid_t pid) {
    const auto deadline = Clock::now() + std::chrono::seconds(120);
    int status = 0;
    while (::waitpid(pid, &status, WNOHANG) == 0) {
      if (Clock::now() > deadline) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        ADD_FAILURE() << "eth launch did not end";
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  int logged_steps() const {
    const std::string log = test::slurp(dir_ / "log.jsonl");
    return static_cast<int>(std::count(log.begin(), log.end(), '\n'));
  }

  // The newest checkpoint loads whole (every tensor's checksum) and nothing half-written is left.
  void expect_whole_checkpoint() {
    const auto latest = latest_checkpoint(dir_ / "ckpt");
    ASSERT_TRUE(latest.has_value());
    ModelState state(model_preset("tiny"), 0, model_preset("tiny").num_units() - 1);
    EXPECT_NO_THROW(load_checkpoint(*latest, state)) << latest->string();
    for (const auto& e : fs::directory_iterator(dir_ / "ckpt")) {
      EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
    }
  }

  fs::path dir_;
  std::string plan_, data_;
};

TEST_F(LaunchTest, KilledRankIsExit4NamingRankAndDevice) {
  const pid_t pid = start(launch_args(6), "ETH_TEST_KILL_RANK=1:2:kill");
  const int code = wait_for(pid);
  const std::string err = test::slurp(dir_ / "stderr");
  EXPECT_EQ(code, 4) << err;
  EXPECT_NE(err.find("error: [launch] rank 1 (device 1, cpu, pipeline 0 stage 1) died: killed by "
                     "SIGKILL (signal 9); mpirun stopped the other ranks"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("(step 2), is whole"), std::string::npos) << err;
  expect_whole_checkpoint();
}

TEST_F(LaunchTest, SingleCopyIsChosenByFlagAndLeavesTheLossesAsTheyWere) {
  const std::string base = "launch --plan " + plan_;
  const test::EthRun bad = test::eth_cli(base + " --mpi-single-copy fast --dry-run", dir_);
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("--mpi-single-copy"), std::string::npos) << bad.err;
  // The default, auto: cma on this one host exactly where the probe finds it allowed.
  EXPECT_NE(test::eth_cli(base + " --dry-run", dir_).out.find(
                std::string("btl_vader_single_copy_mechanism ") +
                (single_copy_available() ? "cma" : "none")),
            std::string::npos);
  EXPECT_NE(test::eth_cli(base + " --mpi-single-copy none --dry-run", dir_)
                .out.find("btl_vader_single_copy_mechanism none"),
            std::string::npos);
  EXPECT_NE(test::eth_cli(base + " --mpi-single-copy cma --dry-run", dir_)
                .out.find("btl_vader_single_copy_mechanism cma"),
            std::string::npos);
  if (!single_copy_available()) GTEST_SKIP() << "this kernel forbids cross-memory attach";
  // The transport moves the same bytes: 3 steps under each give the same losses, bit for bit.
  std::vector<std::string> logs;
  for (const std::string mode : {"none", "cma"}) {
    const std::string log = (dir_ / ("log-" + mode + ".jsonl")).string();
    const test::EthRun r =
        test::eth_cli(base + " --mpi-single-copy " + mode + " -- --cluster cpu-2 --data " + data_ +
                          " --steps 3 --print-every 0 --timeout 20 --log " + log,
                      dir_);
    ASSERT_EQ(r.code, 0) << r.err;
    std::string losses;
    std::istringstream lines(test::slurp(log));
    for (std::string line; std::getline(lines, line);) {
      const std::size_t at = line.find("\"loss\"");
      if (at != std::string::npos) losses += line.substr(at, line.find(',', at) - at) + "\n";
    }
    logs.push_back(losses);
  }
  EXPECT_FALSE(logs[0].empty());
  EXPECT_EQ(logs[0], logs[1]);
}

TEST_F(LaunchTest, SigintAndSigtermStopEveryRankAndKeepTheCheckpoint) {
  for (const int sig : {SIGINT, SIGTERM}) {
    fs::remove_all(dir_ / "ckpt");
    fs::remove(dir_ / "log.jsonl");
    const pid_t pid = start(launch_args(100000));
    // Interrupt once two steps are logged (checkpoints are written every step).
    const auto deadline = Clock::now() + std::chrono::seconds(90);
    while (logged_steps() < 2 && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_GE(logged_steps(), 2) << test::slurp(dir_ / "stderr");
    ::kill(pid, sig);
    const int code = wait_for(pid);
    const std::string err = test::slurp(dir_ / "stderr");
    EXPECT_EQ(code, sig == SIGINT ? 130 : 143) << err;
    EXPECT_NE(err.find(std::string("eth launch: interrupted by ") +
                       (sig == SIGINT ? "SIGINT" : "SIGTERM") + ": stopped all 2 ranks; the last "
                                                                "checkpoint, "),
              std::string::npos)
        << err;
    expect_whole_checkpoint();
  }
}

}  // namespace
}  // namespace eth
