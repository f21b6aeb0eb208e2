// mpirun_argv: the flags this machine needs (shared/notes/machine-figures.md), rank placement
// over hosts, hostfiles, and validation that names the field or line.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "launch/mpirun.h"
#include "test_util.h"

namespace eth {
namespace {

bool has(const std::vector<std::string>& argv, const std::string& flag) {
  return std::find(argv.begin(), argv.end(), flag) != argv.end();
}

// The value after `flag` (the first occurrence), or "" if absent.
std::string after(const std::vector<std::string>& argv, const std::string& flag) {
  auto it = std::find(argv.begin(), argv.end(), flag);
  return it == argv.end() || it + 1 == argv.end() ? "" : *(it + 1);
}

TEST(Mpirun, SingleHostCommandHasTheMachineFlagsThenTheProgram) {
  MpirunOptions o;
  o.num_ranks = 4;
  const std::vector<std::string> argv = mpirun_argv(o, {"./eth", "train", "--plan", "p.json"});
  const std::vector<std::string> want{
      "mpirun", "--oversubscribe", "--bind-to", "none", "--mca", "btl", "self,vader", "--mca",
      "btl_vader_single_copy_mechanism", "none", "-x", "GLIBC_TUNABLES=glibc.malloc.hugetlb=1",
      "-n", "4", "./eth", "train", "--plan", "p.json"};
  EXPECT_EQ(argv, want);
}

TEST(Mpirun, SingleCopyChoosesTheSharedMemoryMechanism) {
  MpirunOptions o;
  o.num_ranks = 2;
  EXPECT_EQ(after(mpirun_argv(o, {"prog"}), "btl_vader_single_copy_mechanism"), "none");
  o.single_copy = true;
  EXPECT_EQ(after(mpirun_argv(o, {"prog"}), "btl_vader_single_copy_mechanism"), "cma");
}

TEST(Mpirun, RootAndEnvironmentOptions) {
  MpirunOptions o;
  o.num_ranks = 8;
  o.as_root = true;
  o.oversubscribe = false;
  o.env.push_back("OMP_NUM_THREADS=1");
  o.env.push_back("OPENBLAS_CORETYPE");
  const std::vector<std::string> argv = mpirun_argv(o, {"prog"});
  EXPECT_EQ(argv[1], "--allow-run-as-root");
  EXPECT_FALSE(has(argv, "--oversubscribe"));
  EXPECT_FALSE(has(argv, "--host"));
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "-x"), 3);
  EXPECT_TRUE(has(argv, "OMP_NUM_THREADS=1"));
  EXPECT_TRUE(has(argv, "OPENBLAS_CORETYPE"));
  EXPECT_EQ(after(argv, "-n"), "8");
  EXPECT_EQ(argv.back(), "prog");

  o.as_root = false;
  EXPECT_FALSE(has(mpirun_argv(o, {"prog"}), "--allow-run-as-root"));
  EXPECT_FALSE(has(mpirun_argv(o, {"prog"}), "odls_base_sigkill_timeout"));
  o.kill_at_once = true;
  EXPECT_EQ(after(mpirun_argv(o, {"prog"}), "odls_base_sigkill_timeout"), "0");
}

TEST(Mpirun, SeveralHostsAreFilledInOrderOverTcpOnTheGivenNetwork) {
  MpirunOptions o;
  o.num_ranks = 5;
  o.hosts = {{"node-a", 2}, {"10.0.0.7", 1}, {"node-c", 2}};
  o.network = "10.0.0.0/24";
  const std::vector<std::string> argv = mpirun_argv(o, {"prog"});
  EXPECT_EQ(after(argv, "--host"), "node-a:2,10.0.0.7:1,node-c:2");
  EXPECT_EQ(after(argv, "--map-by"), "slot");  // fill a host's ranks before the next host
  EXPECT_EQ(after(argv, "btl"), "self,vader,tcp");  // vader is shared memory only
  EXPECT_EQ(after(argv, "coll_libnbc_iallreduce_algorithm"), "ring");
  EXPECT_EQ(after(argv, "btl_tcp_if_include"), "10.0.0.0/24");
  EXPECT_EQ(after(argv, "oob_tcp_if_include"), "10.0.0.0/24");
  o.network = "";
  EXPECT_FALSE(has(mpirun_argv(o, {"prog"}), "btl_tcp_if_include"));
}

