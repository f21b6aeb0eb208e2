// Inputs several commands resolve the same way for a plan: the cluster it runs on (--cluster, or
// the plan's own "cluster") and an ETH-format profile directory scaled to the cluster's emulated
// device types. One place, so `eth validate`, `eth simulate` and `eth train --plan` agree.
#pragma once

#include <string>

#include "cluster/cluster_spec.h"
#include "plan/plan.h"
#include "profile/profile.h"

namespace eth::cli {

// `cluster_flag` when given (a preset name or file), else the plan's "cluster"; InputError
// naming --cluster when neither exists.
ClusterSpec cluster_for_plan(const Plan& plan, const std::string& cluster_flag);

// The ETH-format profile in `dir`, with the measured cpu times scaled to every emulated device
// type of `cluster` (profile/emulated.h; types with entries of their own keep them).
ProfileDb read_profile_for_cluster(const std::string& dir, const ModelSpec& model,
                                   const ClusterSpec& cluster);

}  // namespace eth::cli
