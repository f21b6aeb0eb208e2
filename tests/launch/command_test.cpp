// eth launch's command line (launch/command.h): the program part every rank runs (this program,
// train, the plan, the MPI backend, eth train's arguments, the device), the choices it makes for
// mpirun (single copy, the ETH_* variables for other hosts, killing at once), the refusal of a
// second --plan, and the shell text of a command line read back by a real shell.
#include "launch/command.h"

#include <gtest/gtest.h>
#include <stdio.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "test_util.h"

namespace eth::command_test {
namespace {

using Argv = std::vector<std::string>;

// What follows "-n N": the program each rank runs.
Argv program_of(const Argv& argv) {
  const auto n = std::find(argv.begin(), argv.end(), "-n");
  return n == argv.end() || n + 1 == argv.end() ? Argv{} : Argv(n + 2, argv.end());
}

std::string value_after(const Argv& argv, const std::string& flag) {
  const auto it = std::find(argv.begin(), argv.end(), flag);
  return it == argv.end() || it + 1 == argv.end() ? "" : *(it + 1);
}

LaunchArgs args(const std::string& single_copy = "none") {
  LaunchArgs a;
  a.plan = "p.json";
  a.mpirun = "my-mpirun";
  a.single_copy = single_copy;
  return a;
}

TEST(LaunchCommand, RanksRunThisProgramsTrainOnThePlanOverMpi) {
  const std::string self = std::filesystem::canonical("/proc/self/exe").string();
  const Argv argv = train_launch_argv(args(), "plan-2.json", 3, {}, {"--steps", "5", "--log=x"});
  EXPECT_EQ(argv.front(), "my-mpirun");
  EXPECT_EQ(value_after(argv, "-n"), "3");
  EXPECT_EQ(program_of(argv), (Argv{self, "train", "--plan", "plan-2.json", "--backend", "mpi",
                                    "--steps", "5", "--log=x"}));
}

TEST(LaunchCommand, TheDeviceGoesToEveryRankUnlessItIsTheCpu) {
  LaunchArgs a = args();
  a.device = "emulated";
  Argv program = program_of(train_launch_argv(a, "p.json", 2, {}, {"--steps", "1"}));
  EXPECT_EQ(Argv(program.end() - 4, program.end()), (Argv{"--steps", "1", "--device", "emulated"}));
  a.device = "cpu";
  program = program_of(train_launch_argv(a, "p.json", 2, {}, {}));
  EXPECT_EQ(std::count(program.begin(), program.end(), "--device"), 0);
}

TEST(LaunchCommand, ASecondPlanAfterTheDoubleDashIsRefused) {
  for (const Argv& train : {Argv{"--plan", "q.json"}, Argv{"--steps", "2", "--plan=q.json"}}) {
    const std::string e = test::error_of([&] { train_launch_argv(args(), "p.json", 2, {}, train); });
    EXPECT_NE(e.find("--plan"), std::string::npos) << e;
    EXPECT_NE(e.find("not after --"), std::string::npos) << e;
  }
  // A flag that only starts like it is eth train's business.
  EXPECT_EQ(test::error_of([&] { train_launch_argv(args(), "p.json", 2, {}, {"--planner", "x"}); }),
            "(no error)");
}

TEST(LaunchCommand, SingleCopyIsCmaOnlyWhenAskedOrProbedOnOneHost) {
  const std::vector<HostRanks> two_hosts{{"a", 1}, {"b", 1}};
  EXPECT_EQ(value_after(train_launch_argv(args("cma"), "p", 2, {}, {}),
                        "btl_vader_single_copy_mechanism"), "cma");
  EXPECT_EQ(value_after(train_launch_argv(args("none"), "p", 2, {}, {}),
                        "btl_vader_single_copy_mechanism"), "none");
  // auto never picks cma across hosts: another host's kernel may forbid it.
  EXPECT_EQ(value_after(train_launch_argv(args("auto"), "p", 2, two_hosts, {}),
                        "btl_vader_single_copy_mechanism"), "none");
}

TEST(LaunchCommand, OtherHostsGetTheEthVariablesAndKillAtOnceIsPassed) {
  ::setenv("ETH_COMMAND_TEST_PROBE", "1", 1);
  const std::vector<HostRanks> two_hosts{{"a", 1}, {"b", 1}};
  const Argv here = train_launch_argv(args(), "p", 2, {}, {});
  EXPECT_EQ(std::count(here.begin(), here.end(), "ETH_COMMAND_TEST_PROBE"), 0);
  const Argv there = train_launch_argv(args(), "p", 2, two_hosts, {}, true);
  const auto x = std::find(there.begin(), there.end(), "ETH_COMMAND_TEST_PROBE");
  ASSERT_NE(x, there.end());
  EXPECT_EQ(*(x - 1), "-x");
  EXPECT_EQ(value_after(there, "odls_base_sigkill_timeout"), "0");
  EXPECT_EQ(value_after(here, "odls_base_sigkill_timeout"), "");
  ::unsetenv("ETH_COMMAND_TEST_PROBE");
}

// The text is what a shell splits back into the same words (checked with /bin/sh itself).
TEST(LaunchCommand, CommandLineTextReadsBackThroughAShell) {
  const Argv words{"plain", "two words", "it's", "", "$HOME", "back\\slash", "`x`", "a\"b", "tab\there"};
  const std::string text = command_line_text(words);
  EXPECT_EQ(text.substr(0, 6), "plain ");  // a plain word is left as it is
  FILE* sh = ::popen(("printf '%s\\n' " + text).c_str(), "r");
  ASSERT_NE(sh, nullptr);
  std::string out;
  std::array<char, 256> buf{};
  while (const std::size_t n = std::fread(buf.data(), 1, buf.size(), sh)) out.append(buf.data(), n);
  EXPECT_EQ(::pclose(sh), 0);
  std::string want;
  for (const std::string& w : words) want += w + "\n";
  EXPECT_EQ(out, want);
}

}  // namespace
}  // namespace eth::command_test
