// Generating the planner's pure and mixed families (the layer family: layer_partitions.cpp;
// packing them onto devices: packing.cpp).
#include "search/partition.h"
#include "search/generation.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <numeric>
#include <unordered_map>

namespace eth::search {

std::vector<TypeInfo> cluster_types(const ClusterSpec& cluster) {
  std::map<std::string, TypeInfo> by_name;
  for (std::size_t n = 0; n < cluster.nodes.size(); ++n) {
    const NodeSpec& node = cluster.nodes[n];
    if (node.devices <= 0) continue;
    TypeInfo& t = by_name[node.device_type];
    t.name = node.device_type;
    t.devices += node.devices;
    t.nodes.push_back(static_cast<std::int64_t>(n));
    t.max_node_devices = std::max(t.max_node_devices, node.devices);
  }
  std::vector<TypeInfo> out;
  for (auto& [name, t] : by_name) {
    const DeviceType& d = cluster.type(name);
    t.capacity_bytes = d.memory_bytes();
    t.intra_bytes_per_s = d.intra_node_bandwidth_gbps * 1e9 / 8.0;
    t.inter_bytes_per_s =
        d.inter_node_bandwidth_gbps.value_or(cluster.inter_node_bandwidth_gbps) * 1e9 / 8.0;
    out.push_back(std::move(t));
  }
  return out;
}

std::int64_t PipelineTemplate::num_stages() const {
  std::int64_t n = 0;
  for (const auto& g : groups) n += g.count;
  return n;
}

std::int64_t PipelineTemplate::devices_of(int type) const {
  std::int64_t n = 0;
  for (const auto& g : groups) {
    if (g.type == type) n += g.count * g.tp;
  }
  return n;
}

std::string describe_template(const PipelineTemplate& t, const std::vector<TypeInfo>& types) {
  std::string s;
  for (const auto& g : t.groups) {
    if (!s.empty()) s += " + ";
    s += std::to_string(g.count) + "x" + types[static_cast<std::size_t>(g.type)].name;
    if (g.tp > 1) s += "/tp" + std::to_string(g.tp);
  }
  return s;
}

std::size_t TemplateSet::Hash::operator()(const PipelineTemplate& t) const {
  std::uint64_t h = 0x9e3779b97f4a7c15ULL;
  auto mix = [&h](std::uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  };
  for (const StageGroup& g : t.groups) {
    mix(static_cast<std::uint64_t>(g.type));
    mix(static_cast<std::uint64_t>(g.tp));
    mix(static_cast<std::uint64_t>(g.count));
  }
  return static_cast<std::size_t>(h);
}

int TemplateSet::intern(const PipelineTemplate& t) {
  // Looked up first: emplace would build (allocate and copy) a node even for a template known
  // already, as most are by the second round.
  if (const auto it = ids_.find(t); it != ids_.end()) return it->second;
  const int id = static_cast<int>(list_.size());
  ids_.emplace(t, id);
  list_.push_back(t);
  return id;
}

std::string_view family_name(Family f) {
  switch (f) {
    case Family::Pure:
      return "pure";
    case Family::Mixed:
      return "mixed";
    case Family::Layer:
      return "layer";
  }
  return "unknown";
}

std::int64_t Partition::num_pipelines() const {
  std::int64_t n = 0;
  for (const auto& p : parts) n += p.count;
  return n;
}

std::int64_t Partition::num_idle() const {
  return std::accumulate(idle.begin(), idle.end(), std::int64_t{0});
}

using generation::append;
using generation::saturating_product;
using generation::saturating_sum;

namespace {

// How `remaining` devices of one type become pure pipelines: `count` pipelines of `stages`
// stages at `tp` (count 0: all of them idle).
struct PureOption {
  std::int64_t tp = 1, stages = 0, count = 0;
};

std::vector<PureOption> pure_options(const TypeInfo& t, std::int64_t remaining,
                                     const GenerateOptions& opt) {
  std::vector<PureOption> out;
  if (remaining == 0) return {PureOption{1, 0, 0}};
  for (std::int64_t tp : t.tps) {
    for (std::int64_t s = 1; s <= opt.num_units && s * tp <= remaining; ++s) {
      const std::int64_t per = s * tp;
      if (remaining % per == 0 || opt.allow_idle) out.push_back({tp, s, remaining / per});
    }
  }
  if (opt.allow_idle) out.push_back(PureOption{1, 0, 0});
  return out;
}

// One type's pure options for a remainder, their templates and whether each is usable, and the
// usable ones' samples within the threshold: the same for every mixed base that leaves that
// remainder (most bases leave every device of two types or more), so worked out once, the
// samples once per threshold and tightening of the templates they use.
struct PureEntry {
  // Until interned: pure_options, their templates (-1: count 0), whether each is usable.
  std::vector<PureOption> all;
  std::vector<int> all_ids;
  std::vector<char> ok;
  bool interned = false;
  // The usable options and their templates.
  std::vector<PureOption> options;
  std::vector<int> ids;
  // Options in `all`, those leaving no device idle, and of each the usable ones (saturating).
  std::int64_t n = 0, n_busy = 0, good = 0, good_busy = 0;
  // (template, index into options), by template: where a tightened template's samples go.
  std::vector<std::pair<int, std::uint32_t>> by_id;
  // Samples of each option within `tau` (-1: its pipelines take none; 0: count 0), their
  // most, and how many entries of SampleCache::pure_log they reflect.
  double tau = std::numeric_limits<double>::quiet_NaN();
  std::size_t log_at = 0;  // into SampleCache::pure_log
  bool marked = false;     // its templates are marked pure in the SampleCache
  std::vector<std::int64_t> samples;
  std::int64_t most = 0;
};
struct PureCache {
  std::map<std::pair<std::size_t, std::int64_t>, PureEntry> by_remainder;  // (type, remainder)
  // The template of one type's pure pipeline, by (type, tp, stages): the same for every
  // remainder, so each is built and interned once rather than once per remainder.
  std::unordered_map<std::uint64_t, int> ids;
  int intern(TemplateSet& templates, std::size_t x, const PureOption& o) {
    const std::uint64_t key = (static_cast<std::uint64_t>(x) << 56) ^
                              (static_cast<std::uint64_t>(o.tp) << 32) ^
                              static_cast<std::uint64_t>(o.stages);
    auto [it, inserted] = ids.try_emplace(key, 0);
    if (inserted) {
      PipelineTemplate t;
      t.groups.push_back(StageGroup{static_cast<int>(x), o.tp, o.stages});
      it->second = templates.intern(t);
    }
    return it->second;
  }
};

// Per template: the most samples one pipeline takes within the threshold `tau`, as last
// computed, forgotten when the template appears in the bound log: every product holds the same
// pure templates, so each is worked out once per threshold and tightening, not once per base.
struct SampleCache {
  double tau = std::numeric_limits<double>::quiet_NaN();
  std::vector<std::int64_t> at;  // [template], -1: not known
  std::size_t log_at = 0;        // bound_log entries applied
  // The bound log's entries naming a template some PureEntry holds (`pure`), in order: mixed
  // templates fill most of the log (each base's are tightened), and an entry scanning the
  // whole log for its own few would cost a search over its options per logged template.
  std::vector<char> pure;  // [template]
  std::vector<int> pure_log;
  void mark_pure(int tpl) {
    const auto t = static_cast<std::size_t>(tpl);
    if (pure.size() <= t) pure.resize(t + 1, 0);
    pure[t] = 1;
  }
  // Follows the threshold and the log; true when the threshold changed (everything is stale).
  bool advance(const GenerateOptions& opt, double t) {
    const std::vector<int>* log = opt.bound_log;
    const bool moved = !(t == tau);
    if (moved) {
      tau = t;
      std::fill(at.begin(), at.end(), -1);
    }
    // Past the threshold's move every sample is redone, so only pure_log's order matters
    // there; it is kept whole so that entries' positions in it stay valid.
    for (; log && log_at < log->size(); ++log_at) {
      const int tpl = (*log)[log_at];
      const auto i = static_cast<std::size_t>(tpl);
      if (!moved && i < at.size()) at[i] = -1;
      if (i < pure.size() && pure[i]) pure_log.push_back(tpl);
    }
    return moved;
  }
  std::int64_t per_pipeline(const GenerateOptions& opt, int tpl) {
    const auto t = static_cast<std::size_t>(tpl);
    if (at.size() <= t) at.resize(t + 1, -1);
    if (at[t] >= 0) return at[t];
    std::int64_t b = 0;
    for (const auto& o : opt.bound_options(tpl)) b = std::max(b, option_max_batch(o, tau, opt.gbs));
    at[t] = b;
    return b;
  }
};

// The most samples a set of pipelines can take within the search's threshold, per pure option
// (and for the base), from the templates' lower-bound options: the same test as the data
// balance's feasibility, so a combination whose sum falls short of the global batch (or with a
// pipeline that takes no sample) has a bound above the threshold. Refreshed whenever the
// threshold falls or the bounds tighten (the generator reads the chosen options' samples
// afresh at each test, so its sums use the current ones); a refresh redoes only the options
// whose templates the bound log names since the last one.
// Vectors a product's generation fills afresh for each base, kept from base to base (tens of
// thousands of them) so that each is allocated once.
struct ProductBuffers {
  std::vector<PureEntry*> entries;
  std::vector<std::int64_t> suffix, combos, part_samples;
};

class SampleBound {
 public:
  SampleBound(const GenerateOptions& opt, const Partition& base,
              const std::vector<PureEntry*>& entries, SampleCache& cache, ProductBuffers& buffers)
      : opt_(opt), base_(base), entries_(entries), cache_(cache),
        part_samples_(buffers.part_samples), suffix_(buffers.suffix), combos_(buffers.combos) {
    suffix_.assign(entries.size() + 1, 0);
    combos_.assign(entries.size() + 1, 1);
    for (PureEntry* e : entries) {
      if (e->marked) continue;
      e->marked = true;  // before the entry's first sync, which redoes all of its samples
      for (const int id : e->ids) {
        if (id >= 0) cache.mark_pure(id);
      }
    }
    for (std::size_t x = entries.size(); x-- > 0;) {
      combos_[x] = saturating_product(combos_[x + 1],
                                      static_cast<std::int64_t>(entries[x]->options.size()));
    }
  }
  // Whether pruning applies (a threshold is set), after updating to it. With no incumbent yet
  // (an infinite threshold) only options whose template has no size left that fits prune.
  bool refresh() {
    if (!opt_.threshold) return false;
    const double t = opt_.threshold();
    const std::size_t v = opt_.bound_log ? opt_.bound_log->size() : 0;
    if (ready_ && t == tau_ && v == log_at_) return true;
    ready_ = true;
    tau_ = t;
    log_at_ = v;
    cache_.advance(opt_, t);
    pure_at_ = cache_.pure_log.size();
    base_samples_ = 0;
    part_samples_.resize(base_.parts.size());
    for (std::size_t p = 0; p < base_.parts.size(); ++p) {
      const std::int64_t b = cache_.per_pipeline(opt_, base_.parts[p].tpl);
      part_samples_[p] = b == 0 ? -1 : base_.parts[p].count * b;
      if (part_samples_[p] < 0) {
        base_samples_ = -1;
        break;
      }
      base_samples_ += part_samples_[p];
    }
    for (std::size_t x = entries_.size(); x-- > 0;) {
      sync(*entries_[x]);
      suffix_[x] = suffix_[x + 1] + entries_[x]->most;
    }
    return true;
  }
  // Whether types x.. can still bring the samples taken to the global batch.
  bool reachable(std::size_t x, std::int64_t taken) const {
    return base_samples_ >= 0 && base_samples_ + taken + suffix_[x] >= opt_.gbs;
  }
  // Samples of option k of type x within the threshold (-1: a pipeline takes none); the whole
  // batch while pruning does not apply (so sums started then never fall short later).
  std::int64_t samples(std::size_t x, std::size_t k) const {
    return ready_ ? entries_[x]->samples[k] : opt_.gbs;
  }
  double tau() const { return tau_; }
  bool finite() const { return tau_ < kInfinity; }
  // Whether the last refresh found a finite threshold: the threshold (the k-th best objective)
  // only falls, so it is finite still, and a test for an infinite one needs no refresh.
  bool was_finite() const { return ready_ && tau_ < kInfinity; }
  // The samples each pipeline of base part p must take within the threshold for the rest at
  // their most to reach the global batch (refresh must have returned true).
  std::int64_t need(std::size_t p) const {
    const std::int64_t rest = base_samples_ - part_samples_[p] + suffix_[0];
    const std::int64_t count = base_.parts[p].count;
    return std::max<std::int64_t>(1, (opt_.gbs - rest + count - 1) / count);
  }
  // What options chosen[y] of the types y < x take (samples), -1 when one takes none.
  std::int64_t taken(std::size_t x, const std::vector<std::size_t>& chosen) const {
    std::int64_t sum = 0;
    for (std::size_t y = 0; y < x; ++y) {
      const std::int64_t s = samples(y, chosen[y]);
      if (s < 0) return -1;
      sum = saturating_sum(sum, s);
    }
    return sum;
  }
  // Combinations of one option per type x..
  std::int64_t combinations(std::size_t x) const { return combos_[x]; }
  // The samples option k of type x must take within the threshold for the sub-product under
  // it to reach the global batch, the types after x at their most (ready must hold).
  std::int64_t short_of(std::size_t x, std::int64_t taken) const {
    return opt_.gbs - base_samples_ - taken - suffix_[x + 1];
  }

