// Small clusters, type lists and generation options for the partition and packing tests.
// Test-only.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "search/partition.h"

namespace eth::search::partition_fixture {

// Nodes given as JSON objects, of types A (40 GB), B (20 GB) and C (10 GB).
inline ClusterSpec cluster(const std::string& nodes) {
  const Json j = Json::parse(std::string("{\"nodes\": [") + nodes + R"(], "device_types": {
      "A": {"tflops": 100, "memory_gb": 40, "intra_node_bandwidth_gbps": 800},
      "B": {"tflops": 50, "memory_gb": 20, "intra_node_bandwidth_gbps": 800},
      "C": {"tflops": 30, "memory_gb": 10, "intra_node_bandwidth_gbps": 800}}})");
  return parse_cluster(JsonCursor(j, JsonOrigin{"cluster", "test", ""}));
}

// Every type with the given tp degrees that fit in its largest node.
inline std::vector<TypeInfo> types_with_tps(const ClusterSpec& c, std::vector<std::int64_t> tps) {
  auto types = cluster_types(c);
  for (auto& t : types) {
    for (auto tp : tps) {
      if (tp <= t.max_node_devices) t.tps.push_back(tp);
    }
  }
  return types;
}

inline GenerateOptions gen(std::int64_t units, std::int64_t max_pipelines, bool idle) {
  GenerateOptions o;
  o.num_units = units;
  o.max_pipelines = max_pipelines;
  o.allow_idle = idle;
  return o;
}

}  // namespace eth::search::partition_fixture
