// Rank placement from a hostfile (launch/hosts.h): host k runs the plan's devices of cluster node
// k, the hostfile's own problems are named with its path and line, a plan device outside the
// cluster names the plan, and the ETH_* variables are listed by name.
#include "launch/hosts.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "test_util.h"

namespace eth::hosts_test {
namespace {

// Three nodes of two devices: ids 0-1, 2-3, 4-5.
ClusterSpec three_nodes() {
  ClusterSpec c;
  c.nodes = {NodeSpec{"cpu", 2}, NodeSpec{"cpu", 2}, NodeSpec{"cpu", 2}};
  return c;
}

// One pipeline whose stages run on `stage_devices`.
Plan plan_on(const std::vector<std::vector<std::int64_t>>& stage_devices) {
  Plan p;
  PipelinePlan pipe;
  for (const auto& d : stage_devices) {
    StagePlan s;
    s.devices = d;
    s.dp = static_cast<std::int64_t>(d.size());
    pipe.stages.push_back(s);
  }
  p.pipelines.push_back(pipe);
  return p;
}

class HostsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::scratch("hosts", ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string hostfile(const std::string& text) { return test::write(dir_ / "hosts", text); }
  std::filesystem::path dir_;
};

TEST_F(HostsTest, EachRankGoesToTheHostOfItsNode) {
  const std::string h = hostfile("alpha slots=2\n# spare below\nbeta\ngamma\n");
  // Devices 1 (node 0), 4 and 5 (node 2): node 1 has no rank, so beta stays idle.
  EXPECT_EQ(launch_hosts(plan_on({{1}, {4, 5}}), "p.json", three_nodes(), h),
            (std::vector<HostRanks>{{"alpha", 1}, {"gamma", 2}}));
  EXPECT_EQ(launch_hosts(plan_on({{0, 1}, {2}, {3}}), "p.json", three_nodes(), h),
            (std::vector<HostRanks>{{"alpha", 2}, {"beta", 2}}));
}

TEST_F(HostsTest, HostfileProblemsNameTheFileAndLine) {
  const Plan p = plan_on({{0}, {2}});
  auto error = [&](const std::string& text) {
    return test::error_of([&] { launch_hosts(p, "p.json", three_nodes(), hostfile(text)); });
  };
  const std::string file = (dir_ / "hosts").string();
  for (const auto& [text, where] : std::vector<std::pair<std::string, std::string>>{
           {"a\nb\na\n", "line 3"},            // listed twice
           {"a\nb slots\n", "line 2"},         // a word that is not key=value
           {"a\nb =2\n", "line 2"},            // no key
           {"a\nb slots=\n", "line 2"},        // no value
           {"a\n\n\nb:2\n", "line 4"},         // not a host name
           {"# none\n\n", "at least one host"},
           {"a\n", "node 1"}}) {               // fewer hosts than the plan's nodes
    const std::string e = error(text);
    EXPECT_NE(e.find(file), std::string::npos) << text << ": " << e;
    EXPECT_NE(e.find(where), std::string::npos) << text << ": " << e;
  }
  const std::string missing = test::error_of(
      [&] { launch_hosts(p, "p.json", three_nodes(), (dir_ / "absent").string()); });
  EXPECT_NE(missing.find((dir_ / "absent").string()), std::string::npos) << missing;
}

TEST_F(HostsTest, APlanDeviceOutsideTheClusterNamesThePlan) {
  const std::string e = test::error_of(
      [&] { launch_hosts(plan_on({{0}, {6}}), "p.json", three_nodes(), hostfile("a\nb\nc\n")); });
  EXPECT_NE(e.find("p.json"), std::string::npos) << e;
  EXPECT_NE(e.find("device 6 is not in the cluster's 6 devices"), std::string::npos) << e;
}

TEST(EthEnvironment, ListsTheNamesOfTheEthVariablesOnly) {
  ::setenv("ETH_HOSTS_TEST_A", "x=y", 1);
  ::setenv("NOT_ETH_HOSTS_TEST", "1", 1);
  const std::vector<std::string> names = eth_environment();
  EXPECT_NE(std::find(names.begin(), names.end(), "ETH_HOSTS_TEST_A"), names.end());
  for (const std::string& n : names) {
    EXPECT_EQ(n.rfind("ETH_", 0), 0u) << n;
    EXPECT_EQ(n.find('='), std::string::npos) << n;
  }
  ::unsetenv("ETH_HOSTS_TEST_A");
  ::unsetenv("NOT_ETH_HOSTS_TEST");
}

}  // namespace
}  // namespace eth::hosts_test
