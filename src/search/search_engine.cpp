// The partition search behind `--method eth` and `--method layer`: template lower bounds, the
// CPC cache of unit splits, SES/OSO over partitions, data balance, and turning the best
// partitions into candidates. docs/planner.md states every rule applied here.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <tuple>

#include "core/error.h"
#include "cost/stage_costs.h"
#include "model/arithmetic.h"
#include "search/data_balance.h"
#include "search/engine.h"
#include "search/template_evaluator.h"

namespace eth::search {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}

Context::Context(const ModelSpec& m, const ClusterSpec& c, const ProfileDb& p, std::int64_t batch,
                 std::int64_t seq, const PlannerOptions& o, std::int64_t shard_holders)
    : model(m),
      cluster(c),
      profile(p),
      gbs(batch),
      seq_len(seq),
      opt(o),
      tables(p, seq, true, kDefaultCollectiveWindowBytes, shard_holders),
      layer_tables(p, seq, o.layer_operator_recompute, kDefaultCollectiveWindowBytes,
                   shard_holders),
      min_pipelines(std::max<std::int64_t>(1, shard_holders)) {
  for (TypeInfo& t : cluster_types(c)) {
    for (std::int64_t tp : o.tp) {
      const bool shape_ok =
          m.tp_splits(tp) && tp <= t.max_node_devices;
      if (!shape_ok) continue;
      bool profiled = false;
      for (std::int64_t mbs : o.micro_batch_sizes) profiled |= tables.covers(t.name, tp, mbs);
      if (profiled) {
        t.tps.push_back(tp);
      } else {
        ++stats.rejected_options["tp_not_profiled"];
      }
    }
    if (t.tps.empty()) {
      unusable_devices += t.devices;
      continue;
    }
    types.push_back(std::move(t));
  }
}

std::int64_t Context::max_pipelines() const {
  return opt.max_pipelines > 0 ? std::min(opt.max_pipelines, gbs) : gbs;
}

std::vector<StageSlot> template_slots(Context& ctx, const PipelineTemplate& t, std::int64_t mbs) {
  return template_slots(ctx, ctx.tables, t, mbs);
}

std::vector<StageSlot> template_slots(Context& ctx, CostTables& tables, const PipelineTemplate& t,
                                      std::int64_t mbs) {
  std::vector<StageSlot> slots;
  for (const StageGroup& g : t.groups) {
    const TypeInfo& type = ctx.types[static_cast<std::size_t>(g.type)];
    if (!tables.covers(type.name, g.tp, mbs)) return {};
    const UnitTable* table = &tables.get(type.name, g.tp, mbs);
    for (std::int64_t k = 0; k < g.count; ++k) slots.push_back({table, type.capacity_bytes});
  }
  return slots;
}

// C = sum over boundaries of 2 x (bytes / bandwidth + latency): activation forward, gradient
// back (cost/predictor.cpp's fill term). Links are read off the template by filling one node
// of a type before the next, as packing does for the first pipeline of a partition.
void template_links(const Context& ctx, const PipelineTemplate& t, std::vector<LinkRun>& runs) {
  runs.clear();
  double used = 0;
  int prev_type = -1;
  bool first = true;
  for (const StageGroup& g : t.groups) {
    const TypeInfo& type = ctx.types[static_cast<std::size_t>(g.type)];
    for (std::int64_t k = 0; k < g.count; ++k) {
      const auto tp = static_cast<double>(g.tp);
      if (!first) {
        double bw;
        if (g.type == prev_type && used + tp <= static_cast<double>(type.max_node_devices)) {
          bw = type.intra_bytes_per_s;
          used += tp;
        } else {
          const double prev_inter =
              ctx.types[static_cast<std::size_t>(prev_type)].inter_bytes_per_s;
          bw = std::min(prev_inter, type.inter_bytes_per_s);
          used = tp;
        }
        if (!runs.empty() && runs.back().bytes_per_s == bw) {
          ++runs.back().count;
        } else {
          runs.push_back(LinkRun{bw, 1});
        }
      } else {
        used = tp;
      }
      first = false;
      prev_type = g.type;
    }
  }
}

