// Packing a partition's stages onto devices: a case placed by hand from the rule (stages by tp
// descending, each into the first node of its type with room, its lowest free devices), the
// counting shortcut agreeing with the placement, every placement valid (tp devices of the
// stage's type in one node, none used twice), and, for tp degrees and node sizes that are powers
// of two, first fit finding a placement exactly when an exhaustive search does.
#include "search/partition.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "search/partition_fixture.h"

namespace eth::packing_test {
namespace {

using search::generate_partitions;
using search::pack_devices;
using search::pack_feasible;
using search::Partition;
using search::PipelineTemplate;
using search::TemplateSet;
using search::partition_fixture::cluster;
using search::partition_fixture::gen;
using search::partition_fixture::types_with_tps;

TEST(Packing, StagesGoByTpDescendingToTheFirstNodeWithRoom) {
  // Node 0: A, ids 0-3; node 1: B, ids 4-5; node 2: A, ids 6-9. Types in name order: A 0, B 1.
  const ClusterSpec c = cluster(R"({"device_type": "A", "devices": 4},
      {"device_type": "B", "devices": 2}, {"device_type": "A", "devices": 4})");
  const auto types = types_with_tps(c, {1, 2});
  TemplateSet set;
  const int tpl = set.intern(PipelineTemplate{{{0, 1, 1}, {0, 2, 1}, {1, 1, 1}}});
  Partition p;
  p.parts = {{tpl, 2}};
  // The two tp-2 stages first: node 0 takes both (0-1, 2-3). Then, pipeline by pipeline, the
  // A tp-1 stages find node 0 full and go to node 2 (6, then 7), the B stages to node 1.
  const std::vector<std::vector<std::vector<std::int64_t>>> want{{{6}, {0, 1}, {4}},
                                                                 {{7}, {2, 3}, {5}}};
  EXPECT_EQ(pack_devices(c, types, set, p), want);
  std::vector<std::int64_t> scratch;
  EXPECT_TRUE(pack_feasible(c, types, set, p, scratch));
  // A third pipeline needs a third B device.
  p.parts = {{tpl, 3}};
  EXPECT_TRUE(pack_devices(c, types, set, p).empty());
  EXPECT_FALSE(pack_feasible(c, types, set, p, scratch));
  // A tp-4 stage of A takes a whole node: with two of them and the tp-2 stages, node 0 and node
  // 2 are full before the tp-2 stages come.
  const int four = set.intern(PipelineTemplate{{{0, 4, 1}, {0, 2, 1}}});
  p.parts = {{four, 2}};
  EXPECT_TRUE(pack_devices(c, types, set, p).empty());
  EXPECT_FALSE(pack_feasible(c, types, set, p, scratch));
  p.parts = {{four, 1}};
  EXPECT_EQ(pack_devices(c, types, set, p),
            (std::vector<std::vector<std::vector<std::int64_t>>>{{{0, 1, 2, 3}, {6, 7}}}));
}

// pack_feasible works on runs of equal nodes: clusters whose types repeat node sizes, in runs
// broken by other sizes and other types, answer as pack_devices' node-by-node first fit.
TEST(Packing, ShortcutAgreesOnRunsOfEqualNodes) {
  const ClusterSpec c =
      cluster(R"({"device_type": "A", "devices": 6}, {"device_type": "A", "devices": 6},
      {"device_type": "B", "devices": 4}, {"device_type": "A", "devices": 6},
      {"device_type": "A", "devices": 3}, {"device_type": "B", "devices": 4},
      {"device_type": "A", "devices": 3}, {"device_type": "B", "devices": 2},
      {"device_type": "A", "devices": 6}, {"device_type": "B", "devices": 4})");
  const auto types = types_with_tps(c, {1, 2, 4});
  TemplateSet set;
  std::vector<Partition> parts;
  generate_partitions(types, gen(8, 64, true), set, parts);
  ASSERT_GT(parts.size(), 1000u);
  std::vector<std::int64_t> scratch;
  int packed = 0, refused = 0;
  for (const Partition& p : parts) {
    const bool fits = !pack_devices(c, types, set, p).empty();
    EXPECT_EQ(pack_feasible(c, types, set, p, scratch), fits);
    (fits ? packed : refused) += 1;
  }
  EXPECT_GT(packed, 0);
  EXPECT_GT(refused, 0);
}

TEST(Packing, AgreesWithItsShortcutAndPlacesStagesInOneNode) {
  // Nodes of different sizes: tp 2 and 4 stages cannot always pack.
  const ClusterSpec c =
      cluster(R"({"device_type": "A", "devices": 6}, {"device_type": "A", "devices": 3},
      {"device_type": "B", "devices": 2}, {"device_type": "B", "devices": 5},
      {"device_type": "C", "devices": 1})");
  const auto types = types_with_tps(c, {1, 2, 4});
  TemplateSet set;
  std::vector<Partition> parts;
  generate_partitions(types, gen(8, 64, true), set, parts);
  std::vector<std::int64_t> scratch;
  int packed = 0, refused = 0;
  for (const Partition& p : parts) {
    const auto devices = pack_devices(c, types, set, p);
    EXPECT_EQ(pack_feasible(c, types, set, p, scratch), !devices.empty());
    if (devices.empty()) {
      ++refused;
      continue;
    }
    ++packed;
    std::set<std::int64_t> seen;
    std::size_t pipe = 0;
    for (const auto& part : p.parts) {
      const PipelineTemplate& t = set.at(part.tpl);
      for (std::int64_t i = 0; i < part.count; ++i, ++pipe) {
        std::size_t s = 0;
        for (const auto& g : t.groups) {
          for (std::int64_t k = 0; k < g.count; ++k, ++s) {
            const auto& ids = devices[pipe][s];
            ASSERT_EQ(static_cast<std::int64_t>(ids.size()), g.tp);
            for (auto id : ids) {
              EXPECT_TRUE(seen.insert(id).second);
              EXPECT_EQ(c.device(id).device_type, types[static_cast<std::size_t>(g.type)].name);
              EXPECT_EQ(c.device(id).node, c.device(ids[0]).node);
            }
          }
        }
      }
    }
  }
  EXPECT_GT(packed, 0);
  EXPECT_GT(refused, 0);  // e.g. two tp-4 stages of A: the 3-device node cannot take one
}

// Whether the stages (type, tp) fit the nodes' free devices in any placement: tries every node
// for every stage (small cases only).
bool any_placement(std::vector<std::pair<int, std::int64_t>>& stages, std::size_t next,
                   std::vector<std::int64_t>& free, const std::vector<int>& node_type) {
  if (next == stages.size()) return true;
  const auto [type, tp] = stages[next];
  for (std::size_t n = 0; n < free.size(); ++n) {
    if (node_type[n] != type || free[n] < tp) continue;
    free[n] -= tp;
    const bool ok = any_placement(stages, next + 1, free, node_type);
    free[n] += tp;
    if (ok) return true;
  }
  return false;
}

TEST(Packing, FirstFitFindsAPlacementWheneverOneExistsForPowersOfTwo) {
  std::mt19937 rng(9);
  int packed = 0, refused = 0;
  for (int trial = 0; trial < 12; ++trial) {
    // Two to four nodes of 4 or 8 devices, of types A and B.
    std::string nodes;
    const int count = 2 + static_cast<int>(rng() % 3);
    for (int n = 0; n < count; ++n) {
      nodes += std::string(n ? ", " : "") + "{\"device_type\": \"" + (rng() % 2 ? "A" : "B") +
               "\", \"devices\": " + (rng() % 2 ? "4" : "8") + "}";
    }
    const ClusterSpec c = cluster(nodes);
    // tp 8 stages fit only the 8-device nodes: some partitions cannot pack.
    const auto types = types_with_tps(c, {1, 2, 4, 8});
    std::vector<int> node_type;
    for (const NodeSpec& n : c.nodes) {
      for (std::size_t t = 0; t < types.size(); ++t) {
        if (types[t].name == n.device_type) node_type.push_back(static_cast<int>(t));
      }
    }
    TemplateSet set;
    std::vector<Partition> parts;
    generate_partitions(types, gen(6, 64, true), set, parts);
    std::vector<std::int64_t> scratch;
    for (std::size_t i = 0; i < parts.size(); i += 1 + parts.size() / 150) {
      const Partition& p = parts[i];
      std::vector<std::pair<int, std::int64_t>> stages;
      for (const auto& part : p.parts) {
        for (std::int64_t k = 0; k < part.count; ++k) {
          for (const auto& g : set.at(part.tpl).groups) {
            for (std::int64_t s = 0; s < g.count; ++s) stages.emplace_back(g.type, g.tp);
          }
        }
      }
      // Largest first prunes the exhaustive search without changing its answer.
      std::sort(stages.begin(), stages.end(),
                [](const auto& a, const auto& b) { return a.second > b.second; });
      std::vector<std::int64_t> free;
      for (const NodeSpec& n : c.nodes) free.push_back(n.devices);
      const bool exists = any_placement(stages, 0, free, node_type);
      EXPECT_EQ(!pack_devices(c, types, set, p).empty(), exists) << nodes;
      EXPECT_EQ(pack_feasible(c, types, set, p, scratch), exists) << nodes;
      (exists ? packed : refused) += 1;
    }
  }
  EXPECT_GT(packed, 100);
  EXPECT_GT(refused, 0);  // 7 with this seed
}

}  // namespace
}  // namespace eth::packing_test
