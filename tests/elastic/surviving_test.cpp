// The cluster left after devices are lost: every surviving device keeps its type and node
// (checked device by device against the full cluster), links between survivors are the links
// they had, lost ids are refused when they are not devices, and losing everything is an error.
#include <gtest/gtest.h>

#include "cluster/cluster_spec.h"
#include "elastic/surviving.h"
#include "test_util.h"

namespace eth {
namespace {

using test::error_of;

ClusterSpec preset(const std::string& name) { return load_cluster(name); }

// Every property a re-plan relies on, checked against the full cluster independently of how
// surviving_cluster builds the new one.
void expect_consistent(const ClusterSpec& full, const std::set<std::int64_t>& lost,
                       const SurvivingCluster& s) {
  ASSERT_EQ(s.cluster.num_devices(), full.num_devices() - static_cast<std::int64_t>(lost.size()));
  ASSERT_EQ(static_cast<std::int64_t>(s.original.size()), s.cluster.num_devices());
  EXPECT_EQ(std::vector<std::int64_t>(lost.begin(), lost.end()), s.lost);
  std::set<std::int64_t> seen;
  for (std::int64_t d = 0; d < s.cluster.num_devices(); ++d) {
    const std::int64_t o = s.original[static_cast<std::size_t>(d)];
    EXPECT_EQ(lost.count(o), 0u) << "device " << d << " maps to lost device " << o;
    EXPECT_TRUE(seen.insert(o).second) << "two devices map to " << o;
    EXPECT_EQ(s.cluster.device(d).device_type, full.device(o).device_type);
    if (d > 0) {
      EXPECT_LT(s.original[static_cast<std::size_t>(d - 1)], o) << "order kept";
    }
    for (std::int64_t e = 0; e < d; ++e) {
      const std::int64_t oe = s.original[static_cast<std::size_t>(e)];
      EXPECT_EQ(s.cluster.link_bytes_per_s(d, e), full.link_bytes_per_s(o, oe));
      EXPECT_EQ(s.cluster.device(d).node == s.cluster.device(e).node,
                full.device(o).node == full.device(oe).node);
    }
    EXPECT_EQ(s.original_node.at(static_cast<std::size_t>(s.cluster.device(d).node)),
              full.device(o).node);
  }
}

TEST(SurvivingCluster, OneDeviceLostKeepsEveryOtherDeviceWhereItWas) {
  const ClusterSpec full = preset("cpu-emulated");  // 2 fast (node 0) + 2 slow (node 1)
  for (std::int64_t lost = 0; lost < full.num_devices(); ++lost) {
    SCOPED_TRACE(lost);
    const SurvivingCluster s = surviving_cluster(full, {lost});
    expect_consistent(full, {lost}, s);
    EXPECT_EQ(s.cluster.nodes.size(), 2u);
  }
}

TEST(SurvivingCluster, AWholeNodeLostDropsTheNode) {
  const ClusterSpec full = preset("13b-910b2-910b4");  // 8 nodes of 8
  std::set<std::int64_t> node1;
  for (std::int64_t d = 8; d < 16; ++d) node1.insert(d);
  const SurvivingCluster s = surviving_cluster(full, node1);
  expect_consistent(full, node1, s);
  EXPECT_EQ(s.cluster.nodes.size(), full.nodes.size() - 1);
}

TEST(SurvivingCluster, ScatteredLossesAcrossTypes) {
  const ClusterSpec full = preset("13b-910b2-910b4");
  const std::set<std::int64_t> lost{0, 9, 10, 33, 63};
  expect_consistent(full, lost, surviving_cluster(full, lost));
}

TEST(SurvivingCluster, RefusesIdsOutsideTheClusterAndLosingEverything) {
  const ClusterSpec full = preset("cpu-emulated");
  EXPECT_NE(error_of([&] { surviving_cluster(full, {4}); }).find("not a device of cluster"),
            std::string::npos);
  EXPECT_NE(error_of([&] { surviving_cluster(full, {-1}); }).find("not a device"),
            std::string::npos);
  EXPECT_NE(error_of([&] { surviving_cluster(full, {0, 1, 2, 3}); }).find("nothing left"),
            std::string::npos);
}

TEST(SurvivingCluster, DescribesADeviceByTypeAndNode) {
  const ClusterSpec full = preset("cpu-emulated");
  EXPECT_EQ(describe_device(full, 3), "3 (cpu-slow, node 1)");
  EXPECT_EQ(describe_device(full, 0), "0 (cpu-fast, node 0)");
}

}  // namespace
}  // namespace eth
