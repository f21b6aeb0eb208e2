// The supervisor (launch/supervisor.h) over a stand-in for mpirun (/bin/sh scripts): it passes
// the child's stderr on byte for byte, reads mpirun's own end (its code, a signal that killed
// it), takes the failure time from a fault line, forwards SIGINT to the child, refuses a program
// that cannot start naming --mpirun, and clears the temporaries of a checkpoint cut short.
#include "launch/supervisor.h"

#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "core/exit_codes.h"
#include "test_util.h"
#include "train/checkpoint.h"

namespace eth::supervisor_test {
namespace {

namespace fs = std::filesystem;

std::vector<LaunchRank> two_ranks() {
  return {LaunchRank{0, 4, "cpu", 0, 0, ""}, LaunchRank{1, 6, "cpu-slow", 0, 1, ""}};
}

struct Supervised {
  LaunchOutcome outcome;
  std::string echoed;
};

Supervised run_sh(const std::string& script, const fs::path& checkpoint_dir = {},
           const std::function<void(const std::string&)>& on_poll = {}) {
  std::ostringstream echo;
  SuperviseHooks hooks;
  hooks.echo = &echo;
  hooks.poll_interval = std::chrono::milliseconds(5);
  if (on_poll) hooks.on_poll = [&] { on_poll(echo.str()); };
  Supervised r;
  r.outcome = supervise_launch({"/bin/sh", "-c", script}, two_ranks(), checkpoint_dir, hooks);
  r.echoed = echo.str();
  return r;
}

TEST(Supervisor, PassesStderrOnAndASuccessLosesNothing) {
  const Supervised r = run_sh("echo 'line one' >&2; echo 'on stdout'; printf 'no newline' >&2; exit 0");
  EXPECT_EQ(r.echoed, "line one\nno newline");
  EXPECT_EQ(r.outcome.ended, Ended::AllOk);
  EXPECT_EQ(r.outcome.exit_code, kExitOk);
  EXPECT_EQ(r.outcome.lost_rank, -1);
  EXPECT_FALSE(r.outcome.failed_at.has_value());
}

TEST(Supervisor, ARankThatDiedIsNamedWithItsDevice) {
  const Supervised r = run_sh(
      "echo 'mpirun noticed that process rank 1 with PID 99 on node h1 exited on signal 9 "
      "(Killed).' >&2; exit 137");
  EXPECT_EQ(r.outcome.ended, Ended::DeviceLost);
  EXPECT_EQ(r.outcome.exit_code, kExitComm);
  EXPECT_EQ(r.outcome.lost_rank, 1);
  EXPECT_EQ(r.outcome.lost_device, 6);
  EXPECT_NE(r.outcome.message.find("device 6"), std::string::npos) << r.outcome.message;
  EXPECT_TRUE(r.outcome.failed_at.has_value());
}

TEST(Supervisor, MpirunsOwnEndIsReadFromItsStatus) {
  Supervised r = run_sh("exit 2");  // a rank's input error, passed on by mpirun
  EXPECT_EQ(r.outcome.ended, Ended::OwnError);
  EXPECT_EQ(r.outcome.exit_code, 2);
  r = run_sh("kill -9 $$");  // mpirun itself killed
  EXPECT_EQ(r.outcome.ended, Ended::DeviceLost);
  EXPECT_NE(r.outcome.message.find("mpirun killed by SIGKILL"), std::string::npos)
      << r.outcome.message;
}

TEST(Supervisor, TheFaultLinesMonotonicTimeIsWhenTheFailureShowed) {
  const Supervised r = run_sh(
      "echo '[fault] ETH_TEST_KILL_RANK: rank 1 exits abruptly at step 3 at monotonic 123.250000 "
      "s' >&2; exit 4");
  ASSERT_TRUE(r.outcome.failed_at.has_value());
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(
                r.outcome.failed_at->time_since_epoch()).count(), 123250);
}

// SIGINT to the supervisor reaches the child (a shell that says so when it gets it), once the
// child has set its trap; the outcome is an interrupt, 130.
TEST(Supervisor, SigintIsForwardedToTheChild) {
  bool sent = false;
  const Supervised r = run_sh(
      "trap 'echo got INT >&2; kill $p; exit 0' INT; sleep 30 >/dev/null 2>&1 & p=$!; "
      "echo ready >&2; wait",
      {}, [&](const std::string& echoed) {
        if (!sent && echoed.find("ready") != std::string::npos) {
          sent = true;
          std::raise(SIGINT);
        }
      });
  EXPECT_TRUE(sent);
  EXPECT_EQ(r.echoed, "ready\ngot INT\n");
  EXPECT_EQ(r.outcome.ended, Ended::Interrupted);
  EXPECT_EQ(r.outcome.exit_code, kExitSigint);
  EXPECT_EQ(r.outcome.interrupted, SIGINT);
}

TEST(Supervisor, AProgramThatCannotStartIsRefusedNamingTheFlag) {
  try {
    supervise_launch({"/nonexistent/eth-mpirun", "-n", "2"}, two_ranks(), {});
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.source(), "--mpirun");
    EXPECT_NE(std::string(e.what()).find("cannot start /nonexistent/eth-mpirun"),
              std::string::npos) << e.what();
  }
}

TEST(CheckpointReport, RemovesTheTemporariesOfAWriteCutShortOnly) {
  const fs::path dir = test::scratch("supervisor", "report");
  EXPECT_EQ(checkpoint_report({}), "");
  EXPECT_EQ(checkpoint_report(dir / "absent"), "; no checkpoint was written");
  const std::string temp = "." + checkpoint_path(dir, 3).filename().string() + ".tmp-12-0";
  test::write(dir / temp, "partial");
  test::write(dir / "notes.txt", "kept");
  EXPECT_EQ(checkpoint_report(dir), "; no checkpoint was written");
  EXPECT_FALSE(fs::exists(dir / temp));
  EXPECT_TRUE(fs::exists(dir / "notes.txt"));
  // A newest checkpoint that does not read back is said so, not offered for --resume.
  test::write(checkpoint_path(dir, 5), "not a checkpoint");
  const std::string r = checkpoint_report(dir);
  EXPECT_NE(r.find("does not read back"), std::string::npos) << r;
  EXPECT_EQ(r.find("--resume"), std::string::npos) << r;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace eth::supervisor_test
