// The partition search behind `--method eth` and `--method layer`: template lower bounds, the
// CPC cache of unit splits, SES/OSO over partitions, data balance, and turning the best
// partitions into candidates. docs/planner.md states every rule applied here.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include "core/error.h"
#include "cost/stage_costs.h"
#include "search/data_balance.h"
#include "search/engine.h"

namespace eth::search {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}

Context::Context(const ModelSpec& m, const ClusterSpec& c, const ProfileDb& p, std::int64_t batch,
                 std::int64_t seq, const PlannerOptions& o)
    : model(m), cluster(c), profile(p), gbs(batch), seq_len(seq), opt(o), tables(p, seq) {
  for (TypeInfo& t : cluster_types(c)) {
    for (std::int64_t tp : o.tp) {
      const bool shape_ok =
          tp >= 1 && m.heads % tp == 0 && m.ffn % tp == 0 && tp <= t.max_node_devices;
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
  std::vector<StageSlot> slots;
  for (const StageGroup& g : t.groups) {
    const TypeInfo& type = ctx.types[static_cast<std::size_t>(g.type)];
    if (!ctx.tables.covers(type.name, g.tp, mbs)) return {};
    const UnitTable* table = &ctx.tables.get(type.name, g.tp, mbs);
    for (std::int64_t k = 0; k < g.count; ++k) slots.push_back({table, type.capacity_bytes});
  }
  return slots;
}

namespace {

// C = sum over boundaries of 2 x (bytes / bandwidth + latency): activation forward, gradient
// back (cost/predictor.cpp's fill term). Links are read off the template by filling one node
// of a type before the next, as packing does for the first pipeline of a partition.
double template_comm_ms(const Context& ctx, const PipelineTemplate& t, double boundary_bytes) {
  double comm = 0, used = 0;
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
        comm += 2.0 * (boundary_bytes / bw * 1e3 + kDefaultP2pLatencyMs);
      } else {
        used = tp;
      }
      first = false;
      prev_type = g.type;
    }
  }
  return comm;
}

// Lower-bound and exact per-micro-batch options of templates, with the CPC cache.
class TemplateEvaluator {
 public:
  TemplateEvaluator(Context& ctx, const TemplateSet& set)
      : ctx_(ctx),
        set_(set),
        bounds_(static_cast<std::size_t>(set.size())),
        exact_(static_cast<std::size_t>(set.size())) {}

  std::size_t num_sizes() const { return ctx_.opt.micro_batch_sizes.size(); }

  // The lower-bound options of the sizes that pass the memory floor.
  const std::vector<MicroBatchOption>& bound_options(int tpl) { return bounds_entry(tpl).present; }
  // Per size index: the lower-bound option, or none when the profile or the memory floor rules
  // the size out (then no split of that size fits either).
  const std::optional<MicroBatchOption>& bound_at(int tpl, std::size_t mi) {
    return bounds_entry(tpl).per_size[mi];
  }

  // The exact option of one size (none: no split fits) and its split, computed once with CPC.
  struct SizeResult {
    bool done = false;
    std::optional<MicroBatchOption> option;
    UnitSplit split;
  };
  bool size_done(int tpl, std::size_t mi) const {
    const auto& v = exact_[static_cast<std::size_t>(tpl)];
    return !v.empty() && v[mi].done;
  }
  // A cached result (size_done must hold), not counted as a cache hit.
  const SizeResult& peek(int tpl, std::size_t mi) const {
    return exact_[static_cast<std::size_t>(tpl)][mi];
  }
  const SizeResult& exact_at(int tpl, std::size_t mi) {
    auto& v = exact_[static_cast<std::size_t>(tpl)];
    if (ctx_.opt.cpc) {
      if (v.empty()) v.resize(num_sizes());
      if (v[mi].done) {
        ++ctx_.stats.cache_hits;
        return v[mi];
      }
      v[mi] = compute(tpl, mi);
      return v[mi];
    }
    uncached_ = compute(tpl, mi);
    return uncached_;
  }

  // Every size's exact option that fits, and its split.
  struct Exact {
    std::vector<MicroBatchOption> options;
    std::vector<UnitSplit> splits;
  };
  Exact exact(int tpl) {
    Exact out;
    for (std::size_t mi = 0; mi < num_sizes(); ++mi) {
      const SizeResult& r = exact_at(tpl, mi);
      if (!r.option) continue;
      out.options.push_back(*r.option);
      out.splits.push_back(r.split);
    }
    return out;
  }

 private:
  struct Bounds {
    std::vector<std::optional<MicroBatchOption>> per_size;
    std::vector<MicroBatchOption> present;
  };

