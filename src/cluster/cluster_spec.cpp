#include "cluster/cluster_spec.h"

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_file.h"
#include "core/limits.h"

namespace eth {

const std::vector<DeviceType>& device_type_presets() {
  // Table 1 of the paper; H100 and H200 from NVIDIA's SXM datasheets (dense BF16, NVLink
  // 900 GB/s; the H200 is the H100's compute with 141 GB of HBM3e, the GPU of docs/gpu.md);
  // `cpu` is one core of the 2-core machines ETH's CPU runtime runs on: fp32 sgemm measures
  // about 0.18-0.19 TFLOPS per core (the runtime trains in fp32), and one rank may use a third
  // of the 24 GiB. Its link figure is what the ring model needs to price MPI all-reduce over
  // shared memory: 16 MiB over 4 ranks on 2 cores takes 10.7 ms, 2 * 3/4 * 16.8 MB / 10.7 ms =
  // 2.35 GB/s, about 20 Gbit/s (point-to-point messages alone move 8.7-20 GB/s). Its ranks share
  // the host's cores and memory (node_shared_bandwidth_gbps, 48 Gbit/s): the runtime's
  // non-blocking all-reduce of 42.2 MB over all 8 ranks of this 2-core machine took 96-99 ms,
  // 2 * 7 * 42.2 MB / t = 6.0-6.2 GB/s, over 4 ranks 31-32 ms, 8 GB/s (quiet machine,
  // bench/runtime_bench's device-wise rows: one all-reduce over every rank).
  static const std::vector<DeviceType> presets = {
      {"910B2", 376, 64, 1536, std::nullopt, 1.0},
      {"910B3", 313, 64, 1536, std::nullopt, 1.0},
      {"910B4", 280, 32, 736, std::nullopt, 1.0},
      {"A100", 312, 80, 1536, std::nullopt, 1.0},
      {"RTX3090", 80, 24, 1408, std::nullopt, 1.0},
      {"H100", 989, 80, 7200, std::nullopt, 1.0},
      {"H200", 989, 141, 7200, std::nullopt, 1.0},
      {"cpu", 0.19, 8, 20, std::nullopt, 1.0, 48.0},
      // Emulated types for the CPU runtime (one core each, stretched 4x and 12x: the slow one is
      // 3x slower than the fast one, and four such ranks keep only 0.67 of 2 cores busy, so
      // they seldom slow each other down; docs/runtime.md). Their link figure is what the
      // runtime's own non-blocking all-reduce achieves among 4 ranks on 2 cores (about
      // 0.65 GB/s in bench/runtime_bench), not shared memory's raw speed.
      {"cpu-fast", 0.19 / 4, 4, 5, std::nullopt, 4.0},
      {"cpu-slow", 0.19 / 12, 4, 5, std::nullopt, 12.0},
  };
  return presets;
}

std::optional<DeviceType> find_device_type_preset(const std::string& name) {
  for (const auto& d : device_type_presets()) {
    if (d.name == name) return d;
  }
  return std::nullopt;
}

std::int64_t ClusterSpec::num_devices() const {
  std::int64_t n = 0;
  for (const auto& node : nodes) n += node.devices;
  return n;
}

DeviceInfo ClusterSpec::device(std::int64_t id) const {
  ETH_CHECK(id >= 0 && id < num_devices(), "device id out of range");
  std::int64_t first = 0;
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    if (id < first + nodes[n].devices) {
      return DeviceInfo{id, static_cast<std::int64_t>(n), id - first, nodes[n].device_type};
    }
    first += nodes[n].devices;
  }
  ETH_CHECK(false, "unreachable");
}

const DeviceType& ClusterSpec::type(const std::string& type_name) const {
  auto it = device_types.find(type_name);
  ETH_CHECK(it != device_types.end(), "device type not in cluster: " + type_name);
  return it->second;
}

const DeviceType& ClusterSpec::type_of(std::int64_t id) const {
  return type(device(id).device_type);
}

double ClusterSpec::link_bytes_per_s(std::int64_t a, std::int64_t b) const {
  DeviceInfo da = device(a), db = device(b);
  const DeviceType& ta = type(da.device_type);
  const DeviceType& tb = type(db.device_type);
  if (da.node == db.node) return ta.intra_node_bandwidth_gbps * 1e9 / 8.0;
  double ga = ta.inter_node_bandwidth_gbps.value_or(inter_node_bandwidth_gbps);
  double gb = tb.inter_node_bandwidth_gbps.value_or(inter_node_bandwidth_gbps);
  return std::min(ga, gb) * 1e9 / 8.0;
}

