// Device types and clusters: the presets carry the paper's Tables 1 and 2, cluster files (with
// custom device types) round-trip, global ids follow node order, and bad files are refused with
// the file and the JSON path named.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "cluster/cluster_spec.h"
#include "core/error.h"
#include "core/json_file.h"
#include "test_util.h"

namespace eth {
namespace {

using test::error_of;
using test::write;
std::filesystem::path scratch(const std::string& name) { return test::scratch("cluster_test", name); }

TEST(DevicePresets, PaperTable1) {
  struct Row {
    const char* name;
    double tflops, memory_gb, gbps;
  };
  const Row rows[] = {{"910B2", 376, 64, 1536},
                      {"910B3", 313, 64, 1536},
                      {"910B4", 280, 32, 736},
                      {"A100", 312, 80, 1536},
                      {"RTX3090", 80, 24, 1408}};
  for (const Row& r : rows) {
    SCOPED_TRACE(r.name);
    auto d = find_device_type_preset(r.name);
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(d->tflops, r.tflops);
    EXPECT_EQ(d->memory_gb, r.memory_gb);
    EXPECT_EQ(d->intra_node_bandwidth_gbps, r.gbps);
    EXPECT_EQ(d->memory_bytes(), r.memory_gb * 1e9);
    EXPECT_EQ(d->peak_flops(), r.tflops * 1e12);
    EXPECT_FALSE(d->inter_node_bandwidth_gbps.has_value());  // the cluster's figure applies
  }
  for (const char* extra : {"H100", "H200", "cpu"}) {
    auto d = find_device_type_preset(extra);
    ASSERT_TRUE(d.has_value()) << extra;
    EXPECT_GT(d->tflops, 0) << extra;
    EXPECT_GT(d->memory_gb, 0) << extra;
    EXPECT_GT(d->intra_node_bandwidth_gbps, 0) << extra;
  }
  // H100 is faster than A100, and a CPU core far slower than any accelerator.
  EXPECT_GT(find_device_type_preset("H100")->tflops, find_device_type_preset("A100")->tflops);
  EXPECT_LT(find_device_type_preset("cpu")->tflops, 1.0);
  // H200 (docs/gpu.md): the H100's compute and links with 141 GB.
  EXPECT_EQ(find_device_type_preset("H200")->tflops, find_device_type_preset("H100")->tflops);
  EXPECT_EQ(find_device_type_preset("H200")->memory_bytes(), 141e9);
  EXPECT_EQ(device_type_presets().size(), std::size(rows) + 5);
  EXPECT_FALSE(find_device_type_preset("910B9").has_value());
}

TEST(ClusterPresets, EmulatedCpuClusterIsTwoFastTwoSlow) {
  const ClusterSpec c = load_cluster("cpu-emulated");
  ASSERT_EQ(c.num_devices(), 4);
  EXPECT_EQ(c.type_of(0).name, "cpu-fast");
  EXPECT_EQ(c.type_of(3).name, "cpu-slow");
  // The slow type is 3x slower, in the emulation and in its nominal speed alike.
  EXPECT_DOUBLE_EQ(c.type_of(3).emulated_slowdown / c.type_of(0).emulated_slowdown, 3.0);
  EXPECT_DOUBLE_EQ(c.type_of(0).tflops / c.type_of(3).tflops, 3.0);
  // Four ranks that compute 1/2 and 1/6 of their time need 1.33 cores: they fit on 2.
  double busy = 0;
  for (std::int64_t d = 0; d < 4; ++d) busy += 1.0 / c.type_of(d).emulated_slowdown;
  EXPECT_LT(busy, 2.0);
}

TEST(ClusterPresets, PaperTable2Shapes) {
  struct Shape {
    const char* model;
    std::int64_t nodes, per_node;  // N x M x A_i + N x M x A_j
  };
  const Shape shapes[] = {{"350m", 1, 2}, {"1.3b", 2, 2}, {"2.6b", 2, 4},
                          {"6.7b", 4, 4}, {"13b", 4, 8},  {"70b", 32, 8}};
  struct Pair {
    const char* a;
    const char* b;
    const char* tag;
  };
  const Pair pairs[] = {{"910B2", "910B4", "910b2-910b4"}, {"A100", "RTX3090", "a100-rtx3090"}};
  EXPECT_EQ(cluster_presets().size(), std::size(shapes) * std::size(pairs) + 2);  // + cpu ones
  for (const auto& [a, b, tag] : pairs) {
    for (const Shape& s : shapes) {
      const std::string name = std::string(s.model) + "-" + tag;
      SCOPED_TRACE(name);
      const ClusterSpec c = load_cluster(name);
      EXPECT_EQ(c.name, name);
      ASSERT_EQ(c.nodes.size(), static_cast<std::size_t>(2 * s.nodes));
      EXPECT_EQ(c.num_devices(), 2 * s.nodes * s.per_node);
      for (std::size_t n = 0; n < c.nodes.size(); ++n) {
        EXPECT_EQ(c.nodes[n].devices, s.per_node);
        EXPECT_EQ(c.nodes[n].device_type, static_cast<std::int64_t>(n) < s.nodes ? a : b);
      }
      // Global ids in node order: the first A_j device comes right after the last A_i one.
      const std::int64_t first_b = s.nodes * s.per_node;
      EXPECT_EQ(c.device(first_b - 1).device_type, a);
      EXPECT_EQ(c.device(first_b).device_type, b);
      EXPECT_EQ(c.device(first_b).node, s.nodes);
      EXPECT_EQ(c.device(first_b).local, 0);
      EXPECT_EQ(c.type_of(0), *find_device_type_preset(a));
      EXPECT_EQ(c.inter_node_bandwidth_gbps, ClusterSpec::kDefaultInterNodeGbps);
    }
  }
}

TEST(Cluster, DeviceIdsAndLinks) {
  const ClusterSpec c = load_cluster("13b-910b2-910b4");
  EXPECT_EQ(c.node_first_device(), (std::vector<std::int64_t>{0, 8, 16, 24, 32, 40, 48, 56}));
  const DeviceInfo d = c.device(45);
  EXPECT_EQ(d.node, 5);
  EXPECT_EQ(d.local, 45 - 40);
  EXPECT_EQ(d.device_type, "910B4");
  // Inside a node: the type's intra-node link; across nodes: the cluster's 200 Gbps. Bytes/s.
  EXPECT_DOUBLE_EQ(c.link_bytes_per_s(0, 7), 1536e9 / 8);
  EXPECT_DOUBLE_EQ(c.link_bytes_per_s(40, 41), 736e9 / 8);
  EXPECT_DOUBLE_EQ(c.link_bytes_per_s(7, 8), 200e9 / 8);
}

// ClusterIndex answers as ClusterSpec::device (a scan of the nodes) for every id, whether it
// looks nodes up by buckets (sizes within a few times of each other) or by binary search (one
// node far smaller than the rest).
TEST(Cluster, IndexAgreesWithTheNodeScan) {
  for (const std::vector<std::int64_t>& sizes :
       {std::vector<std::int64_t>{8, 8, 8}, {3, 8, 5, 1, 2, 7, 4}, {1, 4096, 4096}, {16}}) {
    ClusterSpec c = load_cluster("13b-910b2-910b4");
    c.nodes.clear();
    for (std::size_t n = 0; n < sizes.size(); ++n) {
      c.nodes.push_back({n % 2 == 0 ? "910B2" : "910B4", sizes[n]});
    }
    const ClusterIndex index(c);
    ASSERT_EQ(index.num_devices(), c.num_devices());
    for (std::int64_t id = 0; id < c.num_devices(); ++id) {
      const DeviceInfo d = c.device(id);
      ASSERT_EQ(index.node_of(id), d.node) << "id " << id;
      ASSERT_EQ(index.type_name_of(id), d.device_type) << "id " << id;
      const std::int64_t other = (id * 7 + 3) % c.num_devices();
      ASSERT_EQ(index.link_bytes_per_s(id, other), c.link_bytes_per_s(id, other))
          << "ids " << id << ", " << other;
    }
    // Out of range the inline lookup still stops at its check.
    EXPECT_DEATH(static_cast<void>(index.node_of(c.num_devices())), "device id out of range");
    EXPECT_DEATH(static_cast<void>(index.node_of(-1)), "device id out of range");
    // No preset type shares one memory system per node; a custom one that does is seen.
    EXPECT_FALSE(index.any_node_shared());
    c.device_types["910B4"].node_shared_bandwidth_gbps = 100.0;
    EXPECT_EQ(ClusterIndex(c).any_node_shared(), sizes.size() > 1);
  }
}

TEST(ClusterJson, IssueExampleFileLoads) {
  const auto dir = scratch("issue");
  const std::string path =
      write(dir / "c.json", R"({"nodes": [{"device_type": "910B2", "devices": 8},
    {"device_type": "910B4", "devices": 8}], "inter_node_bandwidth_gbps": 200,
    "device_types": {"X1": {"tflops": 150, "memory_gb": 40, "intra_node_bandwidth_gbps": 600}}})");
  const ClusterSpec c = load_cluster(path);
  EXPECT_EQ(c.num_devices(), 16);
  EXPECT_EQ(c.type("X1").tflops, 150);
  EXPECT_EQ(c.type("X1").memory_gb, 40);
  EXPECT_EQ(c.type_of(8).name, "910B4");
  EXPECT_EQ(c.custom_types, (std::vector<std::string>{"X1"}));
  std::filesystem::remove_all(dir);
}

