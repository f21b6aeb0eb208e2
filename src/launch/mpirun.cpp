// Builds mpirun argument vectors, reads hostfiles and places ranks on hosts (see mpirun.h);
// validation names the offending field.
#include "launch/mpirun.h"

#include <unistd.h>

#include <sstream>

#include "core/error.h"

namespace eth {

namespace {

bool valid_env_name(const std::string& name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  for (char c : name) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '_';
    if (!ok) return false;
  }
  return true;
}

// Letters, digits and `extra`, at least one character.
bool only(const std::string& s, const std::string& extra) {
  if (s.empty()) return false;
  for (char c : s) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    extra.find(c) != std::string::npos;
    if (!ok) return false;
  }
  return true;
}

// Host names and IPv4 addresses; ':' would break --host's NAME:COUNT.
bool valid_host(const std::string& h) { return only(h, "-._") && h[0] != '-'; }

}  // namespace

std::vector<std::string> mpirun_argv(const MpirunOptions& options,
                                     const std::vector<std::string>& program) {
  if (options.mpirun.empty()) throw InputError("launch", "", "mpirun", "must not be empty");
  if (options.num_ranks < 1) {
    throw InputError("launch", "", "num_ranks",
                     "must be >= 1, got " + std::to_string(options.num_ranks));
  }
  if (program.empty() || program.front().empty()) {
    throw InputError("launch", "", "program", "expected the program to run on every rank");
  }
  for (std::size_t i = 0; i < options.env.size(); ++i) {
    const std::string& e = options.env[i];
    if (!valid_env_name(e.substr(0, e.find('=')))) {
      throw InputError("launch", "", "env[" + std::to_string(i) + "]",
                       "expected NAME=VALUE or NAME with NAME of letters, digits and _, got \"" +
                           e + "\"");
    }
  }
  std::string host_list;
  int placed = 0;
  for (std::size_t i = 0; i < options.hosts.size(); ++i) {
    const HostRanks& h = options.hosts[i];
    if (!valid_host(h.host) || h.ranks < 1) {
      throw InputError("launch", "", "hosts[" + std::to_string(i) + "]",
                       "expected a host name and at least one rank, got \"" + h.host + "\" with " +
                           std::to_string(h.ranks));
    }
    host_list += (host_list.empty() ? "" : ",") + h.host + ":" + std::to_string(h.ranks);
    placed += h.ranks;
  }
  if (!options.hosts.empty() && placed != options.num_ranks) {
    throw InputError("launch", "", "hosts",
                     "the hosts take " + std::to_string(placed) + " ranks but the run has " +
                         std::to_string(options.num_ranks));
  }
  if (!options.network.empty() && options.hosts.empty()) {
    throw InputError("launch", "", "network",
                     "is the network between hosts; give it with hosts (a hostfile) only");
  }
  if (!options.network.empty() && !only(options.network, "-._,/:")) {
    throw InputError("launch", "", "network",
                     "expected interface names or CIDR subnets separated by commas (eth1, "
                     "10.0.0.0/24), got \"" + options.network + "\"");
  }
  const bool multi = !options.hosts.empty();
  std::vector<std::string> argv{options.mpirun};
  if (options.as_root) argv.emplace_back("--allow-run-as-root");
  if (options.oversubscribe) argv.emplace_back("--oversubscribe");
  argv.insert(argv.end(), {"--bind-to", "none"});
  argv.insert(argv.end(), {"--mca", "btl", multi ? "self,vader,tcp" : "self,vader"});
  argv.insert(argv.end(),
              {"--mca", "btl_vader_single_copy_mechanism", options.single_copy ? "cma" : "none"});
  if (multi) {
    argv.insert(argv.end(), {"--host", host_list, "--map-by", "slot"});
    // Open MPI's non-blocking in-place all-reduce defaults to a binomial tree that moves the
    // whole buffer 2 ceil(log2 p) times in sequence; the ring moves 2 (p - 1) / p of it, which
    // is what the cost model prices, and over a slow link the difference is 1.4-2x measured
    // (bench/multihost_bench). One host keeps the default the cpu link figures were fitted to.
    argv.insert(argv.end(), {"--mca", "coll_libnbc_iallreduce_algorithm", "ring"});
    if (!options.network.empty()) {
      argv.insert(argv.end(), {"--mca", "btl_tcp_if_include", options.network});
      argv.insert(argv.end(), {"--mca", "oob_tcp_if_include", options.network});
    }
  }
  if (options.kill_at_once) {
    argv.insert(argv.end(), {"--mca", "odls_base_sigkill_timeout", "0"});
  }
  for (const std::string& e : options.env) argv.insert(argv.end(), {"-x", e});
  argv.insert(argv.end(), {"-n", std::to_string(options.num_ranks)});
  argv.insert(argv.end(), program.begin(), program.end());
  return argv;
}

std::vector<std::string> parse_hostfile(const std::string& text, const std::string& source) {
  std::vector<std::string> hosts;
  std::vector<int> line_of;
  std::istringstream lines(text);
  int n = 0;
  for (std::string line; std::getline(lines, line);) {
    ++n;
    const std::string where = "line " + std::to_string(n);
    std::istringstream words(line.substr(0, line.find('#')));
    std::string host;
    if (!(words >> host)) continue;
    if (!valid_host(host)) {
      throw InputError("hostfile", source, where,
                       "expected a host name (letters, digits, - . _), got \"" + host + "\"");
    }
    for (std::string w; words >> w;) {
      const auto eq = w.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == w.size()) {
        throw InputError("hostfile", source, where,
                         "expected NAME [key=value ...] (slots=N), got \"" + w + "\" after " +
                             host);
      }
    }
    for (std::size_t i = 0; i < hosts.size(); ++i) {
      if (hosts[i] == host) {
        throw InputError("hostfile", source, where,
                         "host " + host + " is already listed on line " +
                             std::to_string(line_of[i]) +
                             "; list each host once, one per node of the cluster");
      }
    }
    hosts.push_back(host);
    line_of.push_back(n);
  }
  if (hosts.empty()) throw InputError("hostfile", source, "", "expected at least one host");
  return hosts;
}

std::vector<HostRanks> place_on_hosts(const std::vector<std::int64_t>& node_of_rank,
                                      const std::vector<std::string>& hosts,
                                      const std::string& source) {
  std::vector<HostRanks> out;
  std::int64_t last = -1;
  for (std::size_t r = 0; r < node_of_rank.size(); ++r) {
    const std::int64_t node = node_of_rank[r];
    ETH_CHECK(node >= last, "ranks must come node by node");
    if (node >= static_cast<std::int64_t>(hosts.size())) {
      throw InputError("hostfile", source, "",
                       "rank " + std::to_string(r) + " runs a device of cluster node " +
                           std::to_string(node) + " but the hostfile lists only " +
                           std::to_string(hosts.size()) +
                           " host(s); list one host per node, in the cluster file's node order");
    }
    if (node != last) out.push_back({hosts[static_cast<std::size_t>(node)], 0});
    ++out.back().ranks;
    last = node;
  }
  return out;
}

std::string host_of_rank(const std::vector<HostRanks>& hosts, int rank) {
  int first = 0;
  for (const HostRanks& h : hosts) {
    if (rank >= first && rank < first + h.ranks) return h.host;
    first += h.ranks;
  }
  return "";
}

bool running_as_root() { return geteuid() == 0; }

}  // namespace eth