  // Per size passing the memory floor: sum = sum_u min over the template's (type, tp) of the
  // unit's F + B + comm; max = the largest of sum / S, the costliest unit at its cheapest, and
  // the cheapest ceil(U / S) units together. Never above the exact option of the same size.
  const Bounds& bounds_entry(int tpl) {
    auto& slot = bounds_[static_cast<std::size_t>(tpl)];
    if (slot) return *slot;
    slot.emplace();
    slot->per_size.resize(num_sizes());
    const PipelineTemplate& t = set_.at(tpl);
    const auto S = static_cast<double>(t.num_stages());
    for (std::size_t mi = 0; mi < num_sizes(); ++mi) {
      const std::int64_t mbs = ctx_.opt.micro_batch_sizes[mi];
      std::vector<const UnitTable*> tabs;
      double capacity = 0;
      bool covered = true;
      for (const StageGroup& g : t.groups) {
        const TypeInfo& type = ctx_.types[static_cast<std::size_t>(g.type)];
        if (!ctx_.tables.covers(type.name, g.tp, mbs)) covered = false;
        if (!covered) break;
        tabs.push_back(&ctx_.tables.get(type.name, g.tp, mbs));
        capacity += static_cast<double>(g.count) * type.capacity_bytes;
      }
      if (!covered) continue;
      double sum = 0, unit_max = 0, floor_bytes = 0;
      std::vector<double> unit_min;
      for (std::int64_t u = 0; u < ctx_.num_units(); ++u) {
        const auto ui = static_cast<std::size_t>(u);
        double c = kInf, mem = kInf;
        for (const UnitTable* tab : tabs) {
          c = std::min(c, tab->compute_ms[ui]);
          double held = kInf;
          for (const auto& h : tab->held_prefix) held = std::min(held, h[ui + 1] - h[ui]);
          mem = std::min(mem, tab->static_prefix[ui + 1] - tab->static_prefix[ui] + held);
        }
        sum += c;
        unit_max = std::max(unit_max, c);
        floor_bytes += mem;
        unit_min.push_back(c);
      }
      // The memory floor: the template's memory cannot hold every unit at least once, or its
      // stages, in order, cannot reach the last unit.
      if (floor_bytes > capacity || !stages_can_reach(t, mbs)) continue;
      // Some stage holds at least ceil(U / S) units: the bottleneck is at least the sum of that
      // many of the cheapest units.
      std::sort(unit_min.begin(), unit_min.end());
      const auto most =
          static_cast<std::size_t>((ctx_.num_units() + t.num_stages() - 1) / t.num_stages());
      const double crowded = std::accumulate(
          unit_min.begin(), unit_min.begin() + static_cast<std::ptrdiff_t>(most), 0.0);
      const double comm = template_comm_ms(ctx_, t, tabs.front()->boundary_bytes);
      // Shaved by 1e-12 so rounding never lifts a bound above the exact value it bounds.
      const double shave = 1.0 - 1e-12;
      slot->per_size[mi] = MicroBatchOption{mbs, (sum + comm) * shave,
                                            std::max({sum / S, unit_max, crowded}) * shave};
      slot->present.push_back(*slot->per_size[mi]);
    }
    return *slot;
  }

  // A necessary condition for any split to fit: stage after stage, each takes the longest range
  // that fits from where the previous one ended (least-memory recompute set, its in-flight
  // count; possibly none). Fitting is inherited by sub-ranges, so an ending boundary of any
  // fitting split is never past the greedy one: if the greedy cannot reach the last unit, no
  // split fits.
  bool stages_can_reach(const PipelineTemplate& t, std::int64_t mbs) {
    const std::int64_t S = t.num_stages();
    const auto U = static_cast<std::size_t>(ctx_.num_units());
    std::size_t reach = 0;
    std::int64_t s = 0;
    for (const StageGroup& g : t.groups) {
      const TypeInfo& type = ctx_.types[static_cast<std::size_t>(g.type)];
      const UnitTable& tab = ctx_.tables.get(type.name, g.tp, mbs);
      for (std::int64_t k = 0; k < g.count; ++k, ++s) {
        const auto q = static_cast<double>(S - s);
        double ws = 0;
        std::size_t j = reach;
        while (j < U) {
          const double w = std::max(ws, tab.workspace[j]);
          double held = kInf;
          for (const auto& h : tab.held_prefix) held = std::min(held, h[j + 1] - h[reach]);
          const double mem = tab.static_prefix[j + 1] - tab.static_prefix[reach] + w + q * held;
          if (mem > type.capacity_bytes) break;
          ws = w;
          ++j;
        }
        reach = j;
        if (reach >= U) return true;
      }
    }
    return false;
  }

