// `eth launch --hostfile` over three hosts made of network namespaces (scripts/netns-hosts.sh),
// joined by links shaped to the cluster file's inter-node figure: a heterogeneous plan trains
// with single-process losses in every aggregation mode while its messages cross the links; a
// killed rank, a rank that stops answering (exit code 4), a host that dies and a host that does
// not exist end the run naming the host; bad inputs are refused once, before any rank starts.
// Needs root (ip netns, tc): skipped with the reason otherwise. The hosts are made once for the
// suite and removed even when a test fails (and by the CTest cleanup step multihost_down when
// the test binary is killed).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/json_cursor.h"
#include "log_util.h"
#include "test_util.h"

namespace eth {
namespace {

namespace fs = std::filesystem;
using test::log_losses;
using test::occurrences;
using test::slurp;

// Hosts of these tests: eth-t0..2 on 10.232.0.0/24 (not the default eth-h, so a user's own hosts
// are never touched), serialized on the lock the CTest cleanup step takes too.
const std::string kPrefix = "eth-t";
const std::string kNet = "10.232.0";
const std::string kScript = std::string(ETH_SOURCE_DIR) + "/scripts/netns-hosts.sh";
const std::string kEnv = "ETH_NETNS_PREFIX=" + kPrefix + " ETH_NETNS_NET=" + kNet +
                         " OMPI_MCA_plm_rsh_agent=" + ETH_SOURCE_DIR + "/scripts/netns-agent" +
                         " OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ";

// Three nodes of two device types (heterogeneous), 0.5 Gbit/s between nodes: the tbf rate of
// every host's link (scale 1: this machine carries it easily).
const char* kCluster = R"({"name": "three-hosts", "inter_node_bandwidth_gbps": 0.5,
  "nodes": [{"device_type": "fast", "devices": 2}, {"device_type": "slow", "devices": 1},
            {"device_type": "fast", "devices": 2}],
  "device_types": {"fast": {"tflops": 0.19, "memory_gb": 4, "intra_node_bandwidth_gbps": 20},
                   "slow": {"tflops": 0.06, "memory_gb": 4, "intra_node_bandwidth_gbps": 20}}})";

// Ranks 0-1 on host 0, 2 on host 1, 3-4 on host 2. Pipeline 0 sends activations from host 0 to
// host 1; pipeline 1 from host 0 to a dp-2 stage on host 2. Units 0-1 are aggregated inside
// host 0, unit 2 over hosts 0 and 2, units 3-5 over hosts 1 and 2.
const char* kPlan = R"({"format": "eth-plan", "version": 1, "model": "tiny", "gbs": 8,
  "seq_len": 16, "pipelines": [
  {"micro_batch_size": 2, "local_batch": 6, "stages": [
    {"device_type": "fast", "devices": [0], "units": [0, 2]},
    {"device_type": "slow", "devices": [2], "units": [3, 5]}]},
  {"micro_batch_size": 2, "local_batch": 2, "stages": [
    {"device_type": "fast", "devices": [1], "units": [0, 1]},
    {"device_type": "fast", "devices": [3, 4], "dp": 2, "units": [2, 5],
     "recompute": ["attn_score"]}]}]})";

// Every file of the suite lives here; the suite removes it at the end.
const fs::path& scratch() {
  static const fs::path dir = test::scratch("multihost", "suite");
  return dir;
}

struct Result {
  int code = -1;
  std::string out, err;
};