ClusterIndex::ClusterIndex(const ClusterSpec& cluster) : cluster_(&cluster) {
  first_.reserve(cluster.nodes.size() + 1);
  std::int64_t first = 0;
  for (const auto& n : cluster.nodes) {
    first_.push_back(first);
    node_type_.push_back(&cluster.type(n.device_type));
    any_node_shared_ = any_node_shared_ || node_type_.back()->node_shared_bandwidth_gbps.has_value();
    first += n.devices;
  }
  first_.push_back(first);
  std::int64_t smallest = first;
  for (const auto& n : cluster.nodes) smallest = std::min(smallest, n.devices);
  const auto nodes = static_cast<std::int64_t>(cluster.nodes.size());
  if (smallest < 1 || first / smallest > 4 * nodes + 64) return;
  width_ = smallest;
  bucket_node_.resize(static_cast<std::size_t>((first + width_ - 1) / width_));
  std::int32_t node = 0;
  for (std::size_t b = 0; b < bucket_node_.size(); ++b) {
    const std::int64_t id = static_cast<std::int64_t>(b) * width_;
    while (first_[static_cast<std::size_t>(node) + 1] <= id) ++node;
    bucket_node_[b] = node;
  }
}

std::int64_t ClusterIndex::node_of_searched(std::int64_t id) const {
  ETH_CHECK(id >= 0 && id < num_devices(), "device id out of range");
  // The last node whose first id is <= id (nodes have at least one device).
  const auto it = std::upper_bound(first_.begin(), first_.end() - 1, id);
  return static_cast<std::int64_t>(it - first_.begin()) - 1;
}

const std::string& ClusterIndex::type_name_of(std::int64_t id) const {
  return cluster_->nodes[static_cast<std::size_t>(node_of(id))].device_type;
}

const DeviceType& ClusterIndex::type_of(std::int64_t id) const {
  return *node_type_[static_cast<std::size_t>(node_of(id))];
}

std::vector<std::int64_t> ClusterSpec::node_first_device() const {
  std::vector<std::int64_t> out;
  std::int64_t first = 0;
  for (const auto& n : nodes) {
    out.push_back(first);
    first += n.devices;
  }
  return out;
}

namespace {

DeviceType parse_device_type(const std::string& name, const JsonCursor& c) {
  c.require_object();
  // "name" is what `eth devices --format json` prints beside the figures; it must be the key.
  c.allow_only({"name", "tflops", "memory_gb", "intra_node_bandwidth_gbps",
                "inter_node_bandwidth_gbps", "emulated_slowdown", "node_shared_bandwidth_gbps"});
  if (auto v = c.find("name"); v && v->as_string() != name) {
    v->fail("the type's own name \"" + name + "\" (the key it is listed under)");
  }
  DeviceType d;
  d.name = name;
  d.tflops = c.at("tflops").as_quantity(limits::kMinTflops, limits::kMaxTflops);
  d.memory_gb = c.at("memory_gb").as_quantity(limits::kMinMemoryGb, limits::kMaxMemoryGb);
  d.intra_node_bandwidth_gbps = c.at("intra_node_bandwidth_gbps")
                                    .as_quantity(limits::kMinBandwidthGbps,
                                                 limits::kMaxBandwidthGbps);
  if (auto v = c.find("inter_node_bandwidth_gbps")) {
    d.inter_node_bandwidth_gbps =
        v->as_quantity(limits::kMinBandwidthGbps, limits::kMaxBandwidthGbps);
  }
  if (auto v = c.find("emulated_slowdown")) {
    d.emulated_slowdown = v->as_number(1.0, limits::kMaxEmulatedSlowdown);
  }
  if (auto v = c.find("node_shared_bandwidth_gbps")) {
    d.node_shared_bandwidth_gbps =
        v->as_quantity(limits::kMinBandwidthGbps, limits::kMaxBandwidthGbps);
  }
  return d;
}

std::string preset_type_names() {
  std::string s;
  for (const auto& d : device_type_presets()) s += (s.empty() ? "" : ", ") + d.name;
  return s;
}

}  // namespace

