// mpirun_argv: the flags this machine needs (shared/notes/machine-figures.md) and validation
// that names the field.
#include <gtest/gtest.h>

#include <algorithm>

#include "comm/mpirun.h"
#include "core/error.h"

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

TEST(Mpirun, RootHostfileAndEnvironmentOptions) {
  MpirunOptions o;
  o.num_ranks = 8;
  o.as_root = true;
  o.oversubscribe = false;
  o.hostfile = "/etc/hosts.mpi";
  o.env.push_back("OMP_NUM_THREADS=1");
  o.env.push_back("OPENBLAS_CORETYPE");
  const std::vector<std::string> argv = mpirun_argv(o, {"prog"});
  EXPECT_EQ(argv[1], "--allow-run-as-root");
  EXPECT_FALSE(has(argv, "--oversubscribe"));
  EXPECT_EQ(after(argv, "--hostfile"), "/etc/hosts.mpi");
  EXPECT_EQ(after(argv, "btl"), "self,vader,tcp");  // vader is shared memory only
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "-x"), 3);
  EXPECT_TRUE(has(argv, "OMP_NUM_THREADS=1"));
  EXPECT_TRUE(has(argv, "OPENBLAS_CORETYPE"));
  EXPECT_EQ(after(argv, "-n"), "8");
  EXPECT_EQ(argv.back(), "prog");

  o.as_root = false;
  EXPECT_FALSE(has(mpirun_argv(o, {"prog"}), "--allow-run-as-root"));
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
  o.mpirun = "";
  EXPECT_EQ(field_of(o, {"prog"}), "mpirun");
}

}  // namespace
}  // namespace eth
