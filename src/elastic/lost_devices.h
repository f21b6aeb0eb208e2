// Which devices of the full cluster an elastic run must not use, from the places a loss shows:
// the lost-devices file a person edits (`eth launch --elastic --lost-devices FILE`), and the
// hosts that left the hostfile (every device of such a host's node). Parsing and set arithmetic
// only; the elastic loop (launch/elastic_run.h) reads the files and watches the run.
//
// The file lists device ids of the full cluster (the cluster of the plan the run started from),
// one or more per line, as ids or ranges, separated by spaces or commas; `#` starts a comment:
//   # node 1 is being serviced
//   4-7
//   2    # killed by SIGKILL at step 12 (added by eth launch --elastic)
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "cluster/cluster_spec.h"

namespace eth {

// Throws InputError("lost-devices", source, "line N", ...) for a word that is not an id or a
// range "A-B" with A <= B, and for an id that is not a device of `full`.
std::set<std::int64_t> parse_lost_devices(const std::string& text, const std::string& source,
                                          const ClusterSpec& full);

// `text` with `device` appended on a line of its own, followed by "  # why" (a newline is added
// first when `text` does not end in one).
std::string add_lost_device(const std::string& text, std::int64_t device, const std::string& why);

// The devices of every node whose host is not in `present`: node k runs on `node_hosts[k]` (the
// hostfile as the run started, one host per node in the cluster's order). Nodes past the end of
// `node_hosts` have no host and count as lost.
std::set<std::int64_t> devices_of_missing_hosts(const ClusterSpec& full,
                                                const std::vector<std::string>& node_hosts,
                                                const std::vector<std::string>& present);

// "2, 4-7": ids as the file writes them.
std::string device_ranges(const std::set<std::int64_t>& ids);

}  // namespace eth
