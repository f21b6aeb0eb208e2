// The `uniform` baseline (Megatron-style): one (tp, pp) shape laid over the devices in id order
// as if they were all alike, units split evenly, equal data per replica, one micro-batch size,
// and no recompute or full recompute everywhere, checked against the smallest device memory.
#include <algorithm>
#include <limits>
#include <sstream>

#include "cost/stage_costs.h"
#include "search/data_balance.h"
#include "search/engine.h"

namespace eth::search {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Shape {
  std::int64_t tp = 1, pp = 1, dp = 1;
};

// Megatron's rank order (tp fastest, then dp, then pp): stage s of replica p holds ids
// (s * dp + p) * tp .. + tp - 1. Empty when a tp group would span nodes or types.
std::vector<std::vector<std::vector<std::int64_t>>> uniform_devices(const ClusterIndex& cluster,
                                                                    const Shape& sh) {
  std::vector<std::vector<std::vector<std::int64_t>>> out(static_cast<std::size_t>(sh.dp));
  for (std::int64_t p = 0; p < sh.dp; ++p) {
    for (std::int64_t s = 0; s < sh.pp; ++s) {
      std::vector<std::int64_t> ids;
      for (std::int64_t k = 0; k < sh.tp; ++k) ids.push_back((s * sh.dp + p) * sh.tp + k);
      const std::int64_t first = cluster.node_of(ids.front());
      for (std::int64_t id : ids) {
        // One node holds one device type.
        if (cluster.node_of(id) != first) return {};
      }
      out[static_cast<std::size_t>(p)].push_back(std::move(ids));
    }
  }
  return out;
}

// Even split: every stage gets U / pp units, the first U % pp stages one more.
std::vector<std::int64_t> even_bounds(std::int64_t units, std::int64_t pp) {
  std::vector<std::int64_t> b{0};
  for (std::int64_t s = 0; s < pp; ++s)
    b.push_back(b.back() + units / pp + (s < units % pp ? 1 : 0));
  return b;
}

}  // namespace

std::vector<Candidate> search_uniform(Context& ctx, std::string& diagnosis) {
  const ClusterIndex index(ctx.cluster);
  const std::int64_t N = index.num_devices(), U = ctx.num_units();
  double smallest = kInf;
  for (const NodeSpec& node : ctx.cluster.nodes) {
    smallest = std::min(smallest, ctx.cluster.type(node.device_type).memory_bytes());
  }
  const std::int64_t rc_options[] = {0, kFullRecompute};
  std::vector<Candidate> all;
  for (std::int64_t tp : ctx.opt.tp) {
    if (!ctx.model.tp_splits(tp)) continue;
    for (std::int64_t pp = 1; pp <= U; ++pp) {
      if (N % (tp * pp) != 0) continue;
      const Shape sh{tp, pp, N / (tp * pp)};
      ++ctx.stats.generated;
      if (sh.dp > ctx.max_pipelines()) {
        ++ctx.stats.skipped["max_pipelines"];
        continue;
      }
      if (sh.dp < ctx.min_pipelines) continue;  // a sharded pass's (engine.h)
      const auto devices = uniform_devices(index, sh);
      if (devices.empty()) {
        ++ctx.stats.skipped["packing"];
        continue;
      }
      const std::vector<std::int64_t> bounds = even_bounds(U, pp);
      Candidate best;
      best.objective_ms = kInf;
      for (std::int64_t mbs : ctx.opt.micro_batch_sizes) {
        for (std::int64_t rc : rc_options) {
          double worst = 0;
          bool ok = true;
          for (std::int64_t p = 0; p < sh.dp && ok; ++p) {
            const auto& pd = devices[static_cast<std::size_t>(p)];
            double sum = 0, mx = 0;
            for (std::int64_t s = 0; s < pp && ok; ++s) {
              const std::string& type =
                  index.type_of(pd[static_cast<std::size_t>(s)][0]).name;
              if (!ctx.tables.covers(type, tp, mbs)) {
                ok = false;
                break;
              }
              const UnitTable& t = ctx.tables.get(type, tp, mbs);
              const auto i = bounds[static_cast<std::size_t>(s)];
              const auto j = bounds[static_cast<std::size_t>(s) + 1];
              if (range_memory(t, pp - s, i, j, static_cast<int>(rc)) > smallest) ok = false;
              const auto ri = static_cast<std::size_t>(rc);
              const double time = t.forward_prefix[static_cast<std::size_t>(j)] -
                                  t.forward_prefix[static_cast<std::size_t>(i)] +
                                  t.backward_prefix[ri][static_cast<std::size_t>(j)] -
                                  t.backward_prefix[ri][static_cast<std::size_t>(i)];
              sum += time;
              mx = std::max(mx, time);
              if (s + 1 < pp) {
                const double bw =
                    index.link_bytes_per_s(pd[static_cast<std::size_t>(s)].back(),
                                                 pd[static_cast<std::size_t>(s) + 1].front());
                sum += 2.0 * (t.boundary_bytes / bw * 1e3 + kDefaultP2pLatencyMs);
              }
            }
            const std::int64_t batch = ctx.gbs / sh.dp + (p < ctx.gbs % sh.dp ? 1 : 0);
            mx = std::max(mx, round_trip_slot_ms(sum, static_cast<double>(pp)));
            worst = std::max(worst, option_time_ms(MicroBatchOption{mbs, sum, mx}, batch));
          }
          if (!ok || worst >= best.objective_ms) continue;
          best.objective_ms = worst;
          best.family = "uniform";
          best.pipelines.clear();
          for (std::int64_t p = 0; p < sh.dp; ++p) {
            PipelineChoice pc;
            pc.mbs = mbs;
            pc.batch = ctx.gbs / sh.dp + (p < ctx.gbs % sh.dp ? 1 : 0);
            for (std::int64_t s = 0; s < pp; ++s) {
              StageChoice c;
              const auto& ids = devices[static_cast<std::size_t>(p)][static_cast<std::size_t>(s)];
              c.device_type = index.type_of(ids.front()).name;
              c.tp = tp;
              c.devices = ids;
              c.first_unit = bounds[static_cast<std::size_t>(s)];
              c.last_unit = bounds[static_cast<std::size_t>(s) + 1] - 1;
              c.recompute = recompute_candidates()[static_cast<std::size_t>(rc)];
              pc.stages.push_back(std::move(c));
            }
            best.pipelines.push_back(std::move(pc));
          }
        }
      }
      if (best.pipelines.empty()) {
        ++ctx.stats.skipped["no_fit"];
        continue;
      }
      ++ctx.stats.evaluated;
      all.push_back(std::move(best));
    }
  }
  std::stable_sort(all.begin(), all.end(), [](const Candidate& a, const Candidate& b) {
    return a.objective_ms < b.objective_ms;
  });
  const auto k = static_cast<std::size_t>(std::max<std::int64_t>(1, ctx.opt.top_k));
  if (all.size() > k) all.resize(k);
  if (all.empty()) {
    std::ostringstream s;
    s << "no (tp, pp, micro-batch size) layout with no or full recompute fits the smallest "
         "device memory of the cluster ("
      << smallest / 1e9 << " GB) with units split evenly";
    diagnosis = s.str();
  }
  return all;
}

}  // namespace eth::search
