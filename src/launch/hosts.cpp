// Rank placement over the hosts of a hostfile (hosts.h).
#include "launch/hosts.h"

#include "core/error.h"
#include "core/json_file.h"

extern char** environ;

namespace eth {

std::vector<HostRanks> launch_hosts(const Plan& plan, const std::string& plan_file,
                                    const ClusterSpec& cluster, const std::string& hostfile) {
  const std::vector<std::string> hosts =
      parse_hostfile(read_text_file(hostfile, "hostfile"), hostfile);
  std::vector<std::int64_t> node_of_rank;
  for (std::int64_t id : plan.device_ids()) {
    if (id < 0 || id >= cluster.num_devices()) {
      throw InputError("plan", plan_file, "pipelines",
                       "device " + std::to_string(id) + " is not in the cluster's " +
                           std::to_string(cluster.num_devices()) + " devices");
    }
    node_of_rank.push_back(cluster.device(id).node);
  }
  return place_on_hosts(node_of_rank, hosts, hostfile);
}

std::vector<std::string> eth_environment() {
  std::vector<std::string> names;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    if (entry.rfind("ETH_", 0) == 0) names.push_back(entry.substr(0, entry.find('=')));
  }
  return names;
}

}  // namespace eth
