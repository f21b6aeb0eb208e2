// The search space: partitions use every device of every type exactly (or count the idle
// ones), the mixed and layer families, and the bounds applied while generating. (Packing a
// partition onto devices is tested in packing_test.cpp.)
#include "search/partition.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "search/partition_fixture.h"

namespace eth::search {
namespace {

using partition_fixture::cluster;
using partition_fixture::gen;
using partition_fixture::types_with_tps;

TEST(Partition, ClusterTypesCountDevicesPerType) {
  const ClusterSpec c =
      cluster(R"({"device_type": "B", "devices": 3}, {"device_type": "A", "devices": 4},
      {"device_type": "B", "devices": 2})");
  const auto types = cluster_types(c);
  ASSERT_EQ(types.size(), 2u);
  EXPECT_EQ(types[0].name, "A");  // name order
  EXPECT_EQ(types[0].devices, 4);
  EXPECT_EQ(types[1].devices, 5);
  EXPECT_EQ(types[1].nodes, (std::vector<std::int64_t>{0, 2}));
  EXPECT_EQ(types[1].max_node_devices, 3);
  EXPECT_DOUBLE_EQ(types[1].capacity_bytes, 20e9);
}

TEST(Partition, EveryPartitionCoversEveryDeviceExactlyOrCountsIdle) {
  const ClusterSpec c =
      cluster(R"({"device_type": "A", "devices": 4}, {"device_type": "A", "devices": 2},
      {"device_type": "B", "devices": 4}, {"device_type": "C", "devices": 3})");
  const auto types = types_with_tps(c, {1, 2, 4});
  for (bool idle : {false, true}) {
    TemplateSet set;
    std::vector<Partition> parts;
    const GenerateOptions opt = gen(10, 12, idle);
    generate_partitions(types, opt, set, parts);
    layer_partitions(types, opt, set, parts);
    ASSERT_FALSE(parts.empty());
    for (const Partition& p : parts) {
      EXPECT_LE(p.num_pipelines(), 12);
      for (std::size_t x = 0; x < types.size(); ++x) {
        std::int64_t used = 0;
        for (const auto& part : p.parts) {
          used += part.count * set.at(part.tpl).devices_of(static_cast<int>(x));
          EXPECT_LE(set.at(part.tpl).num_stages(), 10);
        }
        EXPECT_EQ(used + p.idle[x], types[x].devices);
        if (!idle) {
          EXPECT_EQ(p.idle[x], 0);
        }
      }
    }
  }
}

TEST(Partition, MixedFamilyHoldsTheLayerShapesOfTwoTypes) {
  const ClusterSpec c =
      cluster(R"({"device_type": "A", "devices": 4}, {"device_type": "B", "devices": 4})");
  const auto types = types_with_tps(c, {1, 2});
  TemplateSet set;
  std::vector<Partition> eth_parts, layer_parts;
  generate_partitions(types, gen(12, 64, false), set, eth_parts);
  layer_partitions(types, gen(12, 64, false), set, layer_parts);
  std::set<std::pair<int, std::int64_t>> eth_single;
  for (const auto& p : eth_parts) {
    if (p.parts.size() == 1) eth_single.insert({p.parts[0].tpl, p.parts[0].count});
  }
  ASSERT_FALSE(layer_parts.empty());
  for (const auto& p : layer_parts) {
    EXPECT_TRUE(eth_single.count({p.parts[0].tpl, p.parts[0].count}))
        << describe_template(set.at(p.parts[0].tpl), types) << " x" << p.parts[0].count;
  }
}

}  // namespace
// The bound applied while generating: with a threshold, the partitions built plus those
// counted as pruned are exactly the partitions of the unbounded space, and every one left out
// cannot take the global batch within the threshold (its data balance over the same options,
// computed here from the full list, is above it). Synthetic options per template: a template's
// pipelines are slower the fewer devices of type A they hold.
TEST(Partition, GenerationBoundLeavesOutOnlyPartitionsAboveTheThreshold) {
  const ClusterSpec c =
      cluster(R"({"device_type": "A", "devices": 8}, {"device_type": "B", "devices": 8},
      {"device_type": "C", "devices": 6})");
  const auto types = types_with_tps(c, {1, 2, 4});
  const std::int64_t gbs = 40;
  TemplateSet set;
  std::vector<std::vector<MicroBatchOption>> opts;
  auto options_of = [&](int tpl) -> const std::vector<MicroBatchOption>& {
    while (static_cast<int>(opts.size()) <= tpl) {
      const PipelineTemplate& t = set.at(static_cast<int>(opts.size()));
      const double speed = 1.0 + static_cast<double>(t.devices_of(0)) +
                           0.5 * static_cast<double>(t.devices_of(1) + t.devices_of(2));
      opts.push_back({MicroBatchOption{1, 10.0 / speed + static_cast<double>(t.num_stages()),
                                       5.0 / speed},
                      MicroBatchOption{4, 30.0 / speed + static_cast<double>(t.num_stages()),
                                       16.0 / speed}});
    }
    return opts[static_cast<std::size_t>(tpl)];
  };
  std::vector<Partition> all;
  GenerateOptions full = gen(10, gbs, false);
  generate_partitions(types, full, set, all);
  ASSERT_GT(all.size(), 500u);
  auto bound_of = [&](const Partition& p) {
    std::vector<PipelineKind> kinds;
    for (const auto& part : p.parts) kinds.push_back(PipelineKind{options_of(part.tpl), part.count});
    return balanced_time_ms(kinds, gbs);
  };
  auto key = [](const Partition& p) {
    std::vector<std::pair<int, std::int64_t>> k;
    for (const auto& part : p.parts) k.emplace_back(part.tpl, part.count);
    return k;
  };
  std::vector<double> bounds;
  for (const auto& p : all) bounds.push_back(bound_of(p));
  std::vector<double> sorted = bounds;
  std::sort(sorted.begin(), sorted.end());
  for (const double threshold : {sorted[sorted.size() / 50], sorted[sorted.size() / 4]}) {
    std::vector<Partition> kept;
    std::int64_t pruned = 0;
    GenerateOptions g = gen(10, gbs, false);
    g.threshold = [threshold] { return threshold; };
    g.bound_options = options_of;
    g.gbs = gbs;
    g.pruned = &pruned;
    generate_partitions(types, g, set, kept);
    EXPECT_GT(pruned, 0);
    EXPECT_EQ(static_cast<std::int64_t>(kept.size()) + pruned,
              static_cast<std::int64_t>(all.size()));
    std::multiset<std::vector<std::pair<int, std::int64_t>>> kept_keys;
    for (const auto& p : kept) kept_keys.insert(key(p));
    for (std::size_t i = 0; i < all.size(); ++i) {
      const auto it = kept_keys.find(key(all[i]));
      if (it != kept_keys.end()) {
        kept_keys.erase(it);
      } else {
        EXPECT_GT(bounds[i], threshold) << "a partition within the threshold was left out";
      }
    }
    EXPECT_TRUE(kept_keys.empty()) << "a partition was built that the full space lacks";
  }
}


// The layer family's order-free bound: with a threshold, the layer shapes built plus those
// counted as pruned are the whole layer space, and every order left out cannot take the global
// batch within it (its data balance over its own options, which depend on the order, is above
// it). The order-free options leave out the order's term, so they are below every order's.
TEST(Partition, LayerOrderFreeBoundLeavesOutOnlyShapesAboveTheThreshold) {
  const ClusterSpec c =
      cluster(R"({"device_type": "A", "devices": 8}, {"device_type": "B", "devices": 8},
      {"device_type": "C", "devices": 8})");
  const auto types = types_with_tps(c, {1, 2, 4});
  const std::int64_t gbs = 24;
  TemplateSet set;
  auto options_for = [](const PipelineTemplate& t, bool with_order) {
    const double speed = 1.0 + static_cast<double>(t.devices_of(0)) +
                         0.5 * static_cast<double>(t.devices_of(1) + t.devices_of(2));
    // Pipelines that start on type C pay for it: a term only the order decides.
    const double order = with_order && t.groups.front().type == 2 ? 3.0 : 0.0;
    return std::vector<MicroBatchOption>{
        MicroBatchOption{1, 10.0 / speed + static_cast<double>(t.num_stages()) + order,
                         5.0 / speed + order},
        MicroBatchOption{4, 30.0 / speed + static_cast<double>(t.num_stages()) + order,
                         16.0 / speed}};
  };
  std::vector<std::vector<MicroBatchOption>> opts;
  auto options_of = [&](int tpl) -> const std::vector<MicroBatchOption>& {
    while (static_cast<int>(opts.size()) <= tpl) {
      opts.push_back(options_for(set.at(static_cast<int>(opts.size())), true));
    }
    return opts[static_cast<std::size_t>(tpl)];
  };
  std::vector<MicroBatchOption> scratch;
  auto order_free = [&](const PipelineTemplate& t) -> const std::vector<MicroBatchOption>& {
    scratch = options_for(t, false);
    return scratch;
  };
  std::vector<Partition> all;
  layer_partitions(types, gen(10, gbs, false), set, all);
  ASSERT_GT(all.size(), 50u);
  auto bound_of = [&](const Partition& p) {
    const PartitionPart& part = p.parts.front();
    return balanced_time_ms({PipelineKind{options_of(part.tpl), part.count}}, gbs);
  };
  std::vector<double> bounds;
  for (const auto& p : all) bounds.push_back(bound_of(p));
  std::vector<double> sorted = bounds;
  std::sort(sorted.begin(), sorted.end());
  for (const double threshold : {sorted[sorted.size() / 10], sorted[sorted.size() / 2]}) {
    std::vector<Partition> kept;
    std::int64_t pruned = 0, unusable = 0;
    GenerateOptions g = gen(10, gbs, false);
    g.usable = [](int) { return true; };
    g.unusable = &unusable;
    g.threshold = [threshold] { return threshold; };
    g.bound_options = options_of;
    g.order_free = order_free;
    g.gbs = gbs;
    g.pruned = &pruned;
    layer_partitions(types, g, set, kept);
    EXPECT_GT(pruned, 0);
    EXPECT_EQ(unusable, 0);
    EXPECT_EQ(static_cast<std::int64_t>(kept.size()) + pruned,
              static_cast<std::int64_t>(all.size()));
    std::multiset<int> kept_tpls;
    for (const auto& p : kept) kept_tpls.insert(p.parts.front().tpl);
    for (std::size_t i = 0; i < all.size(); ++i) {
      const auto it = kept_tpls.find(all[i].parts.front().tpl);
      if (it != kept_tpls.end()) {
        kept_tpls.erase(it);
      } else {
        EXPECT_GT(bounds[i], threshold) << "a shape within the threshold was left out";
      }
    }
    EXPECT_TRUE(kept_tpls.empty()) << "a shape was built that the full space lacks";
  }
}

}  // namespace eth::search
