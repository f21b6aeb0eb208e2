// The layer family's partitions: one template holding every type, repeated to use every
// device (the generator of the other families: partition.cpp).
#include <algorithm>
#include <functional>
#include <limits>
#include <numeric>

#include "search/generation.h"
#include "search/partition.h"

namespace eth::search {

using generation::append;
using generation::saturating_product;
using generation::saturating_sum;

namespace {

// Whether every order of the layer shape `pick` (c replicas) can be left out before any is
// interned: when no order passes the memory floor (counted as the usable test would count
// them), or when even the order-free bounds cannot take the global batch within the threshold
// (c pipelines, each at its most samples; counted as pruned while generating). Both hold for
// every order, since their bounds are never below the order-free ones.
bool order_free_prunes(const GenerateOptions& opt, const std::vector<StageGroup>& pick,
                       std::int64_t c, std::int64_t orders) {
  if (!opt.order_free || !opt.usable) return false;
  PipelineTemplate any;
  any.groups = pick;
  const std::vector<MicroBatchOption>& lower = opt.order_free(any);
  if (lower.empty()) {
    if (!opt.allow_idle) *opt.unusable += orders;  // these never leave devices idle
    return true;
  }
  if (!opt.threshold || !opt.pruned) return false;
  const double tau = opt.threshold();
  if (!(tau < std::numeric_limits<double>::infinity())) return false;
  std::int64_t most = 0;
  for (const MicroBatchOption& o : lower) most = std::max(most, option_max_batch(o, tau, opt.gbs));
  if (most > 0 && saturating_product(most, c) >= opt.gbs) return false;
  // The idle round drops layer shapes uncounted (they leave no device idle; the first round
  // counted them).
  if (!opt.allow_idle) *opt.pruned = saturating_sum(*opt.pruned, orders);
  return true;
}

}  // namespace

std::int64_t layer_partitions(const std::vector<TypeInfo>& types, const GenerateOptions& opt,
                              TemplateSet& templates, std::vector<Partition>& out) {
  std::vector<int> order(types.size());
  std::iota(order.begin(), order.end(), 0);
  std::vector<std::vector<int>> orders;
  if (types.size() <= 4) {
    do orders.push_back(order);
    while (std::next_permutation(order.begin(), order.end()));
  } else {
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return types[static_cast<std::size_t>(a)].capacity_bytes >
             types[static_cast<std::size_t>(b)].capacity_bytes;
    });
    orders.push_back(order);
  }
  std::int64_t too_many = 0;
  std::int64_t max_c = 0;
  for (const auto& t : types) max_c = std::max(max_c, t.devices);
  for (std::int64_t c = 1; c <= max_c; ++c) {
    // Per type, every (stages, tp) with c * stages * tp == devices.
    std::vector<std::vector<StageGroup>> per_type;
    bool possible = true;
    for (std::size_t x = 0; x < types.size() && possible; ++x) {
      std::vector<StageGroup> gs;
      for (std::int64_t tp : types[x].tps) {
        if (types[x].devices % (c * tp) != 0) continue;
        gs.push_back(StageGroup{static_cast<int>(x), tp, types[x].devices / (c * tp)});
      }
      possible = !gs.empty();
      per_type.push_back(std::move(gs));
    }
    if (!possible) continue;
    if (c > opt.max_pipelines) {
      ++too_many;
      continue;
    }
    std::vector<StageGroup> pick(types.size());
    std::function<void(std::size_t, std::int64_t)> rec = [&](std::size_t x, std::int64_t stages) {
      if (stages > opt.num_units) return;
      if (x == types.size()) {
        if (order_free_prunes(opt, pick, c, static_cast<std::int64_t>(orders.size()))) return;
        for (const auto& ord : orders) {
          PipelineTemplate tpl;
          for (int o : ord) tpl.groups.push_back(pick[static_cast<std::size_t>(o)]);
          const int id = templates.intern(tpl);
          if (opt.usable && !opt.usable(id)) {
            if (!opt.allow_idle) ++*opt.unusable;  // these never leave devices idle
            continue;
          }
          Partition p;
          p.family = Family::Layer;
          p.parts.push_back(PartitionPart{id, c});
          p.idle.assign(types.size(), 0);
          append(opt, p, out);
        }
        return;
      }
      for (const StageGroup& g : per_type[x]) {
        pick[x] = g;
        rec(x + 1, stages + g.count);
      }
    };
    rec(0, 0);
  }
  return too_many;
}

}  // namespace eth::search
