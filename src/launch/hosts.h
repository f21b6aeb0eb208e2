// Where `eth launch --hostfile` puts each rank: host k of the hostfile runs the plan's devices
// of cluster node k (rank i = the i-th device id of the plan, so a node's ranks are consecutive),
// and what the ranks on other hosts need from this process's environment.
#pragma once

#include <string>
#include <vector>

#include "cluster/cluster_spec.h"
#include "launch/mpirun.h"
#include "plan/plan.h"

namespace eth {

// The hosts that get ranks, in rank order, with their counts, for `plan` on `cluster` (the one
// eth train resolves: --cluster, else the plan's own). Throws InputError naming the hostfile
// (unreadable, malformed, fewer hosts than the plan's nodes) or the plan (a device outside the
// cluster). The host of a rank is host_of_rank(result, rank) (launch/mpirun.h).
std::vector<HostRanks> launch_hosts(const Plan& plan, const std::string& plan_file,
                                    const ClusterSpec& cluster, const std::string& hostfile);

// NAME of every ETH_* variable set here (ETH_TEST_KILL_RANK, ...), for mpirun -x: Open MPI passes
// its ranks on other hosts only the variables it is told to.
std::vector<std::string> eth_environment();

}  // namespace eth