 private:
  static constexpr double kInfinity = std::numeric_limits<double>::infinity();
  // Brings an entry's samples to the threshold and the log: all of them after the threshold
  // moved, else those of the templates logged since (bounds only tighten, so an entry no
  // template of which was logged is current).
  void sync(PureEntry& e) {
    const std::size_t v = pure_at_;
    if (e.tau == tau_ && e.log_at == v) return;
    auto redo = [&](std::size_t k) {
      const PureOption& o = e.options[k];
      if (o.count == 0) return;
      const std::int64_t b = cache_.per_pipeline(opt_, e.ids[k]);
      e.samples[k] = b == 0 ? -1 : o.count * b;
    };
    bool changed = false;
    if (!(e.tau == tau_) || !opt_.bound_log || e.log_at > v) {
      e.samples.assign(e.options.size(), 0);
      for (std::size_t k = 0; k < e.options.size(); ++k) redo(k);
      changed = true;
    } else {
      const std::vector<int>& log = cache_.pure_log;
      for (std::size_t i = e.log_at; i < v; ++i) {
        auto it = std::lower_bound(e.by_id.begin(), e.by_id.end(),
                                   std::make_pair(log[i], std::uint32_t{0}));
        if (it == e.by_id.end() || it->first != log[i]) continue;
        redo(it->second);
        changed = true;
      }
    }
    e.tau = tau_;
    e.log_at = v;
    if (!changed) return;
    e.most = 0;
    for (const std::int64_t n : e.samples) e.most = std::max(e.most, n);
  }
  const GenerateOptions& opt_;
  const Partition& base_;
  const std::vector<PureEntry*>& entries_;
  SampleCache& cache_;
  bool ready_ = false;
  double tau_ = kInfinity;
  std::size_t log_at_ = 0;   // bound_log entries seen
  std::size_t pure_at_ = 0;  // of them, those naming a pure template (cache_.pure_log's)
  std::int64_t base_samples_ = 0;
  std::vector<std::int64_t>& part_samples_;  // these three: in the ProductBuffers
  std::vector<std::int64_t>& suffix_;
  std::vector<std::int64_t>& combos_;
};

// Sub-products at least this large under a pure option get its template tightened first.
constexpr std::int64_t kTightenAt = 8;

// Before the sub-product under option k of type x is generated (`count` pipelines of `tpl`),
// tightens that template while the sub-product could still reach the global batch on its
// bound: it is shared by every partition of the sub-product, so one proof can prune them all.
// `taken()`: what the options chosen for the types before x take now (-1: one takes none).
template <typename Taken>
void tighten_pure(const GenerateOptions& opt, SampleBound& bound, std::size_t x, std::size_t k,
                  std::int64_t count, int tpl, const Taken& taken) {
  while (bound.refresh() && bound.finite()) {
    const std::int64_t samples = bound.samples(x, k);
    const std::int64_t before = taken();
    if (before < 0) return;  // the sub-product prunes as it is
    const std::int64_t short_by = bound.short_of(x, before);
    if (samples < 0 || samples < short_by) return;  // prunes as it is
    const std::int64_t need = std::max<std::int64_t>(1, (short_by + count - 1) / count);
    if (!opt.tighten(tpl, bound.tau(), need)) return;
  }
}

// Interns the templates of an entry's options (in type order, as first met) and keeps the
// usable ones (the memory floor), with the counts usable_options needs.
void intern_entry(std::size_t x, std::int64_t remaining, const GenerateOptions& opt,
                  TemplateSet& templates, PureCache& cache, PureEntry& e) {
  e.interned = true;
  for (const PureOption& o : e.all) {
    const int id = o.count > 0 ? cache.intern(templates, x, o) : -1;
    e.all_ids.push_back(id);
    e.ok.push_back(id < 0 || !opt.usable || opt.usable(id) ? 1 : 0);
  }
  for (std::size_t k = 0; k < e.all.size(); ++k) {
    const PureOption& o = e.all[k];
    const bool busy = o.count * o.stages * o.tp == remaining;
    ++e.n;
    e.n_busy += busy ? 1 : 0;
    e.good += e.ok[k];
    e.good_busy += busy && e.ok[k] ? 1 : 0;
    if (!e.ok[k] && opt.usable) continue;
    if (e.all_ids[k] >= 0) {
      e.by_id.emplace_back(e.all_ids[k], static_cast<std::uint32_t>(e.options.size()));
    }
    e.options.push_back(o);
    e.ids.push_back(e.all_ids[k]);
  }
  std::sort(e.by_id.begin(), e.by_id.end());
  e.all = {};  // needed no more: only the counts and the usable options are read from here
  e.all_ids = {};
  e.ok = {};
}

// Every combination of one pure option per type, on top of `base` (the mixed part, if any).
// Each type's pure options for its remainder and their templates, left with the usable ones
// (the memory floor): the combinations holding an unusable template are counted in
// *opt.unusable, never visited. False when no combination is left to visit.
bool usable_options(const std::vector<TypeInfo>& types, const std::vector<std::int64_t>& remaining,
                    const GenerateOptions& opt, const Partition& base, TemplateSet& templates,
                    PureCache& cache, std::vector<PureEntry*>& entries) {
  entries.clear();
  for (std::size_t x = 0; x < types.size(); ++x) {
    auto [it, inserted] = cache.by_remainder.try_emplace({x, remaining[x]});
    if (inserted) it->second.all = pure_options(types[x], remaining[x], opt);
    // This remainder has no cover at all (an entry is interned only once it has one).
    if (!it->second.interned && it->second.all.empty()) return false;
    entries.push_back(&it->second);
  }
  for (std::size_t x = 0; x < types.size(); ++x) {
    if (!entries[x]->interned) intern_entry(x, remaining[x], opt, templates, cache, *entries[x]);
  }
  // Combinations holding an unusable template are counted, not visited: all of them, and those
  // leaving no device idle (which the idle round does not count: the exact round did).
  if (opt.usable) {
    std::int64_t all = 1, all_busy = 1, good = 1, good_busy = 1;
    for (const PureEntry* e : entries) {
      all = saturating_product(all, e->n);
      all_busy = saturating_product(all_busy, e->n_busy);
      good = saturating_product(good, e->good);
      good_busy = saturating_product(good_busy, e->good_busy);
    }
    // The base's memory floor is a bound of its own (a mixed template's, worked out once it is
    // asked for): asked only when some type's options leave a combination, as they rarely do
    // where no exact cover fits (four types at 10,000 devices: 49,000 mixed templates).
    bool base_ok = good > 0;
    for (const auto& part : base.parts) base_ok = base_ok && opt.usable(part.tpl);
    if (!base_ok) good = good_busy = 0;
    const std::int64_t bad = all - good, bad_busy = all_busy - good_busy;
    *opt.unusable = saturating_sum(*opt.unusable, opt.allow_idle ? bad - bad_busy : bad);
    if (!base_ok) return false;
    // A type without a usable option leaves no combination to visit (all were counted
    // above): return before probing or tightening templates none of them would use.
    for (const PureEntry* e : entries) {
      if (e->options.empty()) return false;
    }
  }
  return true;
}

// Tightens the mixed base's templates (shared by every partition of the product over it) while
// the product could still reach the global batch on its bound; true when it cannot (then every
// combination is counted as pruned).
bool tighten_base(const GenerateOptions& opt, const Partition& base, SampleBound& bound) {
  if (!opt.tighten || base.parts.empty()) return false;
  while (bound.refresh() && bound.finite() && bound.reachable(0, 0)) {
    bool tighter = false;
    for (std::size_t p = 0; p < base.parts.size(); ++p) {
      tighter = opt.tighten(base.parts[p].tpl, bound.tau(), bound.need(p)) || tighter;
    }
    if (!tighter) break;
  }
  if (bound.refresh() && !bound.reachable(0, 0)) {
    *opt.pruned = saturating_sum(*opt.pruned, bound.combinations(0));
    return true;
  }
  return false;
}

// Per type x: whether every type from x on has an option of no pipeline.
std::vector<char> no_pipeline_from(const std::vector<PureEntry*>& entries) {
  std::vector<char> out(entries.size() + 1, 1);
  for (std::size_t x = entries.size(); x-- > 0;) {
    const auto& o = entries[x]->options;
    out[x] = out[x + 1] &&
             std::any_of(o.begin(), o.end(), [](const PureOption& p) { return p.count == 0; });
  }
  return out;
}

// What one generation keeps from product to product.
struct ProductState {
  PureCache cache;
  SampleCache samples;
  ProductBuffers buffers;
};

std::int64_t add_pure_products(const std::vector<TypeInfo>& types,
                               const std::vector<std::int64_t>& remaining,
                               const GenerateOptions& opt, const Partition& base,
                               TemplateSet& templates, ProductState& state,
                               std::vector<Partition>& out) {
  std::vector<PureEntry*>& entries = state.buffers.entries;
  if (!usable_options(types, remaining, opt, base, templates, state.cache, entries)) return 0;
  SampleBound bound(opt, base, entries, state.samples, state.buffers);
  std::int64_t too_many = 0;
  if (opt.probe && bound.refresh() && !bound.finite()) {
    for (const auto& part : base.parts) opt.probe(part.tpl);
  }
  if (tighten_base(opt, base, bound)) return 0;
  Partition cur = base;
  cur.idle.assign(types.size(), 0);
  // The samples the options chosen for types 0..x-1 take within the threshold at most, read
  // afresh at every test: the threshold falls and the bounds tighten while a sub-product is
  // generated (an incumbent first appears at the first flush), so a sum carried down from
  // when an option was chosen could be far too large and prune nothing under it. -1 when a
  // chosen option's pipelines now take no sample.
  std::vector<std::size_t> chosen(types.size(), 0);
  auto taken = [&](std::size_t x) { return bound.taken(x, chosen); };
  // The partitions of a sub-product from type x on: its combinations, less the one using no
  // device at all (never built, so never counted) when no pipeline is chosen yet.
  const std::vector<char> none_from = no_pipeline_from(entries);
  auto sub_product = [&](std::size_t x, bool nothing_chosen) {
    return bound.combinations(x) - (nothing_chosen && none_from[x] ? 1 : 0);
  };
  auto unreachable = [&](std::size_t x) {
    if (!bound.refresh()) return false;
    const std::int64_t t = taken(x);
    return t < 0 || !bound.reachable(x, t);
  };
  // The last type's options end partitions: tested in place, in the leaf's order (uncounted,
  // too many pipelines, pruned, appended). Nothing but a probe or an append (which may run a
  // batch) changes the threshold or a bound here, so the samples are re-read only after one.
  auto last_type = [&](std::size_t x, std::int64_t pipes) {
    bool fresh = false, applies = false;
    std::int64_t before = 0;
    // The devices the types before x leave idle (cur.num_idle() less the last type's).
    const std::int64_t idle_before =
        std::accumulate(cur.idle.begin(), cur.idle.begin() + static_cast<std::ptrdiff_t>(x),
                        std::int64_t{0});
    for (std::size_t k = 0; k < entries[x]->options.size(); ++k) {
      if (opt.stopped && *opt.stopped) return;
      const PureOption& o = entries[x]->options[k];
      if (opt.probe && o.count > 0 && !bound.was_finite() && bound.refresh() &&
          !bound.finite()) {
        opt.probe(entries[x]->ids[k]);
        fresh = false;
      }
      if (!fresh) {
        applies = bound.refresh();
        before = applies ? taken(x) : 0;
        fresh = true;
      }
      const std::int64_t own = bound.samples(x, k);
      if (own < 0) {
        *opt.pruned = saturating_sum(*opt.pruned, 1);
        continue;
      }
      cur.idle[x] = remaining[x] - o.count * o.stages * o.tp;
      if (cur.parts.empty() && o.count == 0) continue;
      if (opt.allow_idle && opt.skip_busy && idle_before + cur.idle[x] == 0) continue;
      if (pipes + o.count > opt.max_pipelines) {
        ++too_many;
        continue;
      }
      if (applies && (before < 0 || !bound.reachable(x + 1, saturating_sum(before, own)))) {
        *opt.pruned = saturating_sum(*opt.pruned, 1);
        continue;
      }
      const std::size_t mark = cur.parts.size();
      if (o.count > 0) cur.parts.push_back(PartitionPart{entries[x]->ids[k], o.count});
      append(opt, cur, out);
      cur.parts.resize(mark);
      fresh = false;
    }
  };
  std::function<void(std::size_t, std::int64_t)> rec = [&](std::size_t x, std::int64_t pipes) {
    if (opt.stopped && *opt.stopped) return;
    if (x == types.size()) {
      if (cur.parts.empty()) return;
      if (opt.allow_idle && opt.skip_busy && cur.num_idle() == 0) return;
      if (pipes > opt.max_pipelines) {
        ++too_many;
        return;
      }
      if (unreachable(x)) {
        *opt.pruned = saturating_sum(*opt.pruned, 1);
        return;
      }
      append(opt, cur, out);
      return;
    }
    if (unreachable(x)) {
      *opt.pruned = saturating_sum(*opt.pruned, sub_product(x, cur.parts.empty()));
      return;
    }
    if (x + 1 == types.size()) {
      last_type(x, pipes);
      return;
    }
    for (std::size_t k = 0; k < entries[x]->options.size(); ++k) {
      const PureOption& o = entries[x]->options[k];
      if (opt.probe && o.count > 0 && bound.refresh() && !bound.finite()) {
        opt.probe(entries[x]->ids[k]);
        bound.refresh();
      }
      if (opt.tighten && o.count > 0 && bound.combinations(x + 1) >= kTightenAt) {
        tighten_pure(opt, bound, x, k, o.count, entries[x]->ids[k], [&] { return taken(x); });
      }
      const std::int64_t own = bound.samples(x, k);
      if (own < 0) {  // its pipelines cannot take a sample within the threshold
        *opt.pruned = saturating_sum(*opt.pruned, bound.combinations(x + 1));
        continue;
      }
      // The test the sub-product's first would make, before descending into it: most options
      // of a type fall short, and the call per option is what a product's visit costs.
      if (bound.refresh()) {
        const std::int64_t before = taken(x);
        if (before < 0) {  // an earlier choice no longer takes a sample: none of the rest can
          std::int64_t rest = 0;
          for (std::size_t r = k; r < entries[x]->options.size(); ++r) {
            rest = saturating_sum(rest, bound.combinations(x + 1));
          }
          *opt.pruned = saturating_sum(*opt.pruned, rest);
          return;
        }
        if (!bound.reachable(x + 1, saturating_sum(before, own))) {
          *opt.pruned = saturating_sum(*opt.pruned,
                                       sub_product(x + 1, cur.parts.empty() && o.count == 0));
          continue;
        }
      }
      chosen[x] = k;
      const std::size_t mark = cur.parts.size();
      if (o.count > 0) cur.parts.push_back(PartitionPart{entries[x]->ids[k], o.count});
      cur.idle[x] = remaining[x] - o.count * o.stages * o.tp;
      rec(x + 1, pipes + o.count);
      cur.parts.resize(mark);
    }
  };
  rec(0, base.num_pipelines());
  return too_many;
}

}  // namespace

std::int64_t generate_partitions(const std::vector<TypeInfo>& types, const GenerateOptions& opt,
                                 TemplateSet& templates, std::vector<Partition>& out) {
  std::vector<std::int64_t> all;
  for (const auto& t : types) all.push_back(t.devices);
  std::int64_t too_many = 0;
  ProductState state;
  // Pure family: each type on its own.
  too_many += add_pure_products(types, all, opt, Partition{}, templates, state, out);
  // Mixed family: c copies of (a stages of X at tp1, then b stages of Y at tp2) using every
  // device of X or every device of Y; the rest as pure pipelines. The base's template, the
  // base and the remainders are rewritten in place, base after base (tens of thousands).
  PipelineTemplate tpl;
  tpl.groups.resize(2);
  Partition base;
  base.family = Family::Mixed;
  base.parts.resize(1);
  std::vector<std::int64_t> rem;
  for (std::size_t x = 0; x < types.size() && opt.mixed; ++x) {
    for (std::size_t y = 0; y < types.size(); ++y) {
      if (x == y) continue;
      const TypeInfo& X = types[x];
      const TypeInfo& Y = types[y];
      for (std::int64_t t1 : X.tps) {
        for (std::int64_t t2 : Y.tps) {
          for (std::int64_t c = 1; c * (t1 + t2) <= X.devices + Y.devices; ++c) {
            if (opt.stopped && *opt.stopped) return too_many;
            // Only covers that use every device of X or of Y: a is X's exact share, or b is
            // Y's (so the loops visit O(units) pairs per c, not O(units^2)).
            const std::int64_t a_full = X.devices % (c * t1) == 0 ? X.devices / (c * t1) : 0;
            const std::int64_t b_full = Y.devices % (c * t2) == 0 ? Y.devices / (c * t2) : 0;
            if (a_full == 0 && b_full == 0) continue;
            for (std::int64_t a = b_full == 0 ? a_full : 1;
                 c * a * t1 <= X.devices && a < opt.num_units; ++a) {
              const bool x_full = a == a_full;
              if (!x_full && b_full == 0) break;
              for (std::int64_t b = x_full ? 1 : b_full;
                   c * b * t2 <= Y.devices && a + b <= opt.num_units; ++b) {
                const bool y_full = b == b_full;
                if (!x_full && !y_full) break;
                tpl.groups[0] = StageGroup{static_cast<int>(x), t1, a};
                tpl.groups[1] = StageGroup{static_cast<int>(y), t2, b};
                base.parts[0] = PartitionPart{templates.intern(tpl), c};
                rem = all;
                rem[x] -= c * a * t1;
                rem[y] -= c * b * t2;
                too_many +=
                    add_pure_products(types, rem, opt, base, templates, state, out);
              }
            }
          }
        }
      }
    }
  }
  return too_many;
}

}  // namespace eth::search
