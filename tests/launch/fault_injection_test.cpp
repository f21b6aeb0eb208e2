// ETH_TEST_KILL_RANK (launch/fault_injection.h): the grammar RANK:STEP[:HOW][@RANKS] field by
// field with every malformed form refused naming the variable, which fault fires where, and, in
// forked children (death tests), what a firing fault does to its process and its checkpoint.
#include "launch/fault_injection.h"

#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "test_util.h"
#include "train/checkpoint.h"

namespace eth::fault_injection_test {
namespace {

using test::error_of;

TEST(FaultInjection, ParsesEachFieldAndEveryHow) {
  EXPECT_TRUE(parse_fault_specs("").empty());
  EXPECT_EQ(parse_fault_specs("1:12"), (std::vector<FaultSpec>{{1, 12, FaultHow::Exit, 0}}));
  EXPECT_EQ(parse_fault_specs("0:3:kill@4,2:5:stop,1:7:checkpoint,3:0:hold@2,4:9:exit"),
            (std::vector<FaultSpec>{{0, 3, FaultHow::Kill, 4},
                                    {2, 5, FaultHow::Stop, 0},
                                    {1, 7, FaultHow::Checkpoint, 0},
                                    {3, 0, FaultHow::Hold, 2},
                                    {4, 9, FaultHow::Exit, 0}}));
}

TEST(FaultInjection, EveryMalformedFaultIsRefusedNamingTheVariable) {
  for (const std::string bad :
       {"1", "1:", ":2", "a:2", "1:b", "-1:2", "1:-2", "+1:2", "1:2:", "1:2:crash", "1:2:KILL",
        "1:2@", "1:2@0", "1:2@x", "1:2@2:kill", "1:2 ", " 1:2", "1:2,,3:4", "1:2:kill:3",
        "99999999999:1"}) {
    const std::string e = error_of([&] { parse_fault_specs(bad); });
    EXPECT_NE(e.find("ETH_TEST_KILL_RANK"), std::string::npos) << "\"" << bad << "\": " << e;
    EXPECT_NE(e.find("got \"" + bad + "\""), std::string::npos) << "\"" << bad << "\": " << e;
  }
}

TEST(FaultInjection, AFaultFiresOnItsRankStepAndRunSizeOnly) {
  const std::vector<FaultSpec> f = parse_fault_specs("1:5@4,2:5,0:8:checkpoint");
  EXPECT_EQ(find_fault(f, 1, 4, 5, false), &f[0]);
  EXPECT_EQ(find_fault(f, 1, 3, 5, false), nullptr);  // @4: not in a run of 3 ranks
  EXPECT_EQ(find_fault(f, 1, 4, 6, false), nullptr);
  EXPECT_EQ(find_fault(f, 0, 4, 5, false), nullptr);
  EXPECT_EQ(find_fault(f, 2, 3, 5, false), &f[1]);   // no @: any run
  EXPECT_EQ(find_fault(f, 2, 9, 5, false), &f[1]);
  EXPECT_EQ(find_fault(f, 2, 9, 5, true), nullptr);   // not a checkpoint fault
  EXPECT_EQ(find_fault(f, 0, 2, 8, true), &f[2]);
  EXPECT_EQ(find_fault(f, 0, 2, 8, false), nullptr);  // a checkpoint fault fires only there
}

// The variable is read once per process, so each case runs in a forked child that sets it first
// (the parent never reads it).
TEST(FaultInjectionDeathTest, ExitKillAndHoldDoWhatTheySay) {
  EXPECT_EXIT(
      {
        ::setenv("ETH_TEST_KILL_RANK", "1:3", 1);
        maybe_fail_before_step(0, 2, 3, {});  // another rank: nothing
        maybe_fail_before_step(1, 2, 2, {});  // another step: nothing
        maybe_fail_before_step(1, 2, 3, {});
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(9), R"(\[fault\] ETH_TEST_KILL_RANK: rank 1 exits abruptly at step 3 at monotonic [0-9.]+ s)");
  EXPECT_EXIT(
      {
        ::setenv("ETH_TEST_KILL_RANK", "0:1:kill", 1);
        maybe_fail_before_step(0, 1, 1, {});
        std::_Exit(0);
      },
      ::testing::KilledBySignal(SIGKILL), "rank 0 dies of SIGKILL at step 1");
  // Hold is no failure: with its stop file already there it returns at once, silently.
  const std::filesystem::path dir = test::scratch("fault_injection", "hold");
  const std::string stop = test::write(dir / "stop", "");
  EXPECT_EXIT(
      {
        ::setenv("ETH_TEST_KILL_RANK", "0:2:hold", 1);
        maybe_fail_before_step(0, 1, 2, stop);
        std::_Exit(7);
      },
      ::testing::ExitedWithCode(7), "^$");
  std::filesystem::remove_all(dir);
}

// Rank 0 dying mid-checkpoint leaves AtomicFile's temporary, never the checkpoint's own name.
TEST(FaultInjectionDeathTest, CheckpointFaultLeavesOnlyATemporary) {
  const std::filesystem::path dir = test::scratch("fault_injection", "checkpoint");
  EXPECT_EXIT(
      {
        ::setenv("ETH_TEST_KILL_RANK", "0:4:checkpoint", 1);
        maybe_fail_before_step(0, 2, 4, {});  // not a before-step fault
        maybe_fail_in_checkpoint(0, 2, 4, dir);
        std::_Exit(0);
      },
      ::testing::KilledBySignal(SIGKILL), "rank 0 dies of SIGKILL while writing its checkpoint");
  EXPECT_FALSE(std::filesystem::exists(checkpoint_path(dir, 4)));
  int temporaries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    EXPECT_EQ(name.rfind("." + checkpoint_path(dir, 4).filename().string() + ".tmp-", 0), 0u)
        << name;
    ++temporaries;
  }
  EXPECT_EQ(temporaries, 1);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace eth::fault_injection_test