Json device_type_to_json(const DeviceType& d) {
  Json j;
  j["tflops"] = d.tflops;
  j["memory_gb"] = d.memory_gb;
  j["intra_node_bandwidth_gbps"] = d.intra_node_bandwidth_gbps;
  if (d.inter_node_bandwidth_gbps) j["inter_node_bandwidth_gbps"] = *d.inter_node_bandwidth_gbps;
  if (d.emulated_slowdown != 1.0) j["emulated_slowdown"] = d.emulated_slowdown;
  if (d.node_shared_bandwidth_gbps) j["node_shared_bandwidth_gbps"] = *d.node_shared_bandwidth_gbps;
  return j;
}

bool valid_device_type_name(std::string_view name) {
  if (name.empty() || name.size() > static_cast<std::size_t>(limits::kMaxTypeNameBytes)) {
    return false;
  }
  for (char ch : name) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
    if (!ok) return false;
  }
  return name != "." && name != "..";
}

std::string device_type_name_rule() {
  return "a device type name of 1 to " + std::to_string(limits::kMaxTypeNameBytes) +
         " letters, digits, '.', '_' or '-' (it becomes part of profile file names)";
}

ClusterSpec parse_cluster(const JsonCursor& c) {
  if (c.is_string()) {
    std::string name = c.as_string();
    std::string names;
    for (const auto& p : cluster_presets()) {
      if (p.name == name) return p.spec;
      names += (names.empty() ? "" : ", ") + p.name;
    }
    c.fail_detail("unknown cluster preset \"" + message_text(name, 64) +
                  "\"; expected an object or one of: " + names);
  }
  c.require_object();
  // "description" and "devices" are what `eth clusters --format json` prints beside a preset;
  // the first is free text, the second must agree with the nodes.
  c.allow_only({"name", "description", "devices", "nodes", "inter_node_bandwidth_gbps",
                "device_types"});
  ClusterSpec out;
  if (auto v = c.find("name")) {
    out.name = v->as_string();
    if (out.name.size() > static_cast<std::size_t>(limits::kMaxNameBytes)) {
      v->fail("a name of at most " + std::to_string(limits::kMaxNameBytes) + " bytes");
    }
  }
  if (auto v = c.find("description")) v->as_string();
  if (auto v = c.find("inter_node_bandwidth_gbps")) {
    out.inter_node_bandwidth_gbps =
        v->as_quantity(limits::kMinBandwidthGbps, limits::kMaxBandwidthGbps);
  }
  if (auto types = c.find("device_types")) {
    types->require_object();
    if (types->value().size() > static_cast<std::size_t>(limits::kMaxDeviceTypes)) {
      types->fail_detail("defines " + std::to_string(types->value().size()) +
                         " device types; at most " + std::to_string(limits::kMaxDeviceTypes) +
                         " are allowed");
    }
    for (const auto& [key, t] : types->members()) {
      if (!valid_device_type_name(key)) t.fail_detail("expected " + device_type_name_rule());
      out.device_types[key] = parse_device_type(key, t);
      out.custom_types.push_back(key);
    }
  }
  JsonCursor nodes = c.at("nodes");
  if (nodes.size() == 0) nodes.fail("a non-empty array of nodes");
  if (nodes.size() > static_cast<std::size_t>(limits::kMaxClusterDevices)) {
    nodes.fail_detail("has " + std::to_string(nodes.size()) + " nodes; a cluster holds at most " +
                      std::to_string(limits::kMaxClusterDevices) + " devices");
  }
  std::int64_t total = 0;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    JsonCursor n = nodes[i];
    n.require_object();
    n.allow_only({"device_type", "devices"});
    NodeSpec node;
    node.device_type = n.at("device_type").as_string();
    node.devices = n.at("devices").as_int(1, limits::kMaxDevicesPerNode);
    total += node.devices;
    if (total > limits::kMaxClusterDevices) {
      n.at("devices").fail_detail(
          "brings the cluster to " + std::to_string(total) + " devices; at most " +
          std::to_string(limits::kMaxClusterDevices) +
          " are allowed (the most the planner searches in bounded time)");
    }
    if (!out.device_types.count(node.device_type)) {
      auto preset = find_device_type_preset(node.device_type);
      if (!preset) {
        n.at("device_type").fail("a preset device type (" + preset_type_names() +
                                 ") or one defined under device_types");
      }
      if (out.device_types.size() >= static_cast<std::size_t>(limits::kMaxDeviceTypes)) {
        n.at("device_type").fail_detail("is one device type too many: a cluster has at most " +
                                        std::to_string(limits::kMaxDeviceTypes));
      }
      out.device_types[node.device_type] = *preset;
    }
    out.nodes.push_back(node);
  }
  if (auto v = c.find("devices"); v && v->as_int() != total) {
    v->fail("the number of devices the nodes hold (" + std::to_string(total) + ")");
  }
  return out;
}

