// Elastic training's view of a cluster whose devices come and go: which devices of the full
// cluster are still usable, the smaller cluster a re-plan runs on, and the map between the two
// numberings. Pure: no processes, no clock (launch/ does those).
//
// How to use:
//   SurvivingCluster s = surviving_cluster(full, {3});      // device 3 of `full` is lost
//   PlannerResult r = plan_training(..., s.cluster, ...);   // plan on what is left
//   s.original[d]                                          // full-cluster id of new device d
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "cluster/cluster_spec.h"

namespace eth {

struct SurvivingCluster {
  // The full cluster without the lost devices: each node keeps its place and type with fewer
  // devices, a node with none left is dropped, device types and links are unchanged.
  ClusterSpec cluster;
  std::vector<std::int64_t> original;  // device id in `cluster` -> device id in the full cluster
  std::vector<std::int64_t> original_node;  // node index in `cluster` -> node in the full one
  std::vector<std::int64_t> lost;      // full-cluster ids removed, ascending
};

// Throws InputError("elastic", ...) when a lost id is not a device of `full`, and when no device
// is left. Devices of one node keep their relative order, so a node's surviving devices still
// sit in one node of the new cluster (tensor-parallel groups stay inside a node).
SurvivingCluster surviving_cluster(const ClusterSpec& full, const std::set<std::int64_t>& lost);

// "3 (cpu-slow, node 1)": how a device of the full cluster is named in every message.
std::string describe_device(const ClusterSpec& full, std::int64_t device);

}  // namespace eth
