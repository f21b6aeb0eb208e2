// Shared input resolution for plan-driven commands. See plan_inputs.h.
#include "cli/plan_inputs.h"

#include "core/error.h"
#include "profile/emulated.h"
#include "profile/profile_io.h"

namespace eth::cli {

ClusterSpec cluster_for_plan(const Plan& plan, const std::string& cluster_flag) {
  if (!cluster_flag.empty()) return load_cluster(cluster_flag);
  if (plan.cluster) return *plan.cluster;
  throw InputError("cli", "--cluster", "",
                   "missing: the plan has no \"cluster\" field, so pass --cluster with a preset "
                   "name (see `eth clusters`) or a cluster file");
}

ProfileDb read_profile_for_cluster(const std::string& dir, const ModelSpec& model,
                                   const ClusterSpec& cluster) {
  return emulated_profile(read_profile_dir(dir, model), cluster);
}

}  // namespace eth::cli