double links_comm_ms(const std::vector<LinkRun>& runs, double boundary_bytes) {
  double comm = 0;
  for (const LinkRun& r : runs) {
    const double each = 2.0 * (boundary_bytes / r.bytes_per_s * 1e3 + kDefaultP2pLatencyMs);
    for (std::int64_t k = 0; k < r.count; ++k) comm += each;  // boundary by boundary
  }
  return comm;
}

double template_comm_ms(const Context& ctx, const PipelineTemplate& t, double boundary_bytes) {
  std::vector<LinkRun> runs;
  template_links(ctx, t, runs);
  return links_comm_ms(runs, boundary_bytes);
}

namespace {


// Exact kinds of a partition: per part the options of every size whose split fits. Without CPC
// every pipeline of a part is split on its own (the work CPC saves). With SES and CPC the sizes
// are split one at a time, cheapest lower bound first, and after each the partition's bound is
// tightened (exact options where known, lower bounds elsewhere): the partition is skipped once
// that bound reaches `threshold`, and the remaining sizes are left unsplit once their lower
// bounds cannot beat the exact options already known (the objective is then exact).
// The largest bottleneck option `pos` of kinds[k] may have while the kinds can still take the
// batch within `threshold`: when the other kinds, and kinds[k] at its other options, take too
// few samples within it, kinds[k]'s pipelines need `need` samples each from this option, which
// k micro-batches of its size take within the threshold only while its slot is at most
// (threshold - sum) / (k - 1) (one micro-batch: while its sum, at least the bottleneck, is).
// A bottleneck above the value returned (1e-9 above that slot, against rounding) leaves the
// kinds short of the batch: their balanced time is above the threshold. +infinity when no such
// value follows (the other options suffice, or no threshold yet).
double useful_bottleneck(const std::vector<PipelineKind>& kinds, std::size_t k, std::size_t pos,
                         double threshold, std::int64_t gbs) {
  if (!(threshold < kInf)) return kInf;
  std::int64_t others = 0, own = 0;  // samples within the threshold: other kinds, k's others
  for (std::size_t o = 0; o < kinds.size(); ++o) {
    std::int64_t most = 0;
    for (std::size_t i = 0; i < kinds[o].options.size(); ++i) {
      if (o == k && i == pos) continue;
      most = std::max(most, option_max_batch(kinds[o].options[i], threshold, gbs));
    }
    if (o == k) {
      own = most;
    } else {
      if (most < 1) return kInf;  // infeasible anyway: the bound says so
      others = std::min(gbs, others + kinds[o].count * most);
    }
  }
  const std::int64_t count = kinds[k].count;
  if (others + count * own >= gbs) return kInf;
  const std::int64_t need = (gbs - others + count - 1) / count;
  const MicroBatchOption& opt = kinds[k].options[pos];
  const std::int64_t micro = (need + opt.mbs - 1) / opt.mbs;
  const double slot =
      micro >= 2 ? (threshold - opt.sum_ms) / static_cast<double>(micro - 1) : threshold;
  return slot > 0 ? slot * (1.0 + 1e-9) : kInf;
}

enum class KindsStatus { Ok, NoFit, Bound };
KindsStatus exact_kinds(Context& ctx, TemplateEvaluator& ev, const Partition& p, double threshold,
                        bool strict, std::vector<PipelineKind>& kinds) {
  const std::size_t n = p.parts.size(), M = ev.num_sizes();
  kinds.assign(n, PipelineKind{});
  if (!ctx.opt.ses || !ctx.opt.cpc) {
    for (std::size_t k = 0; k < n; ++k) {
      const PartitionPart& part = p.parts[k];
      const std::int64_t repeats = ctx.opt.cpc ? 1 : part.count;
      for (std::int64_t r = 0; r < repeats; ++r) kinds[k].options = ev.exact(part.tpl).options;
      if (kinds[k].options.empty()) return KindsStatus::NoFit;
      kinds[k].count = part.count;
    }
    return KindsStatus::Ok;
  }
  const std::int64_t pipelines = p.num_pipelines();
  const std::int64_t share = (ctx.gbs + pipelines - 1) / pipelines;
  // Cache hits: the (template, size) results already known when this partition's turn came.
  for (const PartitionPart& part : p.parts) {
    for (std::size_t mi = 0; mi < M; ++mi)
      ctx.stats.cache_hits += ev.size_done(part.tpl, mi) ? 1 : 0;
  }
  std::vector<PipelineKind> mixed(n), exact_only(n);
  for (;;) {
    bool exact_complete = true;
    double next_value = kInf;
    std::size_t next_k = 0, next_mi = 0, next_pos = 0;
    for (std::size_t k = 0; k < n; ++k) {
      const int tpl = p.parts[k].tpl;
      mixed[k] = PipelineKind{{}, p.parts[k].count};
      exact_only[k] = PipelineKind{{}, p.parts[k].count};
      for (std::size_t mi = 0; mi < M; ++mi) {
        const auto& lb = ev.bound_at(tpl, mi);
        if (!lb) continue;  // no split of this size fits
        if (ev.size_done(tpl, mi)) {
          const auto& r = ev.peek(tpl, mi);
          if (r.option) {
            mixed[k].options.push_back(*r.option);
            exact_only[k].options.push_back(*r.option);
          }
          continue;
        }
        const MicroBatchOption cur = ev.current_bound(tpl, mi);
        mixed[k].options.push_back(cur);
        const double v = option_time_ms(cur, share);
        if (v < next_value) {
          next_value = v;
          next_k = k;
          next_mi = mi;
          next_pos = mixed[k].options.size() - 1;
        }
      }
      if (mixed[k].options.empty()) return KindsStatus::NoFit;
      exact_complete = exact_complete && !exact_only[k].options.empty();
    }
    const double lower = balanced_time_ms(mixed, ctx.gbs);
    if (strict ? lower > threshold : lower >= threshold) return KindsStatus::Bound;
    if (next_value == kInf || (exact_complete && lower >= balanced_time_ms(exact_only, ctx.gbs))) {
      if (!exact_complete) return KindsStatus::NoFit;
      kinds = exact_only;
      return KindsStatus::Ok;
    }
    // Templates still on their cheap bounds get the costlier terms before any split runs.
    bool deeper = false;
    for (const PartitionPart& part : p.parts) deeper = ev.deepen(part.tpl) || deeper;
    if (deeper) continue;
    // The most promising size not done: its bottleneck first, its whole split after. With a
    // cap (the bottleneck above which the partition fails its threshold), the greedy proof at
    // the cap, else the program stopped at it; without, the greedy's geometric proofs.
    const int tpl = p.parts[next_k].tpl;
    if (ev.refined(tpl, next_mi)) {
      ev.exact_at(tpl, next_mi);
    } else if (!ctx.opt.bound_generation) {
      ev.refine(tpl, next_mi);
    } else {
      const double cap = useful_bottleneck(mixed, next_k, next_pos, threshold, ctx.gbs);
      if (cap < kInf ? !ev.prove_above(tpl, next_mi, cap) : !ev.raise_floor(tpl, next_mi)) {
        ev.refine(tpl, next_mi, cap);
      }
    }
  }
}

// The largest over smallest steady-state time per sample (max_ms / mbs at each kind's best).
double inter_spread(const std::vector<PipelineKind>& kinds) {
  double lo = kInf, hi = 0;
  for (const auto& k : kinds) {
    double best = kInf;
    for (const auto& o : k.options) best = std::min(best, o.max_ms / static_cast<double>(o.mbs));
    lo = std::min(lo, best);
    hi = std::max(hi, best);
  }
  return hi / lo;
}

// The best partitions of a search so far, by objective (top_k of them, and with `ties` more
// that tie with the top_k-th), best first, ties in generation order: kept as copies, so a
// streamed search can drop each batch once it is run.
struct Ranked {
  double objective;
  std::int64_t seq;  // position in generation order
  Partition partition;
};
struct TopPartitions {
  std::vector<Ranked> list;
  std::int64_t seen = 0;  // partitions handed to run_partitions so far
  std::size_t k = 1;      // top_k
  std::size_t ties = 0;   // partitions beyond k kept while they tie with the k-th
  // The k-th best objective so far (+infinity until k are known).
  double kth() const {
    return list.size() >= k ? list[k - 1].objective : std::numeric_limits<double>::infinity();
  }
};

// With bound_generation at alpha 0 the search keeps the partitions that tie with the k-th
// best (up to this many more) and prunes only strictly above it, so its finalists hold every
// partition any order of visiting could have ranked k-th: its chosen plan is never one the
// search before it (which kept the first k it met) priced better.
constexpr std::size_t kTiesKept = 24;

void keep_top(TopPartitions& top, double obj, std::int64_t seq, const Partition& p) {
  auto before = [](const Ranked& a, double o, std::int64_t q) {
    return a.objective < o || (a.objective == o && a.seq < q);
  };
  const std::size_t k = top.k;
  if (top.list.size() >= k && (top.ties == 0 ? before(top.list.back(), obj, seq)
                                             : obj > top.kth())) {
    return;  // not in the top k
  }
  auto at = top.list.begin();
  while (at != top.list.end() && before(*at, obj, seq)) ++at;
  top.list.insert(at, Ranked{obj, seq, p});
  while (top.list.size() > k &&
         (top.list.back().objective > top.kth() || top.list.size() > k + top.ties)) {
    top.list.pop_back();
  }
}

std::vector<StageChoice> stage_choices(const Context& ctx, const PipelineTemplate& t,
                                       const std::vector<std::vector<std::int64_t>>& devices,
                                       const UnitSplit& split) {
  std::vector<StageChoice> out;
  std::size_t s = 0;
  for (const StageGroup& g : t.groups) {
    for (std::int64_t k = 0; k < g.count; ++k, ++s) {
      StageChoice c;
      c.device_type = ctx.types[static_cast<std::size_t>(g.type)].name;
      c.tp = g.tp;
      c.devices = devices[s];
      c.first_unit = split.bounds[s];
      c.last_unit = split.bounds[s + 1] - 1;
      c.recompute = recompute_candidates()[static_cast<std::size_t>(split.recompute[s])];
      out.push_back(std::move(c));
    }
  }
  return out;
}

// The data-balanced candidate of a partition.
Candidate materialize(Context& ctx, TemplateEvaluator& ev, const TemplateSet& set,
                      const Partition& p) {
  const auto devices = pack_devices(ctx.cluster, ctx.types, set, p);
  ETH_CHECK(!devices.empty(), "a finalist partition no longer packs");
  std::vector<PipelineKind> kinds;
  std::vector<TemplateEvaluator::Exact> exacts;
  for (const PartitionPart& part : p.parts) {
    exacts.push_back(ev.exact(part.tpl));
    kinds.push_back(PipelineKind{exacts.back().options, part.count});
  }
  const DataSplit split = balance_data(kinds, ctx.gbs);
  ETH_CHECK(split.feasible, "a finalist partition has no data split");
  Candidate c;
  c.objective_ms = split.time_ms;
  c.family = std::string(family_name(p.family));
  c.idle_devices = p.num_idle() + ctx.unusable_devices;
  std::size_t pipe = 0;
  for (std::size_t k = 0; k < p.parts.size(); ++k) {
    for (std::int64_t i = 0; i < p.parts[k].count; ++i, ++pipe) {
      const auto opt = static_cast<std::size_t>(split.option[pipe]);
      PipelineChoice pc;
      pc.mbs = kinds[k].options[opt].mbs;
      pc.batch = split.batch[pipe];
      pc.stages = stage_choices(ctx, set.at(p.parts[k].tpl), devices[pipe], exacts[k].splits[opt]);
      c.pipelines.push_back(std::move(pc));
    }
  }
  return c;
}

// The relative precision of a partition's key below the threshold (balanced_lower_ms): OSO
// orders partitions whose bounds lie within it of each other by generation order.
constexpr double kKeyPrecision = 1.0 / 256;

// SES + OSO over one batch of partitions, updating `top`. Exact at alpha = 0 batch after batch:
// a partition is skipped only when its bound reaches the k-th best objective found so far,
// which the final k-th best can only undercut.
void run_partitions(Context& ctx, TemplateEvaluator& ev, const TemplateSet& set,
                    const std::vector<Partition>& parts, TopPartitions& top) {
  const PlannerOptions& o = ctx.opt;
  std::vector<double> bound(parts.size(), 0.0);
  // With bound_generation and SES a partition's key need only be a lower bound that is exact
  // about the threshold at the batch's start (which only falls): one whose bound is above it is
  // skipped whatever its precise value, and one below it is bounded exactly in exact_kinds
  // before anything is decided. So the key stops within kKeyPrecision of the threshold.
  const bool strict_start = top.ties > 0;
  const double cap = strict_start ? top.kth() : top.kth() * (1.0 - o.alpha);
  const bool coarse = o.bound_generation && o.ses;
  if (o.ses || o.oso) {
    std::vector<PipelineKind> kinds;  // reused, with their options, partition after partition
    for (std::size_t i = 0; i < parts.size(); ++i) {
      kinds.resize(parts[i].parts.size());
      bool fits = !kinds.empty();
      for (std::size_t k = 0; k < kinds.size() && fits; ++k) {
        const PartitionPart& part = parts[i].parts[k];
        const auto& opts =
            o.bound_generation ? ev.tight_options(part.tpl) : ev.bound_options(part.tpl);
        fits = !opts.empty();
        kinds[k].options.assign(opts.begin(), opts.end());
        kinds[k].count = part.count;
      }
      bound[i] = !fits   ? kInf
                 : coarse ? balanced_lower_ms(kinds, ctx.gbs, cap, kKeyPrecision)
                          : balanced_time_ms(kinds, ctx.gbs);
    }
  }
  std::vector<std::size_t> order(parts.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  if (o.oso) {
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return bound[a] < bound[b]; });
  }
  // SES prunes against the k-th best objective: the finalists the predictor ranks are then
  // the true top k (with alpha = 0), not just the best one and whatever came before it.
  auto best = [&] { return top.kth(); };
  const bool strict = top.ties > 0;  // keep ties with the k-th: prune only above it
  auto beyond = [&](double b) { return strict ? b > best() : b >= best() * (1.0 - o.alpha); };
  auto skip = [&](const char* reason) { ++ctx.stats.skipped[reason]; };
  std::vector<std::int64_t> pack_scratch;
  for (std::size_t pos = 0; pos < order.size(); ++pos) {
    const std::size_t i = order[pos];
    if (o.ses && beyond(bound[i])) {
      if (!o.oso) {
        skip(bound[i] == kInf ? "memory_floor" : "bound");
        continue;
      }
      for (std::size_t rest = pos; rest < order.size(); ++rest) {
        skip(bound[order[rest]] == kInf ? "memory_floor" : "bound");
      }
      break;
    }
    if (!pack_feasible(ctx.cluster, ctx.types, set, parts[i], pack_scratch)) {
      skip("packing");
      continue;
    }
    std::vector<PipelineKind> kinds;
    const KindsStatus status =
        exact_kinds(ctx, ev, parts[i], strict ? best() : best() * (1.0 - o.alpha), strict, kinds);
    if (status != KindsStatus::Ok) {
      skip(status == KindsStatus::NoFit ? "no_fit" : "bound");
      continue;
    }
    if (o.v_inter && inter_spread(kinds) > 1.0 + *o.v_inter) {
      skip("v_inter");
      continue;
    }
    const double obj = balanced_time_ms(kinds, ctx.gbs);
    ETH_CHECK(obj < kInf, "a partition within the pipeline limit has no data split");
    ++ctx.stats.evaluated;
    keep_top(top, obj, top.seen + static_cast<std::int64_t>(i), parts[i]);
  }
  top.seen += static_cast<std::int64_t>(parts.size());
}

