// Device types and clusters: presets after the paper's Tables 1 and 2, the JSON form of a
// cluster, and global device ids (node 0's devices first). Pure data plus parsing.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/json_cursor.h"

namespace eth {

struct DeviceType {
  std::string name;
  double tflops = 0;                     // peak dense 16-bit TFLOPS
  double memory_gb = 0;                  // device memory, 10^9 bytes
  double intra_node_bandwidth_gbps = 0;  // device-to-device inside a node, 10^9 bit/s
  // Optional per-type NIC bandwidth; the cluster-wide inter-node figure applies when absent.
  std::optional<double> inter_node_bandwidth_gbps;
  // Emulation only: every compute op of a rank of this type is stretched by this factor when the
  // CPU runtime emulates a heterogeneous cluster (1 = no slowdown).
  double emulated_slowdown = 1.0;
  // Optional: the devices of one node of this type share one memory system and its cores (CPU
  // ranks on one host), so their collectives do not run side by side on links of their own.
  // Every all-reduce of B bytes over n holders moves 2 (n-1)/n B through the memory system for
  // each of its holders on the node (2 (n-1) B when all n are here), all of the node's
  // collectives together at this rate, one at a time (cost/predictor.h). Measured by an
  // all-reduce of B bytes over all n ranks of the node taking t: 2 (n-1) B 8 / t bit/s.
  std::optional<double> node_shared_bandwidth_gbps = std::nullopt;

  double memory_bytes() const { return memory_gb * 1e9; }
  double peak_flops() const { return tflops * 1e12; }
  bool operator==(const DeviceType&) const = default;
};

const std::vector<DeviceType>& device_type_presets();
std::optional<DeviceType> find_device_type_preset(const std::string& name);

struct NodeSpec {
  std::string device_type;
  std::int64_t devices = 0;
  bool operator==(const NodeSpec&) const = default;
};

struct DeviceInfo {
  std::int64_t id = 0;     // global device id
  std::int64_t node = 0;   // index into ClusterSpec::nodes
  std::int64_t local = 0;  // index within the node
  std::string device_type;
};

class ClusterSpec {
 public:
  static constexpr double kDefaultInterNodeGbps = 200.0;

  std::string name = "custom";
  std::vector<NodeSpec> nodes;
  double inter_node_bandwidth_gbps = kDefaultInterNodeGbps;
  // Every type the nodes name, presets included, keyed by name (ordered: deterministic output).
  std::map<std::string, DeviceType> device_types;
  // Types defined in the file rather than taken from presets (kept for round trips).
  std::vector<std::string> custom_types;

  std::int64_t num_devices() const;
  DeviceInfo device(std::int64_t id) const;  // ETH_CHECKs the range
  const DeviceType& type_of(std::int64_t id) const;
  const DeviceType& type(const std::string& name) const;
  // Bandwidth of the link between two devices, in bytes per second.
  double link_bytes_per_s(std::int64_t a, std::int64_t b) const;
  // First global id of each node.
  std::vector<std::int64_t> node_first_device() const;
  bool operator==(const ClusterSpec&) const = default;
};

// Global device id -> node and type in O(1) (O(log nodes) when node sizes differ widely), built
// once in O(nodes): for code that visits every device of a large cluster (ClusterSpec::device
// scans the nodes on every call; on 100,000 devices in 12,500 nodes a loop over all devices
// through it does 10^9 steps). Holds a pointer to the cluster, which must outlive it and not
// change.
class ClusterIndex {
 public:
  explicit ClusterIndex(const ClusterSpec& cluster);
  // It refers to `cluster`, which must outlive it: a temporary would not.
  explicit ClusterIndex(ClusterSpec&&) = delete;
  std::int64_t num_devices() const { return first_.back(); }
  // ETH_CHECKs the range. Inline: the predictor asks for every holder of every collective.
  std::int64_t node_of(std::int64_t id) const {
    if (bucket_node_.empty() || id < 0 || id >= num_devices()) return node_of_searched(id);
    auto node = static_cast<std::size_t>(bucket_node_[static_cast<std::size_t>(id / width_)]);
    while (first_[node + 1] <= id) ++node;
    return static_cast<std::int64_t>(node);
  }
  const std::string& type_name_of(std::int64_t id) const;
  const DeviceType& type_of(std::int64_t id) const;
  // Same as ClusterSpec::link_bytes_per_s. Inline, like node_of.
  double link_bytes_per_s(std::int64_t a, std::int64_t b) const {
    return node_link_bytes_per_s(node_of(a), node_of(b));
  }
  // The same between devices of nodes na and nb (node_of), for callers that walk many links.
  double node_link_bytes_per_s(std::int64_t na, std::int64_t nb) const {
    const DeviceType& ta = *node_type_[static_cast<std::size_t>(na)];
    const DeviceType& tb = *node_type_[static_cast<std::size_t>(nb)];
    if (na == nb) return ta.intra_node_bandwidth_gbps * 1e9 / 8.0;
    const double ga = ta.inter_node_bandwidth_gbps.value_or(cluster_->inter_node_bandwidth_gbps);
    const double gb = tb.inter_node_bandwidth_gbps.value_or(cluster_->inter_node_bandwidth_gbps);
    return std::min(ga, gb) * 1e9 / 8.0;
  }
  // Whether any node's type has node_shared_bandwidth_gbps (most clusters have none, and then
  // the per-node accounting of collectives can be skipped).
  bool any_node_shared() const { return any_node_shared_; }

 private:
  std::int64_t node_of_searched(std::int64_t id) const;

  const ClusterSpec* cluster_;
  bool any_node_shared_ = false;
  std::vector<std::int64_t> first_;  // first global id of each node, then the total
  std::vector<const DeviceType*> node_type_;
  // Ids in buckets of `width_` (the smallest node's size), each with the node of its first id:
  // a bucket meets at most two nodes, so a lookup is a division and at most one step (the
  // predictor asks for every holder of every collective). Empty when that would take more
  // than a few buckets per node: then a binary search over first_.
  std::int64_t width_ = 1;
  std::vector<std::int32_t> bucket_node_;
};

// {"nodes": [{"device_type", "devices"}], "inter_node_bandwidth_gbps"?, "device_types"?: {NAME:
// {"tflops", "memory_gb", "intra_node_bandwidth_gbps", "inter_node_bandwidth_gbps"?,
// "emulated_slowdown"?}}, "name"?}
// Every number is checked against its range (core/limits.h, docs/input-limits.md); custom type
// names must pass valid_device_type_name. "description" and "devices" (what `eth clusters
// --format json` adds) are accepted, the latter only when it equals the nodes' sum.
ClusterSpec parse_cluster(const JsonCursor& c);
// Letters, digits, '.', '_', '-', 1 to limits::kMaxTypeNameBytes bytes, not "." or "..": a type
// name becomes part of profile file names.
bool valid_device_type_name(std::string_view name);
std::string device_type_name_rule();
Json cluster_to_json(const ClusterSpec& c);
// The figures of one type as a cluster file's "device_types" entry holds them (no name).
Json device_type_to_json(const DeviceType& d);

struct ClusterPreset {
  std::string name;
  std::string description;
  ClusterSpec spec;
};
const std::vector<ClusterPreset>& cluster_presets();
// `--cluster` takes a preset name or a JSON file.
ClusterSpec load_cluster(const std::string& name_or_path);

}  // namespace eth
