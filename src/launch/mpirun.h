// The mpirun command line for N ranks on one host or several, for CTest and `eth launch`: the
// flags Open MPI needs here (shared/notes/machine-figures.md), the placement of ranks on hosts,
// and the hostfile those hosts come from. Pure functions: they read no environment or file and
// start nothing; the caller says whether it runs as root and passes the hostfile's text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace eth {

// `ranks` consecutive ranks on `host`.
struct HostRanks {
  std::string host;
  int ranks = 0;
  bool operator==(const HostRanks&) const = default;
};

struct MpirunOptions {
  std::string mpirun = "mpirun";
  int num_ranks = 1;
  bool as_root = false;       // Open MPI refuses root without --allow-run-as-root
  bool oversubscribe = true;  // allow more ranks than cores (2-core machines)
  // Empty: every rank on this host, over shared memory. Otherwise the ranks go host by host in
  // this order (the first hosts[0].ranks ranks on hosts[0], ...), shared memory inside a host and
  // TCP between hosts; the counts must add up to num_ranks.
  std::vector<HostRanks> hosts;
  // With hosts: the network between them, for Open MPI's TCP transport and its start-up
  // traffic: interface names or CIDR subnets, comma-separated ("eth1", "10.0.0.0/24"). Empty:
  // every interface but loopback.
  std::string network;
  // Exported to every rank with -x: NAME=VALUE, or NAME alone for the launcher's own value.
  // The default makes glibc (and Open MPI's large collective temporaries) use huge pages.
  std::vector<std::string> env{"GLIBC_TUNABLES=glibc.malloc.hugetlb=1"};
  // When a rank dies, Open MPI sends the others SIGTERM and waits odls_base_sigkill_timeout (1 s)
  // before SIGKILL, whatever they do; ETH's ranks do not catch SIGTERM, so that second is only
  // waiting. true: --mca odls_base_sigkill_timeout 0 (eth launch --elastic: detection time).
  bool kill_at_once = false;
  // Open MPI's shared-memory transport moves a large message with one copy the receiver makes
  // from the sender's memory (cross-memory attach, `cma`) instead of through fragments the
  // sender must keep feeding from inside MPI calls (`none`). On this project's 2-core machine an
  // activation sent by a rank that then computed reached its neighbour 0.08 ms after it was
  // sent (median over 176 messages) with cma and 0.81 ms with none (mean 0.6 and 2.6 ms): with
  // none it waits for the sender's next MPI call. Needs single_copy_available() on every host;
  // eth launch sets it on one host where that holds (--mpi-single-copy auto).
  bool single_copy = false;
};

// [mpirun, flags..., -n N, program...]. Flags: --allow-run-as-root (as_root), --oversubscribe,
// --bind-to none (concurrent jobs on a shared machine must not pin to the same cores),
// --mca btl self,vader (plus tcp with hosts: vader is shared memory only),
// --mca btl_vader_single_copy_mechanism cma with single_copy, else none, with hosts
// --host A:n,B:m --map-by slot (ranks filled host by host),
// --mca coll_libnbc_iallreduce_algorithm ring (the all-reduce the cost model prices) and, with a
// network,
// --mca btl_tcp_if_include / oob_tcp_if_include, with kill_at_once
// --mca odls_base_sigkill_timeout 0, then -x ENV.... Throws InputError("launch", ...)
// naming the bad field for num_ranks < 1, hosts whose counts do not add up to it, a bad network,
// an empty program or mpirun, or a malformed env entry.
std::vector<std::string> mpirun_argv(const MpirunOptions& options,
                                     const std::vector<std::string>& program);

// The host names of an Open MPI hostfile, in order: one host per line, `NAME [key=value ...]`
// (slots=, max_slots=, ... are accepted and ignored: the plan decides how many ranks a host
// runs), `#` comments, blank lines. Throws InputError("hostfile", source, "line N", ...) for a
// bad name, a stray word, a host listed twice, or no host at all.
std::vector<std::string> parse_hostfile(const std::string& text, const std::string& source);

// Host k runs every rank on node k: node_of_rank[r] is rank r's node (non-decreasing: ranks are
// devices in ascending id and a node's devices are consecutive). Returns the hosts that get
// ranks, in rank order, with their counts. Throws InputError("hostfile", source, ...) when a node
// has no host (hosts past the last node used are left idle).
std::vector<HostRanks> place_on_hosts(const std::vector<std::int64_t>& node_of_rank,
                                      const std::vector<std::string>& hosts,
                                      const std::string& source);

// The host of world rank `rank` under `hosts` (mpirun_argv's placement), "" when hosts is empty
// (every rank on this host) or the rank is beyond them.
std::string host_of_rank(const std::vector<HostRanks>& hosts, int rank);

// Whether this process runs as root (euid 0): the usual value of MpirunOptions::as_root.
bool running_as_root();

}  // namespace eth
