#include "elastic/surviving.h"

#include "core/error.h"

namespace eth {

SurvivingCluster surviving_cluster(const ClusterSpec& full, const std::set<std::int64_t>& lost) {
  const std::int64_t n = full.num_devices();
  for (std::int64_t d : lost) {
    if (d < 0 || d >= n) {
      throw InputError("elastic", "lost device", std::to_string(d),
                       "not a device of cluster " + full.name + " (ids 0.." +
                           std::to_string(n - 1) + ")");
    }
  }
  SurvivingCluster s;
  s.cluster = full;
  s.cluster.nodes.clear();
  s.lost.assign(lost.begin(), lost.end());
  std::int64_t id = 0;
  for (std::size_t k = 0; k < full.nodes.size(); ++k) {
    const NodeSpec& node = full.nodes[k];
    NodeSpec kept{node.device_type, 0};
    for (std::int64_t i = 0; i < node.devices; ++i, ++id) {
      if (lost.count(id) != 0) continue;
      ++kept.devices;
      s.original.push_back(id);
    }
    if (kept.devices > 0) {
      s.cluster.nodes.push_back(kept);
      s.original_node.push_back(static_cast<std::int64_t>(k));
    }
  }
  if (s.original.empty()) {
    throw InputError("elastic", "lost devices", "", "every device of cluster " + full.name +
                                                         " is lost: nothing left to train on");
  }
  return s;
}

std::string describe_device(const ClusterSpec& full, std::int64_t device) {
  if (device < 0 || device >= full.num_devices()) return std::to_string(device);
  const DeviceInfo info = full.device(device);
  return std::to_string(device) + " (" + info.device_type + ", node " + std::to_string(info.node) +
         ")";
}

}  // namespace eth
