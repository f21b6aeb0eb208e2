// The lost-devices file and hostfile arithmetic of elastic runs (lost_devices.h).
#include "elastic/lost_devices.h"

#include <algorithm>
#include <charconv>
#include <sstream>

#include "core/error.h"

namespace eth {

namespace {

bool parse_id(std::string_view s, std::int64_t& out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size() && !s.empty();
}

}  // namespace

std::set<std::int64_t> parse_lost_devices(const std::string& text, const std::string& source,
                                          const ClusterSpec& full) {
  std::set<std::int64_t> out;
  std::istringstream lines(text);
  int n = 0;
  const std::int64_t devices = full.num_devices();
  for (std::string line; std::getline(lines, line);) {
    ++n;
    std::string words = line.substr(0, line.find('#'));
    std::replace(words.begin(), words.end(), ',', ' ');
    std::istringstream in(words);
    for (std::string w; in >> w;) {
      const auto dash = w.find('-', 1);
      std::int64_t first = 0, last = 0;
      const bool ok = dash == std::string::npos
                          ? parse_id(w, first) && (last = first, true)
                          : parse_id(std::string_view(w).substr(0, dash), first) &&
                                parse_id(std::string_view(w).substr(dash + 1), last);
      if (!ok || first > last) {
        throw InputError("lost-devices", source, "line " + std::to_string(n),
                         "expected device ids or ranges A-B (A <= B), got \"" + w + "\"");
      }
      if (first < 0 || last >= devices) {
        throw InputError("lost-devices", source, "line " + std::to_string(n),
                         "\"" + w + "\" is not in the devices of cluster " + full.name +
                             " (ids 0.." + std::to_string(devices - 1) + ")");
      }
      for (std::int64_t d = first; d <= last; ++d) out.insert(d);
    }
  }
  return out;
}

std::string add_lost_device(const std::string& text, std::int64_t device, const std::string& why) {
  std::string out = text;
  if (!out.empty() && out.back() != '\n') out += '\n';
  out += std::to_string(device);
  if (!why.empty()) out += "  # " + why;
  return out + "\n";
}

std::set<std::int64_t> devices_of_missing_hosts(const ClusterSpec& full,
                                                const std::vector<std::string>& node_hosts,
                                                const std::vector<std::string>& present) {
  std::set<std::int64_t> out;
  std::int64_t id = 0;
  for (std::size_t k = 0; k < full.nodes.size(); ++k) {
    const bool here = k < node_hosts.size() &&
                      std::find(present.begin(), present.end(), node_hosts[k]) != present.end();
    for (std::int64_t i = 0; i < full.nodes[k].devices; ++i, ++id) {
      if (!here) out.insert(id);
    }
  }
  return out;
}

std::string device_ranges(const std::set<std::int64_t>& ids) {
  std::string s;
  for (auto it = ids.begin(); it != ids.end();) {
    const std::int64_t first = *it;
    std::int64_t last = first;
    for (++it; it != ids.end() && *it == last + 1; ++it) last = *it;
    s += (s.empty() ? "" : ", ") + std::to_string(first);
    if (last > first) s += "-" + std::to_string(last);
  }
  return s;
}

}  // namespace eth
