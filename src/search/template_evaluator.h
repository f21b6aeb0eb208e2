// Internal to search/: the lower bounds and exact unit splits of pipeline templates, per
// micro-batch size, with the CPC cache (docs/planner.md, "Search optimizations"). The partition
// search (search_engine.cpp) asks it for the options of each template a partition holds. Not a
// public API: planner.h is.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "model/arithmetic.h"
#include "search/data_balance.h"
#include "search/engine.h"

namespace eth::search {

// C = sum over boundaries of 2 x (bytes / bandwidth + latency) of a template (search_engine.cpp).
double template_comm_ms(const Context& ctx, const PipelineTemplate& t, double boundary_bytes);
// The same in two steps, for a template priced at several sizes: its boundaries' bandwidths in
// pipeline order, as runs of equal ones, then C for one size's boundary bytes (the same sum,
// boundary by boundary, as template_comm_ms).
struct LinkRun {
  double bytes_per_s = 0;
  std::int64_t count = 0;
};
void template_links(const Context& ctx, const PipelineTemplate& t, std::vector<LinkRun>& runs);
double links_comm_ms(const std::vector<LinkRun>& runs, double boundary_bytes);

// Lower-bound and exact per-micro-batch options of templates, with the CPC cache.
class TemplateEvaluator {
  static constexpr double kInf = std::numeric_limits<double>::infinity();

 public:
  // `set` may grow while the evaluator lives (templates interned during generation).
  TemplateEvaluator(Context& ctx, const TemplateSet& set, CostTables& tables)
      : ctx_(ctx), set_(set), tables_(tables) {}
  TemplateEvaluator(const TemplateEvaluator&) = delete;  // facts_ may point into itself
  TemplateEvaluator& operator=(const TemplateEvaluator&) = delete;

  // What the evaluator works out from the cost tables alone (range_fit's tables, keyed by
  // table): evaluators of one context over the same tables may share it (search_eth's two
  // rounds), where each would otherwise fill its own. `facts` must outlive the evaluator.
  struct TableFacts;
  void share_facts(TableFacts& facts) {
    facts_ = &facts;
    fit_recent_ = {};
  }

  std::size_t num_sizes() const { return ctx_.opt.micro_batch_sizes.size(); }

  // Bounds from order_free_options and each order's transfers only (the layer baseline, whose
  // shapes come in up to 24 orders of one set of groups): the speed, memory and whole-unit
  // terms of each order are left out, as the baseline's picks are settled by the greedy
  // proofs and exact splits (slower_than, exact_at) more cheaply than by those terms.
  void use_order_free_bounds() { order_free_bounds_ = true; }

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
    std::optional<double> bottleneck;  // the program's first phase, once run (refine)
    double floor = 0;  // proven below the bottleneck (exceeds), before the program runs
    int raises = 0;    // raise_floor's proofs so far (kRaises: gave up)
  };

  // Before a size's bottleneck phase: tries to prove the bottleneck above 1.25x its current
  // bound with the cheap greedy (exceeds), at most kRaises times in a row; true when it did
  // (the bound rose), false when the program should run.
  static constexpr int kRaises = 8;
  bool raise_floor(int tpl, std::size_t mi) {
    if (!ctx_.opt.cpc || !ctx_.opt.dpo || !bound_at(tpl, mi) || size_done(tpl, mi) ||
        refined(tpl, mi)) {
      return false;
    }
    grow();
    auto& per_size = exact_[static_cast<std::size_t>(tpl)];
    if (per_size.empty()) per_size.resize(num_sizes());
    SizeResult& r = per_size[mi];
    if (r.raises >= kRaises) return false;
    const double v = current_bound(tpl, mi).max_ms * 1.25;
    if (!(v > 0) || !exceeds(tpl, mi, v)) {
      r.raises = kRaises;
      return false;
    }
    ++r.raises;
    r.floor = v;
    tightened(tpl);
    return true;
  }
  bool size_done(int tpl, std::size_t mi) const {
    if (static_cast<std::size_t>(tpl) >= exact_.size()) return false;
    const auto& v = exact_[static_cast<std::size_t>(tpl)];
    return !v.empty() && v[mi].done;
  }
  // A cached result (size_done must hold), not counted as a cache hit.
  const SizeResult& peek(int tpl, std::size_t mi) const {
    return exact_[static_cast<std::size_t>(tpl)][mi];
  }
  const SizeResult& exact_at(int tpl, std::size_t mi) {
    grow();
    auto& v = exact_[static_cast<std::size_t>(tpl)];
    if (ctx_.opt.cpc) {
      if (v.empty()) v.resize(num_sizes());
      if (v[mi].done) {
        ++ctx_.stats.cache_hits;
        return v[mi];
      }
      v[mi] = compute(tpl, mi, v[mi].bottleneck);
      tightened(tpl);
      return v[mi];
    }
    uncached_ = compute(tpl, mi, std::nullopt);
    return uncached_;
  }

