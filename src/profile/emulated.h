// Profiles for emulated device types: on one CPU machine the runtime emulates a heterogeneous
// cluster by stretching every compute op of a type by its emulated_slowdown (cluster_spec.h).
// The matching profile is the measured one with times multiplied by that factor, so the planner
// and predictor see the cluster the runtime will actually run. Pure.
#pragma once

#include <string>

#include "cluster/cluster_spec.h"
#include "profile/profile.h"

namespace eth {

// For every device type of `cluster`: its own entries in `db` if it has any, otherwise, for an
// emulated type (emulated_slowdown != 1), those of `base_type` (the measured "cpu" profile)
// renamed; every time (forward, backward, recompute, optimizer) multiplied by the type's
// emulated_slowdown, memory figures kept. Other types are left out (lookups name them).
ProfileDb emulated_profile(const ProfileDb& db, const ClusterSpec& cluster,
                           const std::string& base_type = "cpu");

}  // namespace eth
