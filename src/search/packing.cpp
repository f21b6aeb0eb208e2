// Packing a partition's stages onto real devices, node by node (first fit, stages by tp
// descending), and the same answer by counts alone for the search's inner loop.
#include "search/partition.h"

#include <algorithm>
#include <limits>
#include <vector>

namespace eth::search {

bool pack_feasible(const ClusterSpec& cluster, const std::vector<TypeInfo>& types,
                   const TemplateSet& templates, const Partition& partition,
                   std::vector<std::int64_t>& scratch) {
  // Per type, its nodes' free devices in first-fit order as runs (free, nodes): nodes of one
  // size come in runs, so a 100,000-device cluster is a few runs, not 12,500 nodes, and each
  // tp degree splits a run at most twice (so `scratch`, a per-node array before, is unused).
  struct Run {
    std::int64_t free, nodes;
  };
  std::vector<std::vector<Run>> runs(types.size());
  scratch.clear();
  for (std::size_t x = 0; x < types.size(); ++x) {
    for (std::int64_t n : types[x].nodes) {
      const std::int64_t d = cluster.nodes[static_cast<std::size_t>(n)].devices;
      if (!runs[x].empty() && runs[x].back().free == d) {
        ++runs[x].back().nodes;
      } else {
        runs[x].push_back(Run{d, 1});
      }
    }
  }
  // Distinct tp degrees, largest first (the order pack_devices places stages in).
  std::int64_t tp = std::numeric_limits<std::int64_t>::max();
  std::vector<Run> next_runs;
  for (;;) {
    std::int64_t next = 0;
    for (const auto& part : partition.parts) {
      for (const auto& g : templates.at(part.tpl).groups) {
        if (g.tp < tp) next = std::max(next, g.tp);
      }
    }
    if (next == 0) return true;
    tp = next;
    for (std::size_t x = 0; x < types.size(); ++x) {
      std::int64_t stages = 0;
      for (const auto& part : partition.parts) {
        for (const auto& g : templates.at(part.tpl).groups) {
          if (g.tp == tp && g.type == static_cast<int>(x)) stages += part.count * g.count;
        }
      }
      if (stages == 0) continue;
      // First fit: each node in order takes as many stages as fit, min(stages, free / tp).
      next_runs.clear();
      for (const Run& r : runs[x]) {
        const std::int64_t q = r.free / tp;
        if (stages == 0 || q == 0) {
          next_runs.push_back(r);
          continue;
        }
        const std::int64_t full = std::min(r.nodes, stages / q);
        if (full > 0) next_runs.push_back(Run{r.free - q * tp, full});
        stages -= full * q;
        std::int64_t left = r.nodes - full;
        if (left > 0 && stages > 0) {  // stages < q: one node takes the rest
          next_runs.push_back(Run{r.free - stages * tp, 1});
          stages = 0;
          --left;
        }
        if (left > 0) next_runs.push_back(Run{r.free, left});
      }
      if (stages > 0) return false;
      runs[x].swap(next_runs);
    }
  }
}

std::vector<std::vector<std::vector<std::int64_t>>> pack_devices(const ClusterSpec& cluster,
                                                                 const std::vector<TypeInfo>& types,
                                                                 const TemplateSet& templates,
                                                                 const Partition& partition) {
  struct Slot {
    std::size_t pipeline, stage;
    int type;
    std::int64_t tp;
  };
  std::vector<Slot> slots;
  std::vector<std::vector<std::vector<std::int64_t>>> out;
  for (const auto& part : partition.parts) {
    const PipelineTemplate& t = templates.at(part.tpl);
    for (std::int64_t i = 0; i < part.count; ++i) {
      std::size_t s = 0;
      for (const auto& g : t.groups) {
        for (std::int64_t k = 0; k < g.count; ++k) slots.push_back({out.size(), s++, g.type, g.tp});
      }
      out.emplace_back(s);
    }
  }
  std::stable_sort(slots.begin(), slots.end(),
                   [](const Slot& a, const Slot& b) { return a.tp > b.tp; });
  const std::vector<std::int64_t> first = cluster.node_first_device();
  std::vector<std::int64_t> used(cluster.nodes.size(), 0);  // devices taken, lowest first
  // Per type, the first of its nodes that may still take a stage of the current tp: nodes only
  // fill, so one passed over stays too full until the tp falls (the slots come by tp,
  // largest first), and the first fit is found without rescanning the full nodes.
  std::vector<std::size_t> cursor(types.size(), 0);
  std::int64_t cursor_tp = -1;
  for (const Slot& sl : slots) {
    if (sl.tp != cursor_tp) {
      std::fill(cursor.begin(), cursor.end(), 0);
      cursor_tp = sl.tp;
    }
    const std::vector<std::int64_t>& nodes = types[static_cast<std::size_t>(sl.type)].nodes;
    std::size_t& c = cursor[static_cast<std::size_t>(sl.type)];
    while (c < nodes.size()) {
      const auto ni = static_cast<std::size_t>(nodes[c]);
      if (cluster.nodes[ni].devices - used[ni] >= sl.tp) break;
      ++c;
    }
    if (c == nodes.size()) return {};
    const auto ni = static_cast<std::size_t>(nodes[c]);
    auto& ids = out[sl.pipeline][sl.stage];
    ids.reserve(static_cast<std::size_t>(sl.tp));
    for (std::int64_t k = 0; k < sl.tp; ++k) ids.push_back(first[ni] + used[ni] + k);
    used[ni] += sl.tp;
  }
  return out;
}

}  // namespace eth::search