  // With CPC and DPO: runs the first phase of the size's program (its bottleneck) unless known,
  // which tightens current_bound; without DPO the whole split (exact_at). With `cap` (the
  // largest bottleneck the caller can use, above the size's floor) the program prices no
  // stage beyond it, and a bottleneck above it is kept as the floor `cap` instead.
  void refine(int tpl, std::size_t mi, double cap = kInf) {
    grow();
    auto& v = exact_[static_cast<std::size_t>(tpl)];
    if (v.empty()) v.resize(num_sizes());
    SizeResult& r = v[mi];
    if (r.done || r.bottleneck) return;
    tightened(tpl);
    if (!ctx_.opt.dpo || !bound_at(tpl, mi)) {
      r = compute(tpl, mi, std::nullopt);
      return;
    }
    const std::vector<StageSlot> slots =
        slots_of(set_.at(tpl), ctx_.opt.micro_batch_sizes[mi]);
    if (slots.empty()) {
      r = compute(tpl, mi, std::nullopt);
      return;
    }
    // The bound, a little lower so that rounding in it never lifts it above the bottleneck
    // (the program's answer is the larger of the two).
    const double floor = current_bound(tpl, mi).max_ms * (1.0 - 1e-9);
    if (!(cap > r.floor)) cap = kInf;
    const double b = split_units_bottleneck(slots, ctx_.num_units(), scratch_, floor, cap);
    ++ctx_.stats.unit_splits;
    if (b == kInf && cap < kInf) {
      r.floor = cap;  // the bottleneck exceeds the cap (or no split fits)
      return;
    }
    if (b == kInf) {
      ++ctx_.stats.rejected_options["no_fit"];
      r.done = true;
      return;
    }
    r.bottleneck = b;
  }
  // Whether the greedy (exceeds) proves the size's bottleneck above v, kept as its floor;
  // false when it does not, or when v is not above the floor already known.
  bool prove_above(int tpl, std::size_t mi, double v) {
    if (!ctx_.opt.cpc || !bound_at(tpl, mi) || size_done(tpl, mi) || refined(tpl, mi)) {
      return false;
    }
    grow();
    auto& per_size = exact_[static_cast<std::size_t>(tpl)];
    if (per_size.empty()) per_size.resize(num_sizes());
    if (!(v > per_size[mi].floor) || !exceeds(tpl, mi, v)) return false;
    per_size[mi].floor = v;
    tightened(tpl);
    return true;
  }
  bool refined(int tpl, std::size_t mi) const {
    if (static_cast<std::size_t>(tpl) >= exact_.size()) return false;
    const auto& v = exact_[static_cast<std::size_t>(tpl)];
    return !v.empty() && v[mi].bottleneck.has_value();
  }
  // The best lower bound known for a size not done: the exact bottleneck once refined
  // (sum_ms then at least that bottleneck), else bound_at. bound_at must hold.
  MicroBatchOption current_bound(int tpl, std::size_t mi) {
    MicroBatchOption o = *bound_at(tpl, mi);
    const auto t = static_cast<std::size_t>(tpl);
    if (t < exact_.size() && !exact_[t].empty()) {
      const SizeResult& r = exact_[t][mi];
      const double b = r.bottleneck ? *r.bottleneck : r.floor;
      o.max_ms = std::max(o.max_ms, b);
      o.sum_ms = std::max(o.sum_ms, b);
    }
    return o;
  }

  // Whether no split of (tpl, size mi) keeps every stage within v (and in memory), which
  // proves its bottleneck above v. A relaxed greedy: stage after stage, each takes the longest
  // range from where the previous one ended whose time is at most v and that fits (possibly
  // none); a stage's time and memory only grow with its range, so by induction the greedy's
  // end after each stage is never before that stage's end in any such split. If it cannot
  // reach the last unit, no such split exists.
  bool exceeds(int tpl, std::size_t mi, double v);  // template_bounds.cpp