Result shell(const std::string& cmd, const fs::path& dir) {
  const fs::path out = dir / "stdout", err = dir / "stderr";
  const int status = std::system((cmd + " >" + out.string() + " 2>" + err.string()).c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
}

// Bytes host `h` has sent over its link (its tbf qdisc's counter).
long long sent_bytes(int h) {
  const std::string dev = kPrefix + std::to_string(h);
  const fs::path tmp = scratch() / ("tc_" + dev);
  std::system(("ip netns exec " + dev + " tc -s qdisc show dev " + dev + " >" + tmp.string() +
               " 2>&1").c_str());
  const std::string text = slurp(tmp);
  const auto at = text.find("Sent ");
  return at == std::string::npos ? -1 : std::atoll(text.c_str() + at + 5);
}

class MultiHost : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    skip_.clear();
    if (::geteuid() != 0) {
      skip_ = "needs root to make network namespaces (ip netns add) and shape links (tc)";
      return;
    }
    dir_ = scratch();
    // One set of these hosts at a time on this machine (parallel ctest, other checkouts).
    lock_ = ::open(("/run/lock/eth-netns-" + kPrefix + ".lock").c_str(), O_CREAT | O_RDWR, 0644);
    if (lock_ < 0 || ::flock(lock_, LOCK_EX) != 0) {
      skip_ = "cannot take /run/lock/eth-netns-" + kPrefix + ".lock";
      return;
    }
    cluster_ = test::write(dir_ / "cluster.json", kCluster);
    plan_ = test::write(dir_ / "plan.json", kPlan);
    hostfile_ = (dir_ / "hosts").string();
    const Result up = shell(kEnv + "bash " + kScript + " up --cluster " + cluster_ +
                                " --hostfile " + hostfile_,
                            dir_);
    if (up.code != 0) {
      skip_ = "cannot make namespace hosts here (" + kScript + " up failed: " + up.err + ")";
      return;
    }
    data_ = (dir_ / "data.bin").string();
    const Result d = shell(std::string(ETH_BINARY) + " data --synthetic 20000 --out " + data_,
                           dir_);
    if (d.code != 0) skip_ = "eth data failed: " + d.err;
  }

  static void TearDownTestSuite() {
    if (lock_ >= 0) {
      shell(kEnv + "bash " + kScript + " down", dir_);
      ::close(lock_);  // releases the lock
      lock_ = -1;
    }
    std::error_code ec;
    fs::remove_all(scratch(), ec);
  }

  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
  }

  static std::string train_args(const fs::path& log, int steps) {
    return "--data " + data_ + " --steps " + std::to_string(steps) +
           " --dropout 0.1 --lr 1e-3 --print-every 0 --threads 1 --precision fp32 --log " +
           log.string();
  }

  static std::string launch(const std::string& plan, const std::string& hostfile,
                            const std::string& train) {
    return kEnv + ETH_BINARY + " launch --plan " + plan + " --hostfile " + hostfile + " --net " +
           kNet + ".0/24 -- --cluster " + cluster_ + " " + train;
  }

  // Starts a 300-step run with --timeout `timeout_s`, waits until it has logged two steps, calls
  // `strike`, and returns how the run ended.
  static Result run_and_strike(const std::string& name, const std::function<void()>& strike,
                               int timeout_s = 10) {
    const fs::path dir = scratch() / name;
    fs::create_directories(dir);
    const fs::path log = dir / "log.jsonl";
    fs::remove(log);
    const std::string cmd = launch(plan_, hostfile_, train_args(log, 300) + " --timeout " +
                                                         std::to_string(timeout_s)) +
                            " >" + (dir / "stdout").string() + " 2>" + (dir / "stderr").string();
    const pid_t child = ::fork();
    if (child == 0) {
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    const auto t0 = std::chrono::steady_clock::now();
    while (occurrences(slurp(log), "\n") < 2 &&
           std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    strike();
    int status = 0;
    ::waitpid(child, &status, 0);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(dir / "stdout"),
            slurp(dir / "stderr")};
  }

  static inline std::string skip_;
  static inline fs::path dir_;
  static inline int lock_ = -1;
  static inline std::string cluster_, plan_, hostfile_, data_;
};

TEST_F(MultiHost, ThreeHostsTrainWithOneProcessLossesInEveryAggregationMode) {
  const Result single = shell(std::string(ETH_BINARY) +
                                  " train --model tiny --batch 8 --seq-len 16 " +
                                  train_args(dir_ / "single.jsonl", 20),
                              dir_);
  ASSERT_EQ(single.code, 0) << single.err;
  const std::vector<double> want = log_losses(dir_ / "single.jsonl");
  ASSERT_EQ(want.size(), 20u);
  for (const char* mode : {"block", "tensor", "device"}) {
    long long before[3];
    for (int h = 0; h < 3; ++h) before[h] = sent_bytes(h);
    const fs::path log = dir_ / (std::string(mode) + ".jsonl");
    const Result r = shell(launch(plan_, hostfile_,
                                  std::string("--allreduce ") + mode + " " + train_args(log, 20)),
                           dir_);
    ASSERT_EQ(r.code, 0) << mode << "\n" << r.err;
    // Ranks were placed host by host, node k's devices on host k.
    EXPECT_NE(r.err.find("--host eth-t0:2,eth-t1:1,eth-t2:2"), std::string::npos) << r.err;
    const std::vector<double> got = log_losses(log);
    ASSERT_EQ(got.size(), want.size()) << mode;
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_NEAR(got[i], want[i], 1e-5 * want[i]) << mode << " step " << i;
    }
    // Every host sent at least its gradients of one step over its link: TCP between hosts.
    // (Host 0 sends 3 units' fp32 gradients, ~ 67 KB; the others more.)
    for (int h = 0; h < 3; ++h) {
      EXPECT_GT(sent_bytes(h) - before[h], 20 * 60'000) << mode << " host " << h;
    }
  }
}