// Partitions held at once by a streamed search (about 130 bytes each).
constexpr std::size_t kPartitionBatch = std::size_t{1} << 18;
// The first batch with bound_generation: small, so an incumbent is known early.
constexpr std::size_t kFirstBatch = 64;
// The largest batch with bound_generation: the threshold that prunes while generating is the
// one of the last batch run, so a batch generated against a stale one is built and bounded
// only to be skipped (four types at 10,000 devices: 870k partitions built in batches of 2^18,
// 42k in batches of 2^12, the same plan).
constexpr std::size_t kBoundedBatch = 4096;

}  // namespace

namespace {
std::vector<Candidate> layer_candidates(Context& ctx, TemplateEvaluator& ev, TemplateSet& set,
                                        std::string* diagnosis);
}  // namespace

std::vector<Candidate> search_eth(Context& ctx, std::string& diagnosis) {
  TemplateSet set;
  std::vector<Candidate> out;
  TemplateEvaluator::TableFacts facts;  // the same tables in both rounds
  for (const bool allow_idle : {false, true}) {
    std::vector<Partition> parts;
    TemplateEvaluator ev(ctx, set, ctx.tables);
    ev.share_facts(facts);
    GenerateOptions g;
    g.num_units = ctx.num_units();
    g.max_pipelines = ctx.max_pipelines();
    g.allow_idle = allow_idle;
    g.skip_busy = ctx.opt.bound_generation;
    g.mixed = !ctx.opt.pure_only;
    // With SES the memory floor drops partitions as they are generated (run_partitions would
    // skip them for it; with OSO they would only be sorted first).
    std::int64_t unusable = 0;
    if (ctx.opt.ses) {
      g.usable = [&ev](int tpl) { return !ev.bound_options(tpl).empty(); };
      g.unusable = &unusable;
    }
    // Streamed: each batch of partitions is run as it is generated, so the memory held stays
    // bounded; generation stops at opt.max_partitions (reported as the limit that bound).
    TopPartitions top;
    top.k = static_cast<std::size_t>(std::max<std::int64_t>(1, ctx.opt.top_k));
    if (ctx.opt.bound_generation && ctx.opt.alpha == 0) top.ties = kTiesKept;
    std::int64_t appended = 0;
    bool stopped = false;
    const bool early = ctx.opt.ses && ctx.opt.bound_generation;
    auto run_batch = [&](std::vector<Partition>& batch) {
      if (allow_idle) {
        // Exact covers were all tried in the first round.
        std::erase_if(batch, [](const Partition& p) { return p.num_idle() == 0; });
      }
      // A sharded pass's tables charge too little to plans of fewer pipelines.
      std::erase_if(batch, [&ctx](const Partition& p) {
        return p.num_pipelines() < ctx.min_pipelines;
      });
      ctx.stats.generated += static_cast<std::int64_t>(batch.size());
      run_partitions(ctx, ev, set, batch, top);
      batch.clear();
      // Small batches first: an incumbent early lets the bound prune while generating.
      g.flush_at = std::min(early ? kBoundedBatch : kPartitionBatch, g.flush_at * 4);
    };
    g.flush_at = early ? kFirstBatch : kPartitionBatch;
    std::int64_t pruned = 0;
    if (early) {
      g.threshold = [&top, &ctx] { return top.kth() * (1.0 - ctx.opt.alpha); };
      g.bound_options = [&ev](int tpl) -> const std::vector<MicroBatchOption>& {
        return ev.tight_options(tpl);
      };
      g.bound_log = &ev.tightened_log();
      if (ctx.opt.cpc) {
        g.tighten = [&ev, &ctx](int tpl, double tau, std::int64_t need) {
          return ev.tighten(tpl, tau, ctx.gbs, need);
        };
        g.probe = [&ev](int tpl) { ev.probe_fit(tpl); };
      }
      g.order_free = [&ev](const PipelineTemplate& t) -> const std::vector<MicroBatchOption>& {
        return ev.order_free_options(t);
      };
      g.gbs = ctx.gbs;
      g.pruned = &pruned;
    }
    g.flush = run_batch;
    g.budget = ctx.opt.max_partitions;
    g.appended = &appended;
    g.stopped = &stopped;
    std::int64_t too_many = generate_partitions(ctx.types, g, set, parts);
    if (ctx.types.size() >= 3 && !ctx.opt.pure_only) {
      too_many += layer_partitions(ctx.types, g, set, parts);
    }
    run_batch(parts);
    if (stopped) ctx.stats.limits["max_partitions"] = ctx.opt.max_partitions;
    ctx.stats.generated += too_many + unusable;
    if (too_many > 0) ctx.stats.skipped["max_pipelines"] += too_many;
    if (unusable > 0) ctx.stats.skipped["memory_floor"] += unusable;
    ctx.stats.generated += pruned;
    if (pruned > 0) ctx.stats.skipped["generation_bound"] += pruned;
    for (const Ranked& r : top.list) out.push_back(materialize(ctx, ev, set, r.partition));
    if (!out.empty() && ctx.opt.pure_only) return out;
    if (!out.empty()) {
      // The layer shapes with eth's recompute sets belong to eth's space too (equal data is one
      // data split); the search objective leaves out gradient synchronization, so they join
      // the finalists the predictor ranks (plan_training adds the layer baseline's own).
      // No diagnosis: eth has its plan (explaining every template's overflow is expensive).
      for (auto& c : layer_candidates(ctx, ev, set, nullptr)) out.push_back(std::move(c));
      return out;
    }
  }
  diagnosis = explain_overflow(ctx, set);
  return out;
}