  // The tightest lower bounds known now, per size that may still fit: the exact option of a
  // size done (none when it does not fit), the refined bound of a size whose bottleneck is
  // known, else the size's bound. Each is a lower bound of the size's exact option, so a
  // partition's data balance over them bounds its objective from below, and tighter than
  // bound_options once a template has been met. Changes only as sizes are refined or split
  // (tightened_log lists those).
  const std::vector<MicroBatchOption>& tight_options(int tpl) {
    grow();
    const auto t = static_cast<std::size_t>(tpl);
    if (tight_.size() <= t) tight_.resize(t + 1);
    TightSlot& slot = tight_[t];
    if (slot.fresh) return slot.options;
    slot.fresh = true;
    slot.options.clear();
    for (std::size_t mi = 0; mi < num_sizes(); ++mi) {
      if (!bound_at(tpl, mi)) continue;
      if (size_done(tpl, mi)) {
        if (peek(tpl, mi).option) slot.options.push_back(*peek(tpl, mi).option);
        continue;
      }
      slot.options.push_back(current_bound(tpl, mi));
    }
    return slot.options;
  }
  // Every template whose tight options may have changed, once per change, in order.
  const std::vector<int>& tightened_log() const { return log_; }
  // Whether one pipeline of (tpl, size mi) with `batch` samples provably takes longer than
  // `target` (exceeds: its bottleneck is above the slot that would let it finish in time); the
  // proof is kept as the size's floor. False says nothing. Needs CPC (a cache entry).
  bool slower_than(int tpl, std::size_t mi, double target, std::int64_t batch) {
    if (!ctx_.opt.cpc || !bound_at(tpl, mi) || size_done(tpl, mi) || refined(tpl, mi)) {
      return false;
    }
    const MicroBatchOption o = current_bound(tpl, mi);
    const std::int64_t k = (batch + o.mbs - 1) / o.mbs;
    const double slot = k >= 2 ? (target - o.sum_ms) / static_cast<double>(k - 1) : target;
    if (!(slot > 0) || slot == kInf) return false;
    const double v = slot * (1.0 + 1e-9);
    grow();
    auto& per_size = exact_[static_cast<std::size_t>(tpl)];
    if (per_size.empty()) per_size.resize(num_sizes());
    if (v <= per_size[mi].floor) return true;
    if (!exceeds(tpl, mi, v)) return false;
    per_size[mi].floor = v;
    tightened(tpl);
    return true;
  }

  // Runs bottleneck phases, size after size, until one shows a split that fits (or every size
  // is done without one: tight_options is then empty). Once per template.
  void probe_fit(int tpl) {
    const auto t = static_cast<std::size_t>(tpl);
    if (probed_.size() <= t) probed_.resize(t + 1, 0);
    if (probed_[t]) return;
    probed_[t] = 1;
    for (std::size_t mi = 0; mi < num_sizes(); ++mi) {
      if (!bound_at(tpl, mi)) continue;
      if (size_done(tpl, mi)) {
        if (peek(tpl, mi).option) return;
        continue;
      }
      if (!refined(tpl, mi)) refine(tpl, mi);
      if (refined(tpl, mi)) return;  // a finite bottleneck: some split fits
    }
  }