TEST(Mpirun, HostfileListsHostsInOrderAndIgnoresSlots) {
  const std::string text =
      "# the cluster's nodes\n"
      "node-a slots=8\n"
      "\n"
      "  10.0.0.7 max_slots=2   # node 1\n"
      "node-c\n";
  EXPECT_EQ(parse_hostfile(text, "hosts"),
            (std::vector<std::string>{"node-a", "10.0.0.7", "node-c"}));
}

TEST(Mpirun, BadHostfilesNameTheLine) {
  auto error = [](const std::string& text) {
    return test::error_of([&] { parse_hostfile(text, "h.txt"); });
  };
  EXPECT_NE(error("a\nb\na slots=2\n").find("line 3: host a is already listed on line 1"),
            std::string::npos)
      << error("a\nb\na slots=2\n");
  EXPECT_NE(error("a\nb slots\n").find("line 2"), std::string::npos);
  EXPECT_NE(error("a\nb:2\n").find("line 2"), std::string::npos);
  EXPECT_NE(error("# nothing\n\n").find("at least one host"), std::string::npos);
  EXPECT_NE(error("a\n").find("(no error)"), std::string::npos);
}

TEST(Mpirun, RanksGoToTheHostOfTheirNode) {
  // Ranks 0-1 on node 0, 2 on node 2, 3-5 on node 3; node 1 (no rank) leaves host b idle.
  const std::vector<std::string> hosts{"a", "b", "c", "d", "spare"};
  const std::vector<HostRanks> placed = place_on_hosts({0, 0, 2, 3, 3, 3}, hosts, "h");
  EXPECT_EQ(placed, (std::vector<HostRanks>{{"a", 2}, {"c", 1}, {"d", 3}}));
  const std::vector<std::string> want{"a", "a", "c", "d", "d", "d"};
  for (int r = 0; r < 6; ++r) EXPECT_EQ(host_of_rank(placed, r), want[r]) << r;
  EXPECT_EQ(host_of_rank(placed, 6), "");
  EXPECT_EQ(host_of_rank({}, 0), "");

  const std::string err =
      test::error_of([&] { place_on_hosts({0, 1, 4}, {"a", "b", "c"}, "h.txt"); });
  EXPECT_NE(err.find("h.txt"), std::string::npos) << err;
  EXPECT_NE(err.find("rank 2 runs a device of cluster node 4"), std::string::npos) << err;
}

TEST(Mpirun, BadOptionsNameTheField) {
  auto field_of = [](const MpirunOptions& o, const std::vector<std::string>& program) {
    try {
      mpirun_argv(o, program);
    } catch (const InputError& e) {
      return e.path();
    }
    return std::string("(nothing thrown)");
  };
  MpirunOptions o;
  EXPECT_EQ(field_of(o, {}), "program");
  o.num_ranks = 0;
  EXPECT_EQ(field_of(o, {"prog"}), "num_ranks");
  o.num_ranks = 2;
  o.env.push_back("1BAD=x");
  EXPECT_EQ(field_of(o, {"prog"}), "env[1]");
  o.env = {};
  o.network = "eth1";
  EXPECT_EQ(field_of(o, {"prog"}), "network");  // a network needs hosts
  o.hosts = {{"a", 1}, {"b", 2}};
  EXPECT_EQ(field_of(o, {"prog"}), "hosts");  // 3 ranks placed, 2 run
  o.hosts = {{"a", 1}, {"b c", 1}};
  EXPECT_EQ(field_of(o, {"prog"}), "hosts[1]");
  o.hosts = {{"a", 1}, {"b", 1}};
  o.network = "eth1;rm";
  EXPECT_EQ(field_of(o, {"prog"}), "network");
  o.network = "";
  o.mpirun = "";
  EXPECT_EQ(field_of(o, {"prog"}), "mpirun");
}

}  // namespace
}  // namespace eth