TEST(ClusterJson, RoundTripsWithCustomTypes) {
  ClusterSpec c;
  c.name = "mixed";
  c.inter_node_bandwidth_gbps = 100;
  c.nodes = {{"fast", 2}, {"A100", 4}, {"slow", 3}};
  c.device_types["fast"] = DeviceType{"fast", 0.19, 8, 80, std::nullopt, 1.0};
  c.device_types["slow"] = DeviceType{"slow", 0.095, 4, 80, 25.0, 2.5};
  c.device_types["A100"] = *find_device_type_preset("A100");
  c.custom_types = {"fast", "slow"};
  const auto dir = scratch("roundtrip");
  const std::string path = (dir / "c.json").string();
  write_file_atomic(path, cluster_to_json(c).dump(2));
  EXPECT_EQ(load_cluster(path), c);
  // And every preset survives the same trip.
  for (const auto& p : cluster_presets()) {
    const Json j = Json::parse(cluster_to_json(p.spec).dump());
    EXPECT_EQ(parse_cluster(JsonCursor(j, {"cluster", "mem", ""})), p.spec) << p.name;
  }
  std::filesystem::remove_all(dir);
}

TEST(ClusterJson, BadFilesNameFileAndPath) {
  const auto dir = scratch("bad");
  struct Case {
    const char* text;
    const char* path_and_detail;  // what follows "[cluster] <file>: "
  };
  const Case cases[] = {
      {R"({"nodes": [{"device_type": "910B2", "devices": 8})", "invalid JSON at line 1"},
      {R"({"nodes": [{"device_type": "910B2", "devices": "8"}]})",
       "nodes[0].devices: expected an integer, got \"8\""},
      {R"({"nodes": [{"device_type": "910B2", "devices": -8}]})",
       "nodes[0].devices: expected an integer in [1, 65536], got -8"},
      {R"({"nodes": [{"device_type": "910B2", "devices": 8}, {"device_type": "910B9", "devices": 8}]})",
       "nodes[1].device_type: expected a preset device type (910B2, 910B3, 910B4, A100, RTX3090, "
       "H100, H200, cpu, cpu-fast, cpu-slow) or one defined under device_types, got \"910B9\""},
      {R"({"nodes": [{"device_type": "910B2", "devices": 8, "gpus": 8}]})",
       "nodes[0].gpus: unknown field; expected one of: device_type, devices"},
      {R"({"nodes": [], "bandwidth": 1})", "bandwidth: unknown field"},
      {R"({"nodes": []})", "nodes: expected a non-empty array of nodes, got []"},
      {R"({"nodes": [{"device_type": "X", "devices": 1}], "device_types": {"X": {"tflops": -1,
        "memory_gb": 1, "intra_node_bandwidth_gbps": 1}}})",
       "device_types.X.tflops: expected a number in [1e-06, 1e+06], got -1"},
      {R"({"nodes": [{"device_type": "X", "devices": 1}], "device_types": {"X": {"tflops": 1,
        "memory_gb": 1}}})",
       "device_types.X.intra_node_bandwidth_gbps: missing required field"},
      {R"({"nodes": [{"device_type": "910B2", "devices": 8}], "inter_node_bandwidth_gbps": 0})",
       "inter_node_bandwidth_gbps: expected a number in [0.001, 1e+07], got 0"},
      {R"("13b-910b2-910b5")",
       "(root): unknown cluster preset \"13b-910b2-910b5\"; expected an object or one of: "
       "350m-910b2-910b4, "},
  };
  int i = 0;
  for (const Case& c : cases) {
    const std::string path = write(dir / ("c" + std::to_string(i++) + ".json"), c.text);
    const std::string msg = error_of([&] { load_cluster(path); });
    SCOPED_TRACE(c.text);
    const std::string head = "[cluster] " + path + ": ";
    ASSERT_EQ(msg.rfind(head, 0), 0u) << msg;
    EXPECT_EQ(msg.substr(head.size(), std::string(c.path_and_detail).size()), c.path_and_detail)
        << msg;
  }
  EXPECT_EQ(error_of([] { load_cluster("no/such/cluster.json"); }),
            "[cluster] no/such/cluster.json: cannot read: no such file");
  const std::string unknown = error_of([] { load_cluster("13b-910b2-910b5"); });
  EXPECT_NE(unknown.find("unknown cluster preset \"13b-910b2-910b5\""), std::string::npos);
  EXPECT_NE(unknown.find("13b-910b2-910b4"), std::string::npos) << unknown;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace eth