  SizeResult compute(int tpl, std::size_t mi) {
    SizeResult out;
    out.done = true;
    const PipelineTemplate& t = set_.at(tpl);
    const std::int64_t S = t.num_stages(), mbs = ctx_.opt.micro_batch_sizes[mi];
    // With SES the memory floor answers without a split (the exhaustive search splits anyway).
    if (ctx_.opt.ses && !bound_at(tpl, mi)) {
      ++ctx_.stats.rejected_options["memory_floor"];
      return out;
    }
    const std::vector<StageSlot> slots = template_slots(ctx_, t, mbs);
    if (slots.empty()) {
      ++ctx_.stats.rejected_options["no_profile"];
      return out;
    }
    if (ctx_.opt.dpo) {
      out.split = split_units_dp(slots, ctx_.num_units(), scratch_);
    } else if (num_unit_splits(ctx_.num_units(), S) > ctx_.opt.max_enumerated_splits) {
      ++ctx_.stats.rejected_options["enumeration_limit"];
      return out;
    } else {
      out.split = split_units_enumerate(slots, ctx_.num_units());
    }
    ++ctx_.stats.unit_splits;
    if (!out.split.feasible) {
      ++ctx_.stats.rejected_options["no_fit"];
      return out;
    }
    if (ctx_.opt.v_intra &&
        out.split.max_ms > (1.0 + *ctx_.opt.v_intra) * out.split.sum_ms / static_cast<double>(S)) {
      ++ctx_.stats.rejected_options["v_intra"];
      return out;
    }
    const double comm = template_comm_ms(ctx_, t, slots.front().table->boundary_bytes);
    out.option = MicroBatchOption{mbs, out.split.sum_ms + comm, out.split.max_ms};
    return out;
  }

  Context& ctx_;
  const TemplateSet& set_;
  SplitScratch scratch_;
  std::vector<std::optional<Bounds>> bounds_;
  std::vector<std::vector<SizeResult>> exact_;  // [template][size], filled with CPC
  SizeResult uncached_;                         // the last result without CPC
};

// Exact kinds of a partition: per part the options of every size whose split fits. Without CPC
// every pipeline of a part is split on its own (the work CPC saves). With SES and CPC the sizes
// are split one at a time, cheapest lower bound first, and after each the partition's bound is
// tightened (exact options where known, lower bounds elsewhere): the partition is skipped once
// that bound reaches `threshold`, and the remaining sizes are left unsplit once their lower
// bounds cannot beat the exact options already known (the objective is then exact).
enum class KindsStatus { Ok, NoFit, Bound };
KindsStatus exact_kinds(Context& ctx, TemplateEvaluator& ev, const Partition& p, double threshold,
                        std::vector<PipelineKind>& kinds) {
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
    std::size_t next_k = 0, next_mi = 0;
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
        mixed[k].options.push_back(*lb);
        const double v = option_time_ms(*lb, share);
        if (v < next_value) {
          next_value = v;
          next_k = k;
          next_mi = mi;
        }
      }
      if (mixed[k].options.empty()) return KindsStatus::NoFit;
      exact_complete = exact_complete && !exact_only[k].options.empty();
    }
    const double lower = balanced_time_ms(mixed, ctx.gbs);
    if (lower >= threshold) return KindsStatus::Bound;
    if (next_value == kInf || (exact_complete && lower >= balanced_time_ms(exact_only, ctx.gbs))) {
      if (!exact_complete) return KindsStatus::NoFit;
      kinds = exact_only;
      return KindsStatus::Ok;
    }
    ev.exact_at(p.parts[next_k].tpl, next_mi);
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

void keep_top(std::vector<std::pair<double, std::size_t>>& top, std::size_t k, double obj,
              std::size_t idx) {
  top.emplace_back(obj, idx);
  std::sort(top.begin(), top.end());
  if (top.size() > k) top.pop_back();
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

// SES + OSO over the partitions; returns the best (objective, index) pairs.
std::vector<std::pair<double, std::size_t>> run_partitions(Context& ctx, TemplateEvaluator& ev,
                                                           const TemplateSet& set,
                                                           const std::vector<Partition>& parts) {
  const PlannerOptions& o = ctx.opt;
  std::vector<double> bound(parts.size(), 0.0);
  if (o.ses || o.oso) {
    for (std::size_t i = 0; i < parts.size(); ++i) {
      std::vector<PipelineKind> kinds;
      for (const PartitionPart& part : parts[i].parts) {
        const auto& opts = ev.bound_options(part.tpl);
        if (opts.empty()) {
          kinds.clear();
          break;
        }
        kinds.push_back(PipelineKind{opts, part.count});
      }
      bound[i] = kinds.empty() ? kInf : balanced_time_ms(kinds, ctx.gbs);
    }
  }
  std::vector<std::size_t> order(parts.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  if (o.oso) {
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return bound[a] < bound[b]; });
  }
  std::vector<std::pair<double, std::size_t>> top;
  double best = kInf;
  const auto k = static_cast<std::size_t>(std::max<std::int64_t>(1, o.top_k));
  auto skip = [&](const char* reason) { ++ctx.stats.skipped[reason]; };
  std::vector<std::int64_t> pack_scratch;
  for (std::size_t pos = 0; pos < order.size(); ++pos) {
    const std::size_t i = order[pos];
    if (o.ses && bound[i] >= best * (1.0 - o.alpha)) {
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
    const KindsStatus status = exact_kinds(ctx, ev, parts[i], best * (1.0 - o.alpha), kinds);
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
    keep_top(top, k, obj, i);
    // SES prunes against the k-th best objective: the finalists the predictor ranks are then
    // the true top k (with alpha = 0), not just the best one and whatever came before it.
    if (top.size() == k) best = top.back().first;
  }
  return top;
}

}  // namespace