namespace {

// The layer baseline's candidates (one replicated template, equal data, one micro-batch size)
// priced with `ev`'s tables: the layer baseline's own, or eth's (every recompute set), whose
// cache then serves the templates eth already split. `diagnosis` (when not null) says why
// nothing fits.
std::vector<Candidate> layer_candidates(Context& ctx, TemplateEvaluator& ev, TemplateSet& set,
                                        std::string* diagnosis) {
  std::vector<Partition> parts;
  GenerateOptions g;
  g.num_units = ctx.num_units();
  g.max_pipelines = ctx.max_pipelines();
  const std::int64_t too_many = layer_partitions(ctx.types, g, set, parts);
  std::erase_if(parts, [&ctx](const Partition& p) {
    return p.num_pipelines() < ctx.min_pipelines;  // as in search_eth
  });
  ctx.stats.generated += static_cast<std::int64_t>(parts.size()) + too_many;
  if (too_many > 0) ctx.stats.skipped["max_pipelines"] += too_many;
  // Equal data: every replica gets gbs / c samples (the first gbs % c one more) and all use one
  // micro-batch size, the one that makes the largest share fastest.
  // `option`: the size index into opt.micro_batch_sizes.
  struct Pick {
    double obj;
    std::size_t part;
    std::size_t option;
    auto operator<=>(const Pick&) const = default;
  };
  const auto k = static_cast<std::size_t>(std::max<std::int64_t>(1, ctx.opt.top_k));
  const bool bounded = ctx.opt.ses && ctx.opt.cpc && ctx.opt.bound_generation;
  std::vector<Pick> picks;
  std::vector<double> kept;  // the k smallest pick objectives so far (bounded), ascending
  // Bounded: partitions visited by their lower bound, so the k-th pick is known early (the
  // picks do not depend on the order: the first minimum per partition, then sorted).
  auto lower_of = [&](std::size_t i) {
    const PartitionPart& part = parts[i].parts.front();
    const std::int64_t largest = (ctx.gbs + part.count - 1) / part.count;
    double lower = kInf;
    for (std::size_t mi = 0; mi < ev.num_sizes(); ++mi) {
      if (!ev.bound_at(part.tpl, mi)) continue;
      lower = std::min(lower, option_time_ms(ev.tight_options_at(part.tpl, mi), largest));
    }
    return lower;
  };
  // Bounded: a key shared by every order of a shape's groups (order_free_options), never above
  // lower_of, so a shape whose key is above the k-th pick is skipped before any order's own
  // bounds are worked out; the others are visited by key and then checked by lower_of.
  std::vector<double> key(parts.size(), 0.0);
  auto key_of = [&](std::size_t i) {
    const PartitionPart& part = parts[i].parts.front();
    const std::int64_t largest = (ctx.gbs + part.count - 1) / part.count;
    double lower = kInf;
    for (const auto& o : ev.order_free_options(set.at(part.tpl))) {
      lower = std::min(lower, option_time_ms(o, largest));
    }
    return lower;
  };
  std::vector<std::size_t> order(parts.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  if (bounded) {
    for (std::size_t i = 0; i < parts.size(); ++i) key[i] = key_of(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return key[a] < key[b]; });
  }
  std::vector<std::int64_t> pack_scratch;
  auto packs = [&](const Partition& p) {
    // pack_feasible answers as pack_devices would, by counts (tested), without the placement.
    return ctx.opt.bound_generation ? pack_feasible(ctx.cluster, ctx.types, set, p, pack_scratch)
                                    : !pack_devices(ctx.cluster, ctx.types, set, p).empty();
  };
  for (const std::size_t i : order) {
    if (!packs(parts[i])) {
      ++ctx.stats.skipped["packing"];
      continue;
    }
    const PartitionPart& part = parts[i].parts.front();
    const std::int64_t largest = (ctx.gbs + part.count - 1) / part.count;
    Pick best{kInf, i, 0};
    if (!bounded) {
      const auto& e = ev.exact(part.tpl);
      if (e.options.empty()) {
        ++ctx.stats.skipped["no_fit"];
        continue;
      }
      for (std::size_t o = 0; o < e.options.size(); ++o) {
        const double t = option_time_ms(e.options[o], largest);
        if (t < best.obj) best = Pick{t, i, o};
      }
      // Back to the size index: sizes are distinct, so the micro-batch size names it.
      const auto& sizes = ctx.opt.micro_batch_sizes;
      best.option = static_cast<std::size_t>(
          std::find(sizes.begin(), sizes.end(), e.options[best.option].mbs) - sizes.begin());
    } else {
      // Sizes whose lower bound is above the best so far of this partition, or partitions
      // whose every size is above the k-th pick, cannot change the picks (first minimum per
      // partition, then the k smallest (objective, partition)): never split.
      const double kth = kept.size() == k ? kept.back() : kInf;
      double lower = key[i] > kth ? key[i] : lower_of(i);
      if (lower <= kth && ev.deepen(part.tpl)) lower = lower_of(i);  // before any proof or split
      if (lower > kth) {
        ++ctx.stats.skipped[lower == kInf ? "no_fit" : "bound"];
        continue;
      }
      for (std::size_t mi = 0; mi < ev.num_sizes(); ++mi) {
        if (!ev.bound_at(part.tpl, mi)) continue;
        if (option_time_ms(ev.tight_options_at(part.tpl, mi), largest) > best.obj) continue;
        if (ev.slower_than(part.tpl, mi, std::min(best.obj, kth), largest)) continue;
        const auto& r = ev.exact_at(part.tpl, mi);
        if (!r.option) continue;
        const double t = option_time_ms(*r.option, largest);
        if (t < best.obj) best = Pick{t, i, mi};
      }
      if (best.obj == kInf) {
        ++ctx.stats.skipped["no_fit"];
        continue;
      }
      kept.insert(std::upper_bound(kept.begin(), kept.end(), best.obj), best.obj);
      if (kept.size() > k) kept.pop_back();
    }
    ++ctx.stats.evaluated;
    picks.push_back(best);
  }
  std::sort(picks.begin(), picks.end());
  if (picks.size() > static_cast<std::size_t>(std::max<std::int64_t>(1, ctx.opt.top_k))) {
    picks.resize(static_cast<std::size_t>(std::max<std::int64_t>(1, ctx.opt.top_k)));
  }
  std::vector<Candidate> out;
  for (const Pick& pk : picks) {
    const Partition& p = parts[pk.part];
    const PartitionPart& part = p.parts.front();
    if (!bounded) ev.exact(part.tpl);  // as the search before bound_generation counted
    const TemplateEvaluator::SizeResult chosen = ev.exact_at(part.tpl, pk.option);
    const auto devices = pack_devices(ctx.cluster, ctx.types, set, p);
    Candidate c;
    c.objective_ms = pk.obj;
    c.family = "layer";
    c.idle_devices = ctx.unusable_devices;
    for (std::int64_t i = 0; i < part.count; ++i) {
      PipelineChoice pc;
      pc.mbs = chosen.option->mbs;
      pc.batch = ctx.gbs / part.count + (i < ctx.gbs % part.count ? 1 : 0);
      pc.stages = stage_choices(ctx, set.at(part.tpl), devices[static_cast<std::size_t>(i)],
                                chosen.split);
      c.pipelines.push_back(std::move(pc));
    }
    out.push_back(std::move(c));
  }
  if (out.empty() && diagnosis != nullptr) *diagnosis = explain_overflow(ctx, set);
  return out;
}

}  // namespace

std::vector<Candidate> search_layer(Context& ctx, std::string& diagnosis) {
  TemplateSet set;
  TemplateEvaluator ev(ctx, set, ctx.layer_tables);
  if (ctx.opt.ses && ctx.opt.cpc && ctx.opt.bound_generation) ev.use_order_free_bounds();
  return layer_candidates(ctx, ev, set, &diagnosis);
}

}  // namespace eth::search