Json cluster_to_json(const ClusterSpec& c) {
  Json j;
  j["name"] = c.name;
  j["nodes"] = Json::array();
  for (const auto& n : c.nodes) j["nodes"].push_back(Json{{"device_type", n.device_type}, {"devices", n.devices}});
  j["inter_node_bandwidth_gbps"] = c.inter_node_bandwidth_gbps;
  if (!c.custom_types.empty()) {
    Json types = Json::object();
    for (const auto& name : c.custom_types) types[name] = device_type_to_json(c.device_types.at(name));
    j["device_types"] = types;
  }
  return j;
}

namespace {

ClusterSpec two_type_cluster(const std::string& name, const std::string& a, const std::string& b,
                             std::int64_t nodes_each, std::int64_t per_node) {
  ClusterSpec c;
  c.name = name;
  for (std::int64_t i = 0; i < nodes_each; ++i) c.nodes.push_back({a, per_node});
  for (std::int64_t i = 0; i < nodes_each; ++i) c.nodes.push_back({b, per_node});
  c.device_types[a] = *find_device_type_preset(a);
  c.device_types[b] = *find_device_type_preset(b);
  return c;
}

}  // namespace

const std::vector<ClusterPreset>& cluster_presets() {
  // Table 2: each model's N x M x A_i + N x M x A_j shape, for both device pairs.
  static const std::vector<ClusterPreset> presets = [] {
    struct Shape { const char* model; std::int64_t nodes, per_node; };
    const Shape shapes[] = {{"350m", 1, 2}, {"1.3b", 2, 2}, {"2.6b", 2, 4},
                            {"6.7b", 4, 4}, {"13b", 4, 8},  {"70b", 32, 8}};
    struct Pair { const char* a; const char* b; const char* tag; };
    const Pair pairs[] = {{"910B2", "910B4", "910b2-910b4"}, {"A100", "RTX3090", "a100-rtx3090"}};
    std::vector<ClusterPreset> out;
    for (const auto& p : pairs) {
      for (const auto& s : shapes) {
        std::string name = std::string(s.model) + "-" + p.tag;
        std::string desc = std::to_string(s.nodes) + " x " + std::to_string(s.per_node) + " x " +
                           p.a + " + " + std::to_string(s.nodes) + " x " +
                           std::to_string(s.per_node) + " x " + p.b + " (Table 2, GPT-3 " +
                           s.model + ")";
        out.push_back({name, desc, two_type_cluster(name, p.a, p.b, s.nodes, s.per_node)});
      }
    }
    {
      ClusterSpec cpu;
      cpu.name = "cpu-2";
      cpu.nodes.push_back({"cpu", 2});
      cpu.device_types["cpu"] = *find_device_type_preset("cpu");
      out.push_back({"cpu-2", "1 x 2 x cpu: this 2-core machine as a homogeneous cluster", cpu});
    }
    out.push_back({"cpu-emulated",
                   "1 x 2 x cpu-fast + 1 x 2 x cpu-slow: an EMULATED heterogeneous cluster of "
                   "four CPU ranks on one machine (the slow ones 3x slower)",
                   two_type_cluster("cpu-emulated", "cpu-fast", "cpu-slow", 1, 2)});
    return out;
  }();
  return presets;
}

ClusterSpec load_cluster(const std::string& name_or_path) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(name_or_path, ec)) {
    Json j = read_json_file(name_or_path, "cluster");
    return parse_cluster(JsonCursor(j, JsonOrigin{"cluster", name_or_path, ""}));
  }
  std::string names;
  for (const auto& p : cluster_presets()) {
    if (p.name == name_or_path) return p.spec;
    names += (names.empty() ? "" : ", ") + p.name;
  }
  if (name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".json")) {
    throw InputError("cluster", name_or_path, "", "cannot read: no such file");
  }
  throw InputError("cluster", "", "", "unknown cluster preset \"" + name_or_path +
                                          "\"; expected a JSON file or one of: " + names);
}

}  // namespace eth
