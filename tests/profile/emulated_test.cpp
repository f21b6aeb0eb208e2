// Profiles of emulated device types: the base type's entries, every time multiplied by the
// type's emulated_slowdown and every memory figure kept; a type's own entries win.
#include "profile/emulated.h"

#include <gtest/gtest.h>

#include "profile/analytic.h"

namespace eth {
namespace {

TEST(EmulatedProfile, ScalesTimesKeepsBytes) {
  const ModelSpec m = model_preset("tiny");
  const ClusterSpec emulated = load_cluster("cpu-emulated");
  ClusterSpec cpu;
  cpu.nodes.push_back(NodeSpec{"cpu", 1});
  cpu.device_types.emplace("cpu", *find_device_type_preset("cpu"));
  const ProfileDb base = analytic_profile_db(m, cpu, {1}, {1, 4}, 64);
  const ProfileDb db = emulated_profile(base, emulated);
  for (const std::string type : {"cpu-fast", "cpu-slow"}) {
    const double factor = emulated.type(type).emulated_slowdown;
    ASSERT_GT(factor, 1.0);
    for (std::int64_t mbs : {1, 4}) {
      const ProfileEntry& b = base.entries().at(ProfileKey{"cpu", 1, mbs});
      const ProfileEntry& e = db.entries().at(ProfileKey{type, 1, mbs});
      ASSERT_EQ(e.units.size(), b.units.size());
      for (std::size_t u = 0; u < b.units.size(); ++u) {
        EXPECT_DOUBLE_EQ(e.units[u].forward_ms, factor * b.units[u].forward_ms);
        EXPECT_DOUBLE_EQ(e.units[u].backward_ms, factor * b.units[u].backward_ms);
        for (int k = 0; k < kNumRecomputeOps; ++k) {
          EXPECT_DOUBLE_EQ(e.units[u].recompute_ms[static_cast<std::size_t>(k)],
                           factor * b.units[u].recompute_ms[static_cast<std::size_t>(k)]);
        }
        EXPECT_EQ(e.units[u].params, b.units[u].params);
        EXPECT_EQ(e.units[u].activation.op, b.units[u].activation.op);
        EXPECT_EQ(e.units[u].activation.other, b.units[u].activation.other);
        EXPECT_EQ(e.units[u].activation.unit_input, b.units[u].activation.unit_input);
      }
      EXPECT_DOUBLE_EQ(e.optimizer_ms, factor * b.optimizer_ms);
    }
  }
  // Only the cluster's types: the base "cpu" is not one of them.
  EXPECT_FALSE(db.has_device_tp("cpu", 1));
  // A real (not emulated) type without entries is not priced as a CPU core.
  ClusterSpec mixed = emulated;
  mixed.nodes.push_back(NodeSpec{"A100", 2});
  mixed.device_types.emplace("A100", *find_device_type_preset("A100"));
  EXPECT_FALSE(emulated_profile(base, mixed).has_device_tp("A100", 1));
}

TEST(EmulatedProfile, ATypesOwnEntriesAreUsed) {
  const ModelSpec m = model_preset("tiny");
  ClusterSpec c;
  c.nodes.push_back(NodeSpec{"cpu", 2});
  c.device_types.emplace("cpu", *find_device_type_preset("cpu"));
  c.device_types["cpu"].emulated_slowdown = 3;
  const ProfileDb base = analytic_profile_db(m, c, {1}, {2}, 64);
  const ProfileDb db = emulated_profile(base, c);
  const auto& b = base.entries().at(ProfileKey{"cpu", 1, 2});
  const auto& e = db.entries().at(ProfileKey{"cpu", 1, 2});
  EXPECT_DOUBLE_EQ(e.units[1].forward_ms, 3 * b.units[1].forward_ms);
}

}  // namespace
}  // namespace eth
