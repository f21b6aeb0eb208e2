// How a launch ended, read from what mpirun and the ranks print, without running mpirun: a rank
// killed by a signal or exiting without a word is a lost device (exit 4) with the rank and its
// device named; a rank that stops answering is named from the timeout another rank reports (the
// message comm/ builds, so a change on either side shows here); a rank's own error keeps its
// code; an interrupt is 130/143; a lost host is named; success reads no checkpoint report.
#include <gtest/gtest.h>

#include <csignal>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/exit_codes.h"
#include "launch/outcome.h"

namespace eth {
namespace {

// Two stages of one device each; device ids 4 and 6 of some cluster.
std::vector<LaunchRank> two_ranks() {
  LaunchRank a{0, 4, "cpu", 0, 0, ""};
  LaunchRank b{1, 6, "cpu-slow", 0, 1, "hostB"};
  return {a, b};
}

MpirunMessages read(const std::vector<std::string>& lines) {
  MpirunMessages m;
  for (const auto& l : lines) m.feed(l);
  return m;
}

struct Reported {
  int calls = 0;
  std::function<std::string()> fn() {
    return [this] {
      ++calls;
      return std::string("; REPORT");
    };
  }
};

TEST(LaunchOutcome, ExitCodesSayWhichWayTheLaunchEnded) {
  EXPECT_EQ(ended_of(0), Ended::AllOk);
  EXPECT_EQ(ended_of(2), Ended::OwnError);
  EXPECT_EQ(ended_of(3), Ended::OwnError);
  EXPECT_EQ(ended_of(4), Ended::DeviceLost);
  EXPECT_EQ(ended_of(130), Ended::Interrupted);
  EXPECT_EQ(ended_of(143), Ended::Interrupted);
  for (int c : {2, 3, 4}) EXPECT_TRUE(is_reported_code(c)) << c;
  for (int c : {0, 1, 5, 9, 137}) EXPECT_FALSE(is_reported_code(c)) << c;
}

TEST(LaunchOutcome, RankKilledBySignalIsALostDeviceNamedByThePlan) {
  const MpirunMessages m = read({"some rank output",
                                 "mpirun noticed that process rank 1 with PID 4242 on node h1 "
                                 "exited on signal 9 (Killed)."});
  Reported r;
  const LaunchOutcome o = outcome_of(m, MpirunExit{137, 0, 0}, two_ranks(), r.fn());
  EXPECT_EQ(o.ended, Ended::DeviceLost);
  EXPECT_EQ(o.exit_code, kExitComm);
  EXPECT_EQ(o.lost_rank, 1);
  EXPECT_EQ(o.lost_device, 6);
  EXPECT_EQ(o.lost_cause, "killed by SIGKILL (signal 9)");
  EXPECT_EQ(o.message,
            "error: [launch] rank 1 (device 6, cpu-slow, pipeline 0 stage 1, host hostB) died: "
            "killed by SIGKILL (signal 9); mpirun stopped the other ranks; REPORT");
  EXPECT_EQ(r.calls, 1);
}

TEST(LaunchOutcome, RankExitingWithACodeItDidNotChooseIsLost) {
  const MpirunMessages m = read({"Process name: [[5151,1],0]", "Exit code:    9"});
  Reported r;
  const LaunchOutcome o = outcome_of(m, MpirunExit{9, 0, 0}, two_ranks(), r.fn());
  EXPECT_EQ(o.ended, Ended::DeviceLost);
  EXPECT_EQ(o.exit_code, kExitComm);
  EXPECT_EQ(o.lost_rank, 0);
  EXPECT_EQ(o.lost_device, 4);
  EXPECT_EQ(o.lost_cause, "exited with code 9");
}

TEST(LaunchOutcome, RanksOwnErrorKeepsItsCodeAndLosesNoDevice) {
  for (int code : {kExitInput, kExitInternal}) {
    const MpirunMessages m = read({"Process name: [[5151,1],1]",
                                   "Exit code:    " + std::to_string(code)});
    Reported r;
    const LaunchOutcome o = outcome_of(m, MpirunExit{code, 0, 0}, two_ranks(), r.fn());
    EXPECT_EQ(o.ended, Ended::OwnError) << code;
    EXPECT_EQ(o.exit_code, code);
    EXPECT_EQ(o.lost_rank, -1);
    EXPECT_EQ(o.message, "eth launch: the run stopped; REPORT");
  }
}

TEST(LaunchOutcome, RankThatStopsAnsweringIsNamedFromTheTimeoutItsPeerReports) {
  // Rank 0 waited for rank 1 and aborted the job with exit 4.
  const std::string line = timeout_message(0, 2, 0, "recv", std::chrono::milliseconds(2000), {1},
                                           {1}, "");
  const MpirunMessages m = read({line});
  EXPECT_EQ(m.timeout_rank, 1);
  EXPECT_EQ(m.timeout_waiter, 0);
  EXPECT_TRUE(m.failure_seen());
  Reported r;
  const LaunchOutcome o = outcome_of(m, MpirunExit{kExitComm, 0, 0}, two_ranks(), r.fn());
  EXPECT_EQ(o.ended, Ended::DeviceLost);
  EXPECT_EQ(o.exit_code, kExitComm);
  EXPECT_EQ(o.lost_rank, 1);
  EXPECT_EQ(o.lost_device, 6);
  EXPECT_EQ(o.lost_cause, "stopped answering (rank 0 waited 2.000 s for it)");
}

TEST(LaunchOutcome, LostHostIsNamedAndTheEndIsALostDevice) {
  const MpirunMessages m =
      read({"ssh: connect to host hostB port 22: No route to host"});
  Reported r;
  const LaunchOutcome o = outcome_of(m, MpirunExit{1, 0, 0}, two_ranks(), r.fn());
  EXPECT_EQ(o.lost_host, "hostB");
  EXPECT_EQ(o.ended, Ended::DeviceLost);
  EXPECT_EQ(o.exit_code, kExitComm);
  EXPECT_EQ(o.message, "error: [launch] the run ended abnormally (mpirun exited with code 1); "
                       "see mpirun's message above; REPORT");
  const LaunchOutcome k = outcome_of(MpirunMessages{}, MpirunExit{-1, SIGSEGV, 0}, two_ranks(),
                                     r.fn());
  EXPECT_EQ(k.exit_code, kExitComm);
  EXPECT_NE(k.message.find("(mpirun killed by SIGSEGV)"), std::string::npos) << k.message;
}

TEST(LaunchOutcome, InterruptIs130Or143WhateverTheRanksSaid) {
  const MpirunMessages m = read({"mpirun noticed that process rank 0 with PID 1 on node h exited "
                                 "on signal 15 (Terminated)."});
  for (int sig : {SIGINT, SIGTERM}) {
    Reported r;
    const LaunchOutcome o = outcome_of(m, MpirunExit{1, 0, sig}, two_ranks(), r.fn());
    EXPECT_EQ(o.ended, Ended::Interrupted);
    EXPECT_EQ(o.exit_code, sig == SIGINT ? 130 : 143);
    EXPECT_EQ(o.interrupted, sig);
    EXPECT_EQ(o.message, std::string("eth launch: interrupted by ") +
                             (sig == SIGINT ? "SIGINT" : "SIGTERM") +
                             ": stopped all 2 ranks; REPORT");
  }
}

TEST(LaunchOutcome, SuccessLosesNothingAndReadsNoCheckpoint) {
  // A timeout reported and recovered from inside a run that then finished is no loss.
  const MpirunMessages m = read({timeout_message(0, 2, 0, "recv",
                                                 std::chrono::milliseconds(500), {1}, {1}, "")});
  Reported r;
  const LaunchOutcome o = outcome_of(m, MpirunExit{0, 0, 0}, two_ranks(), r.fn());
  EXPECT_EQ(o.ended, Ended::AllOk);
  EXPECT_EQ(o.exit_code, 0);
  EXPECT_EQ(o.lost_rank, -1);
  EXPECT_EQ(o.lost_device, -1);
  EXPECT_TRUE(o.message.empty());
  EXPECT_EQ(r.calls, 0);
}

}  // namespace
}  // namespace eth
