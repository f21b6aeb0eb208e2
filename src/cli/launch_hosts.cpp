// Rank placement over the hosts of a hostfile (launch_hosts.h).
#include "cli/launch_hosts.h"

#include "cli/plan_inputs.h"
#include "core/error.h"
#include "core/json_file.h"

extern char** environ;

namespace eth::cli {

namespace {

// The value of --cluster among eth train's arguments ("" when absent).
std::string cluster_flag(const std::vector<std::string>& args) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--cluster" && i + 1 < args.size()) return args[i + 1];
    if (args[i].rfind("--cluster=", 0) == 0) return args[i].substr(10);
  }
  return "";
}

}  // namespace

std::vector<HostRanks> launch_hosts(const Plan& plan, const std::string& plan_file,
                                    const std::string& hostfile,
                                    const std::vector<std::string>& train_args) {
  const std::vector<std::string> hosts =
      parse_hostfile(read_text_file(hostfile, "hostfile"), hostfile);
  const ClusterSpec cluster = cluster_for_plan(plan, cluster_flag(train_args));
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

}  // namespace eth::cli