  // One size's entry of tight_options (bound_at must hold; a size done without a fit has
  // +infinity times).
  MicroBatchOption tight_options_at(int tpl, std::size_t mi) {
    if (size_done(tpl, mi)) {
      const auto& r = peek(tpl, mi);
      if (r.option) return *r.option;
      return MicroBatchOption{ctx_.opt.micro_batch_sizes[mi], kInf, kInf};
    }
    return current_bound(tpl, mi);
  }
  // Tightens the size whose option lets one pipeline take the most samples (at most gbs)
  // within tau, towards taking fewer than `need` (on the template's cheap bounds if it has no
  // others yet: these proofs cost the generator less than the costlier terms of every template
  // it meets): first, when a bottleneck above some v would leave it fewer, a cheap proof that
  // the bottleneck exceeds v (exceeds); else its bottleneck phase (stopped at v); then its
  // whole split. False when that size is already exact (tightening the others cannot lower
  // the most).
  bool tighten(int tpl, double tau, std::int64_t gbs, std::int64_t need) {
    std::int64_t most = -1;
    std::size_t pick = 0;
    bool exact_pick = false;
    for (std::size_t mi = 0; mi < num_sizes(); ++mi) {
      if (!bound_at(tpl, mi)) continue;
      const bool done = size_done(tpl, mi);
      if (done && !peek(tpl, mi).option) continue;
      const MicroBatchOption o = done ? *peek(tpl, mi).option : current_bound(tpl, mi);
      const std::int64_t b = option_max_batch(o, tau, gbs);
      if (b > most || (b == most && done)) {
        most = b;
        pick = mi;
        exact_pick = done;
      }
    }
    if (most < 0 || exact_pick) return false;
    grow();
    auto& per_size = exact_[static_cast<std::size_t>(tpl)];
    if (per_size.empty()) per_size.resize(num_sizes());
    SizeResult& r = per_size[pick];
    double cap = kInf;
    if (!r.bottleneck && ctx_.opt.dpo) {
      // k micro-batches take `need` samples; they finish within tau only while the slot is at
      // most (tau - sum) / (k - 1) (one micro-batch: while the sum, itself at least the
      // bottleneck, is at most tau).
      const MicroBatchOption o = current_bound(tpl, pick);
      const std::int64_t k = (need + o.mbs - 1) / o.mbs;
      const double slot = k >= 2 ? (tau - o.sum_ms) / static_cast<double>(k - 1) : tau;
      const double v = slot * (1.0 + 1e-9);
      if (slot > 0 && v > r.floor) {
        if (exceeds(tpl, pick, v)) {
          r.floor = v;
          tightened(tpl);
          return true;
        }
        cap = v;  // a bottleneck above v leaves too few samples: the program stops there
      }
    }
    if (refined(tpl, pick)) {
      exact_at(tpl, pick);
    } else {
      refine(tpl, pick, cap);
    }
    return true;
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

  // Lower bounds for every order of `t`'s groups at once (the layer family's orders), per size
  // whose tables cover it and whose memory floor holds: sum = the units' cheapest times summed,
  // max = the largest of sum / S, the costliest unit at its cheapest and the cheapest
  // ceil(U / S) units together, and the speed and memory bound with every stage granted the
  // room of one micro-batch in flight: bounds_entry's terms without what depends on the order
  // (transfers, positions, whole units), so not above bound_at of any order of t but for
  // rounding (its sums run in another order: up to a few ulp over), and never above the exact
  // option, which is all pruning needs; a size absent here is absent there. Empty: no order
  // passes the memory floor.
  const std::vector<MicroBatchOption>& order_free_options(PipelineTemplate t);

  // With bound_generation a template's bounds come in two tiers (template_options.cpp): first
  // the memory floor (every check that can prove no split fits: a size it leaves out, both
  // tiers leave out) and the terms that cost little; the speed, memory and
  // whole-unit terms once a step dearer than they are (a unit split, a greedy proof) is about
  // to run for the template. Each tier is a lower bound of the exact option. Adds the second
  // tier (a tightening; a size may then turn out not to fit); false when it is in already.
  bool deepen(int tpl);

 private:
  // Per set of tables a template uses (one size): what the bound takes from the units alone.
  struct UnitAggregate {
    double sum = 0, unit_max = 0, floor_bytes = 0;
    std::vector<double> cheapest;  // prefix sums of the units' cheapest times, ascending
  };
  // The cheap terms of one size's bound (size_bound), kept for deepen.
  struct CheapTerms {
    double sum = 0, unit_max = 0, crowded = 0, comm = 0;
  };
  struct Bounds {
    std::vector<std::optional<MicroBatchOption>> per_size;
    std::vector<MicroBatchOption> present;
    bool deep = true;  // with the speed, memory and whole-unit terms (deepen)
    std::vector<CheapTerms> cheap;  // per size, while not deep
  };

  // Per size passing the memory floor: sum = sum_u min over the template's (type, tp) of the
  // unit's F + B + comm; max = the largest of sum / S, the costliest unit at its cheapest, and
  // the cheapest ceil(U / S) units together (and, deep, the speed and memory bound and the
  // whole-unit bound). Never above the exact option of the same size. Deep at once unless
  // bound_generation (deepen).
  Bounds& bounds_entry(int tpl);
  // One size's cheap bound terms of t (bounds_entry's, once it has filled links_ for t), none
  // when the memory floor shows that
  // no split fits; and its option from them alone, or with the costlier terms (none when those
  // show that no split fits).
  std::optional<CheapTerms> cheap_terms(const PipelineTemplate& t, std::size_t mi);
  MicroBatchOption cheap_option(const PipelineTemplate& t, std::size_t mi, const CheapTerms& c);
  std::optional<MicroBatchOption> deep_option(const PipelineTemplate& t, std::size_t mi,
                                              const CheapTerms& c);
  // The tables of t's groups at mbs and their devices' memory together; false when the profile
  // does not cover some group.
  bool group_tables(const PipelineTemplate& t, std::int64_t mbs,
                    std::vector<const UnitTable*>& tabs, double& capacity);
  // bounds_entry with order_free_bounds: order_free_options (shared by every order of t's
  // groups) plus what costs little per order, its transfers and whether its stages can reach
  // the last unit. Never above the exact option; a size left out has no split that fits.
  void order_free_entry(const PipelineTemplate& t, Bounds& out);

  // A size of `tpl` was refined or split: its tight options are recomputed when next asked.
  void tightened(int tpl) {
    const auto t = static_cast<std::size_t>(tpl);
    if (t < tight_.size()) tight_[t].fresh = false;
    log_.push_back(tpl);
  }

  // Per unit, its cheapest time and least bytes over `tabs` (the tables of one template at
  // one size): summed, the largest, and the cheapest times sorted, for every template of the
  // same tables in any order or counts.
  const UnitAggregate& unit_aggregate(const std::vector<const UnitTable*>& group_tabs) {
    // Looked up through a reused key (tens of thousands of templates ask, mostly for sets of
    // tables met before).
    std::vector<const UnitTable*>& tabs = aggregate_key_;
    tabs.assign(group_tabs.begin(), group_tabs.end());
    std::sort(tabs.begin(), tabs.end());
    tabs.erase(std::unique(tabs.begin(), tabs.end()), tabs.end());
    if (auto found = unit_aggregates_.find(tabs); found != unit_aggregates_.end()) {
      return found->second;
    }
    UnitAggregate& a = unit_aggregates_[tabs];
    std::vector<const std::vector<double>*> least;
    for (const UnitTable* tab : tabs) least.push_back(&least_unit_bytes(*tab));
    std::vector<double> unit_min;
    for (std::int64_t u = 0; u < ctx_.num_units(); ++u) {
      const auto ui = static_cast<std::size_t>(u);
      double c = kInf, mem = kInf;
      for (std::size_t k = 0; k < tabs.size(); ++k) {
        c = std::min(c, tabs[k]->compute_ms[ui]);
        mem = std::min(mem, (*least[k])[ui]);
      }
      a.sum += c;
      a.unit_max = std::max(a.unit_max, c);
      a.floor_bytes += mem;
      unit_min.push_back(c);
    }
    std::sort(unit_min.begin(), unit_min.end());
    a.cheapest.push_back(0.0);
    for (double v : unit_min) a.cheapest.push_back(a.cheapest.back() + v);
    return a;
  }

  // The table of (type, tp, mbs) through a flat cache (CostTables looks keys up by name);
  // null when the profile does not cover it.
  const UnitTable* table(int type, std::int64_t tp, std::int64_t mbs) {
    const TypeInfo& info = ctx_.types[static_cast<std::size_t>(type)];
    const auto& sizes = ctx_.opt.micro_batch_sizes;
    const auto ti = static_cast<std::size_t>(
        std::find(info.tps.begin(), info.tps.end(), tp) - info.tps.begin());
    const auto mi = static_cast<std::size_t>(std::find(sizes.begin(), sizes.end(), mbs) -
                                             sizes.begin());
    constexpr std::size_t kTps = 16;  // tp degrees per type cached (more: looked up by name)
    if (ti == info.tps.size() || mi == sizes.size() || ti >= kTps) {
      return tables_.covers(info.name, tp, mbs) ? &tables_.get(info.name, tp, mbs) : nullptr;
    }
    const std::size_t at = (static_cast<std::size_t>(type) * kTps + ti) * sizes.size() + mi;
    if (table_cache_.size() <= at) table_cache_.resize(at + 1, {false, nullptr});
    auto& [known, tab] = table_cache_[at];
    if (!known) {
      known = true;
      tab = tables_.covers(info.name, tp, mbs) ? &tables_.get(info.name, tp, mbs) : nullptr;
    }
    return tab;
  }
  // template_slots through table(), into a buffer reused between calls (valid until the next).
  const std::vector<StageSlot>& slots_of(const PipelineTemplate& t, std::int64_t mbs) {
    slots_.clear();
    for (const StageGroup& g : t.groups) {
      const UnitTable* tab = table(g.type, g.tp, mbs);
      if (tab == nullptr) {
        slots_.clear();
        break;
      }
      const double capacity = ctx_.types[static_cast<std::size_t>(g.type)].capacity_bytes;
      for (std::int64_t k = 0; k < g.count; ++k) slots_.push_back({tab, capacity});
    }
    return slots_;
  }

  void grow() {
    const auto n = static_cast<std::size_t>(set_.size());
    if (bounds_.size() < n) bounds_.resize(n);
    if (exact_.size() < n) exact_.resize(n);
  }

  // Per table and unit: its static bytes plus its least held bytes (any candidate set).
  const std::vector<double>& least_unit_bytes(const UnitTable& tab) {
    auto [it, inserted] = least_bytes_.try_emplace(&tab);
    if (!inserted) return it->second;
    for (std::size_t u = 0; u + 1 < tab.static_prefix.size(); ++u) {
      double held = kInf;
      for (const auto& h : tab.held_prefix) held = std::min(held, h[u + 1] - h[u]);
      it->second.push_back(tab.static_prefix[u + 1] - tab.static_prefix[u] + held);
    }
    return it->second;
  }

  // Work weights: the model FLOPs of each unit for one sample (0 for the embedding).
  const std::vector<double>& unit_work() {
    if (work_.empty()) {
      for (std::int64_t u = 0; u < ctx_.num_units(); ++u) {
        work_.push_back(unit_forward_flops(ctx_.model, u, 1, ctx_.seq_len));
      }
      work_total_ = 0;
      for (double v : work_) work_total_ += v;  // in unit order, as the floor always summed it
    }
    return work_;
  }
  // The sum of unit_work(), summed once: the memory floor asks for it per template and size.
  double unit_work_total() {
    unit_work();
    return work_total_;
  }

  // Per table: the least time per unit of work over the units with work (nothing recomputed),
  // so a range's time is at least this times its work.
  double time_per_work(const UnitTable& tab) {
    auto [it, inserted] = time_per_work_.emplace(&tab, kInf);
    if (!inserted) return it->second;
    const auto& w = unit_work();
    for (std::size_t u = 0; u < w.size(); ++u) {
      if (w[u] > 0) it->second = std::min(it->second, tab.compute_ms[u] / w[u]);
    }
    return it->second;
  }

  // For one table, capacity and in-flight count q: per start unit i, the end of the longest
  // range [i, reach[i]) that fits one device with its least-memory recompute set (any candidate
  // set), and the most work any fitting range holds. Ranges that fit only shrink to ranges that
  // fit, so two pointers.
  struct RangeFit {
    double max_work = 0;
    std::size_t max_units = 0;  // the most units of any fitting range
    std::vector<std::size_t> reach;
  };
  // Per table and capacity: prefix sums over the in-flight count q = 1.. of range_fit's
  // max_units and max_work (for whole groups of stages at once), filled up to a q asked for.
  struct FitSums {
    std::vector<std::size_t> units{0};
    std::vector<double> work{0.0};
  };
  // Per (table, capacity): range_fit per in-flight count, and fit_sums.
  struct FitTable {
    std::vector<std::optional<RangeFit>> per_q;
    FitSums sums;
  };
  // The last few (table, capacity) pairs asked for are kept at hand: templates of two groups
  // ask for two in turn, template after template.
  FitTable& fit_table(const UnitTable& tab, double capacity) {
    for (const FitSlot& f : fit_recent_) {
      if (f.table == &tab && f.capacity == capacity) return *f.fit;
    }
    FitTable* fit = &facts_->fits[std::make_pair(&tab, capacity)];
    std::copy_backward(fit_recent_.begin(), fit_recent_.end() - 1, fit_recent_.end());
    fit_recent_.front() = FitSlot{&tab, capacity, fit};
    return *fit;
  }
  const RangeFit& range_fit(const UnitTable& tab, double capacity, std::int64_t q) {
    return range_fit(fit_table(tab, capacity), tab, capacity, q);
  }
  const RangeFit& range_fit(FitTable& f, const UnitTable& tab, double capacity, std::int64_t q) {
    const auto qi = static_cast<std::size_t>(q);
    if (qi < f.per_q.size() && f.per_q[qi]) return *f.per_q[qi];
    return fill_range_fit(f, tab, capacity, q);
  }
  const RangeFit& fill_range_fit(FitTable& f, const UnitTable& tab, double capacity,
                                 std::int64_t q);

 public:
  struct TableFacts {
    std::map<std::pair<const UnitTable*, double>, FitTable> fits;  // nodes are stable
  };

 private:
  double memory_work(const UnitTable& tab, double capacity, std::int64_t q) {
    return range_fit(tab, capacity, q).max_work;
  }

  // Per table: the sum of its k cheapest units (nothing recomputed), k = 0..U.
  const std::vector<double>& cheapest_sums(const UnitTable& tab) {
    auto [it, inserted] = cheapest_.try_emplace(&tab);
    if (!inserted) return it->second;
    std::vector<double> c = tab.compute_ms;
    std::sort(c.begin(), c.end());
    it->second.push_back(0.0);
    for (double v : c) it->second.push_back(it->second.back() + v);
    return it->second;
  }

  // A bound on the bottleneck from whole units: a split within tau gives stage s at least one
  // and at most min(K_s(tau), N_s) units (K_s(tau): the most units whose cheapest times on its
  // table sum to at most tau; N_s: the most units any fitting range of it holds, range_fit), a
  // group of g stages of one table at most the m cheapest units with sum <= g x tau, and the
  // stages hold all U units. Returns the largest tau found (galloping and bisecting up from
  // `known`, itself a bound) at which those counts still fall short of U, so the bottleneck
  // exceeds it; +infinity when even sum_s N_s < U.
  double count_bound(const PipelineTemplate& t, std::int64_t mbs, double known);
  // count_bound's per-group state, kept between calls so that its vectors are reused (bounds
  // are worked out for tens of thousands of templates).
  struct CountGroup {
    const std::vector<double>* sums = nullptr;
    std::vector<std::size_t> most;    // N_s of its stages, ascending
    std::vector<std::size_t> prefix;  // prefix sums of `most`
  };
  std::vector<CountGroup> count_groups_;

  // Bounds from stage speeds and memory. Stage s (a_s = time_per_work, M_s = memory_work at
  // its in-flight count) spends at least a_s x its work and holds at most M_s work; the stages
  // hold all the work W. So (1) the bottleneck is at least the smallest tau with
  // sum_s min(tau / a_s, M_s) >= W (a split within tau gives stage s at most that much), and
  // (2) the sum of stage times is at least the fractional knapsack filling the fastest stages
  // first up to M_s. Both +infinity when sum_s M_s < W (no split fits).
  struct SpeedBound {
    double max_ms = 0, sum_ms = 0;
  };
  // With `any_order` every stage is granted the room of the last one (one micro-batch in
  // flight, the most work any position holds), so the bounds hold for every order of t's groups.
  SpeedBound speed_bound(const PipelineTemplate& t, std::int64_t mbs, bool any_order = false);
  struct StageCap {
    double a, m;  // time per work, most work held
  };
  struct CapRun {
    std::size_t begin, end;  // a group's stages in caps_
  };
  std::vector<StageCap> caps_;     // speed_bound's, reused between calls
  std::vector<CapRun> cap_runs_;   // likewise

  // A necessary condition for any split to fit: stage after stage, each takes the longest range
  // that fits from where the previous one ended (least-memory recompute set, its in-flight
  // count; possibly none). Fitting is inherited by sub-ranges, so an ending boundary of any
  // fitting split is never past the greedy one: if the greedy cannot reach the last unit, no
  // split fits.
  // The memory floor of bounds_entry (tables covering t at mbs): the stages, in order, reach
  // the last unit (stages_can_reach), every stage holds a unit, and together they can hold
  // every unit (count_bound's sum_s N_s) and the model's work (speed_bound's sum_s M_s; a
  // hair below it counts as holding it, so the speed bound, summed in another order, has the
  // last word there). False proves no split fits.
  // `tabs`: the table of each of t's groups at the size (group_tables).
  bool memory_floor_holds(const PipelineTemplate& t, const std::vector<const UnitTable*>& tabs);
  const FitSums& fit_sums(FitTable& f, const UnitTable& tab, double capacity, std::int64_t q);
  bool stages_can_reach(const PipelineTemplate& t, const std::vector<const UnitTable*>& tabs);

  SizeResult compute(int tpl, std::size_t mi, std::optional<double> bottleneck) {
    SizeResult out;
    out.done = true;
    const PipelineTemplate& t = set_.at(tpl);
    const std::int64_t S = t.num_stages(), mbs = ctx_.opt.micro_batch_sizes[mi];
    // With SES the memory floor answers without a split (the exhaustive search splits anyway).
    if (ctx_.opt.ses && !bound_at(tpl, mi)) {
      ++ctx_.stats.rejected_options["memory_floor"];
      return out;
    }
    const std::vector<StageSlot> slots = slots_of(t, mbs);
    if (slots.empty()) {
      ++ctx_.stats.rejected_options["no_profile"];
      return out;
    }
    if (ctx_.opt.dpo && bottleneck) {
      // The first phase ran in refine() and was counted there.
      out.split = split_units_dp(slots, ctx_.num_units(), scratch_, *bottleneck);
      ETH_CHECK(out.split.feasible, "unit split: the second phase lost the first's split");
    } else if (ctx_.opt.dpo) {
      out.split = split_units_dp(slots, ctx_.num_units(), scratch_);
    } else if (num_unit_splits(ctx_.num_units(), S) > ctx_.opt.max_enumerated_splits) {
      ++ctx_.stats.rejected_options["enumeration_limit"];
      return out;
    } else {
      out.split = split_units_enumerate(slots, ctx_.num_units());
    }
    if (!bottleneck) ++ctx_.stats.unit_splits;
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
    const double sum = out.split.sum_ms + comm;
    out.option = MicroBatchOption{
        mbs, sum, std::max(out.split.max_ms, round_trip_slot_ms(sum, static_cast<double>(S)))};
    return out;
  }

  Context& ctx_;
  const TemplateSet& set_;
  CostTables& tables_;
  SplitScratch scratch_;
  std::vector<std::pair<bool, const UnitTable*>> table_cache_;  // see table()
  std::vector<StageSlot> slots_;                                // see slots_of()
  std::vector<const UnitTable*> tabs_;                          // see size_bound()
  std::vector<std::optional<Bounds>> bounds_;
  std::vector<double> work_;
  double work_total_ = 0;
  std::map<const UnitTable*, double> time_per_work_;
  std::map<const UnitTable*, std::vector<double>> least_bytes_;
  std::map<const UnitTable*, std::vector<double>> cheapest_;
  TableFacts own_facts_;
  TableFacts* facts_ = &own_facts_;  // own_facts_, or those shared (share_facts)
  struct FitSlot {
    const UnitTable* table = nullptr;
    double capacity = 0;
    FitTable* fit = nullptr;
  };
  std::array<FitSlot, 4> fit_recent_{};  // see fit_table()
  std::map<std::vector<const UnitTable*>, UnitAggregate> unit_aggregates_;
  std::vector<const UnitTable*> aggregate_key_;  // see unit_aggregate()
  std::vector<std::size_t> peaks_;               // see fill_range_fit()
  std::vector<LinkRun> links_;                   // bounds_entry's template's, for cheap_terms and order_free_entry
  std::map<std::vector<StageGroup>, std::vector<MicroBatchOption>> order_free_;
  std::vector<std::vector<SizeResult>> exact_;  // [template][size], filled with CPC
  SizeResult uncached_;                         // the last result without CPC
  // [template]: tight_options, recomputed into the same vector once stale (tightened).
  struct TightSlot {
    bool fresh = false;
    std::vector<MicroBatchOption> options;
  };
  std::vector<TightSlot> tight_;
  std::vector<int> log_;  // tightened_log
  std::vector<char> probed_;  // [template]: probe_fit ran
  bool order_free_bounds_ = false;  // use_order_free_bounds
};

}  // namespace eth::search