std::vector<Candidate> search_eth(Context& ctx, std::string& diagnosis) {
  TemplateSet set;
  std::vector<Candidate> out;
  for (const bool allow_idle : {false, true}) {
    std::vector<Partition> parts;
    GenerateOptions g{ctx.num_units(), ctx.max_pipelines(), allow_idle};
    std::int64_t too_many = generate_partitions(ctx.types, g, set, parts);
    if (ctx.types.size() >= 3) too_many += layer_partitions(ctx.types, g, set, parts);
    if (allow_idle) {
      // Exact covers were all tried in the first round.
      std::erase_if(parts, [](const Partition& p) { return p.num_idle() == 0; });
    }
    ctx.stats.generated += static_cast<std::int64_t>(parts.size()) + too_many;
    if (too_many > 0) ctx.stats.skipped["max_pipelines"] += too_many;
    TemplateEvaluator ev(ctx, set);
    const auto top = run_partitions(ctx, ev, set, parts);
    for (const auto& [obj, i] : top) out.push_back(materialize(ctx, ev, set, parts[i]));
    if (!out.empty()) return out;
  }
  diagnosis = explain_overflow(ctx, set);
  return out;
}

std::vector<Candidate> search_layer(Context& ctx, std::string& diagnosis) {
  TemplateSet set;
  std::vector<Partition> parts;
  GenerateOptions g{ctx.num_units(), ctx.max_pipelines(), false};
  const std::int64_t too_many = layer_partitions(ctx.types, g, set, parts);
  ctx.stats.generated += static_cast<std::int64_t>(parts.size()) + too_many;
  if (too_many > 0) ctx.stats.skipped["max_pipelines"] += too_many;
  TemplateEvaluator ev(ctx, set);
  // Equal data: every replica gets gbs / c samples (the first gbs % c one more) and all use one
  // micro-batch size, the one that makes the largest share fastest.
  struct Pick {
    double obj;
    std::size_t part;
    std::size_t option;
    auto operator<=>(const Pick&) const = default;
  };
  std::vector<Pick> picks;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (pack_devices(ctx.cluster, ctx.types, set, parts[i]).empty()) {
      ++ctx.stats.skipped["packing"];
      continue;
    }
    const PartitionPart& part = parts[i].parts.front();
    const auto& e = ev.exact(part.tpl);
    if (e.options.empty()) {
      ++ctx.stats.skipped["no_fit"];
      continue;
    }
    const std::int64_t largest = (ctx.gbs + part.count - 1) / part.count;
    Pick best{kInf, i, 0};
    for (std::size_t o = 0; o < e.options.size(); ++o) {
      const double t = option_time_ms(e.options[o], largest);
      if (t < best.obj) best = Pick{t, i, o};
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
    const auto& e = ev.exact(part.tpl);
    const auto devices = pack_devices(ctx.cluster, ctx.types, set, p);
    Candidate c;
    c.objective_ms = pk.obj;
    c.family = "layer";
    c.idle_devices = ctx.unusable_devices;
    for (std::int64_t i = 0; i < part.count; ++i) {
      PipelineChoice pc;
      pc.mbs = e.options[pk.option].mbs;
      pc.batch = ctx.gbs / part.count + (i < ctx.gbs % part.count ? 1 : 0);
      pc.stages = stage_choices(ctx, set.at(part.tpl), devices[static_cast<std::size_t>(i)],
                                e.splits[pk.option]);
      c.pipelines.push_back(std::move(pc));
    }
    out.push_back(std::move(c));
  }
  if (out.empty()) diagnosis = explain_overflow(ctx, set);
  return out;
}

}  // namespace eth::search