// Sends `signal` to the rank processes (eth train) of host `h`.
void signal_ranks(int h, int signal) {
  const fs::path pids = scratch() / "pids";
  std::system(("ip netns pids " + kPrefix + std::to_string(h) + " >" + pids.string()).c_str());
  std::istringstream in(slurp(pids));
  for (int pid; in >> pid;) {
    const std::string cmdline = slurp("/proc/" + std::to_string(pid) + "/cmdline");
    if (cmdline.find(std::string("train") + '\0' + "--plan") != std::string::npos) {
      ::kill(pid, signal);
    }
  }
}

TEST_F(MultiHost, AKilledRankEndsTheRunNamingItsHostAndRank) {
  // Rank 2, the only rank on host eth-t1, dies as a crash would.
  const Result r = run_and_strike("killed", [] { signal_ranks(1, SIGKILL); });
  EXPECT_EQ(r.code, 4) << r.err;  // the supervising eth launch maps a dead rank to exit 4
  EXPECT_NE(r.err.find("rank 2"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(kPrefix + "1"), std::string::npos) << r.err;
}

TEST_F(MultiHost, ARankThatStopsAnsweringTimesOutNamingTheHostWithExitCode4) {
  // Rank 2 stops (SIGSTOP): it neither exits nor answers, so its neighbours time out.
  const Result r = run_and_strike("stopped", [] { signal_ranks(1, SIGSTOP); }, 3);
  signal_ranks(1, SIGKILL);  // in case the job's abort left it behind
  EXPECT_EQ(r.code, 4) << r.err;
  EXPECT_NE(r.err.find("timed out"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" runs on host " + kPrefix), std::string::npos) << r.err;
}

TEST_F(MultiHost, AHostThatDiesIsNamed) {
  const Result r = run_and_strike("dies", [] {
    shell(kEnv + "bash " + kScript + " kill " + kPrefix + "1", dir_);
  });
  EXPECT_NE(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("lost host " + kPrefix + "1"), std::string::npos) << r.err;
}

TEST_F(MultiHost, AnUnreachableHostIsNamedAndBadInputsAreRefusedBeforeAnyRankStarts) {
  const fs::path log = dir_ / "refused.jsonl";
  const std::string gone = test::write(dir_ / "gone", "eth-t0\neth-t7\neth-t2\n");
  Result r = shell(launch(plan_, gone, train_args(log, 2)), dir_);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("\"eth-t7\" is unreachable"), std::string::npos) << r.err;

  // Two hosts for three nodes: refused by eth launch itself, naming the hostfile.
  const std::string two = test::write(dir_ / "two", "eth-t0 slots=2\neth-t1\n");
  r = shell(launch(plan_, two, train_args(log, 2)), dir_);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("rank 3 runs a device of cluster node 2 but the hostfile lists only 2"),
            std::string::npos)
      << r.err;

  // A plan that breaks a rule: every rank finds it, rank 0 reports it once, exit code 2.
  std::string gap = kPlan;
  gap.replace(gap.find("\"units\": [3, 5]"), 15, "\"units\": [3, 4]");
  const std::string bad = test::write(dir_ / "gap.json", gap);
  r = shell(launch(bad, hostfile_, train_args(log, 2)), dir_);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(occurrences(r.err, "error: [plan]"), 1) << r.err;
  EXPECT_NE(r.err.find("pipelines[0]"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(log));
}

}  // namespace
}  // namespace eth
