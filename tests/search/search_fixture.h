// A small model and clusters of small devices for the search's tests: devices of 5-80 MB hold a
// few of the model's blocks, so memory shapes the plans. Test-only.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "cluster/cluster_spec.h"
#include "model/model_spec.h"

namespace eth::search::search_fixture {

// 8 blocks of hidden 256 (units 0..9): about 12.6 MB of static state (16 B/param) per block.
inline ModelSpec small_model() { return ModelSpec{"small", 8, 256, 8, 128, 1024, 1024}; }

// Nodes given as JSON objects, of types fast (80 MB), mid (60 MB), slow (50 MB), tiny (5 MB).
inline ClusterSpec small_cluster(const std::string& nodes) {
  const Json j = Json::parse(std::string("{\"nodes\": [") + nodes + R"(], "device_types": {
    "fast": {"tflops": 100, "memory_gb": 0.08, "intra_node_bandwidth_gbps": 800},
    "mid":  {"tflops": 60,  "memory_gb": 0.06, "intra_node_bandwidth_gbps": 400},
    "slow": {"tflops": 40,  "memory_gb": 0.05, "intra_node_bandwidth_gbps": 400},
    "tiny": {"tflops": 40,  "memory_gb": 0.005, "intra_node_bandwidth_gbps": 400}},
    "inter_node_bandwidth_gbps": 100})");
  return parse_cluster(JsonCursor(j, JsonOrigin{"cluster", "test", ""}));
}

}  // namespace eth::search::search_fixture
