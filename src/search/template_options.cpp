// TemplateEvaluator's per-template lower-bound options (search/template_evaluator.h): the
// memory floor and the cheap terms first, the costlier terms (template_bounds.cpp) on demand,
// and the bounds shared by every order of a layer shape.
#include "search/template_evaluator.h"

#include <algorithm>
#include <vector>

namespace eth::search {

bool TemplateEvaluator::group_tables(const PipelineTemplate& t, std::int64_t mbs,
                                     std::vector<const UnitTable*>& tabs, double& capacity) {
  tabs.clear();
  capacity = 0;
  for (const StageGroup& g : t.groups) {
    const UnitTable* tab = table(g.type, g.tp, mbs);
    if (tab == nullptr) return false;
    tabs.push_back(tab);
    const TypeInfo& type = ctx_.types[static_cast<std::size_t>(g.type)];
    capacity += static_cast<double>(g.count) * type.capacity_bytes;
  }
  return true;
}

const std::vector<MicroBatchOption>& TemplateEvaluator::order_free_options(PipelineTemplate t) {
  std::sort(t.groups.begin(), t.groups.end());
  auto [it, inserted] = order_free_.try_emplace(t.groups);
  if (!inserted) return it->second;
  const auto S = static_cast<double>(t.num_stages());
  std::vector<const UnitTable*> tabs;
  for (std::size_t mi = 0; mi < num_sizes(); ++mi) {
    const std::int64_t mbs = ctx_.opt.micro_batch_sizes[mi];
    double capacity = 0;
    if (!group_tables(t, mbs, tabs, capacity)) continue;
    const UnitAggregate& agg = unit_aggregate(tabs);
    if (agg.floor_bytes > capacity) continue;
    const auto most =
        static_cast<std::size_t>((ctx_.num_units() + t.num_stages() - 1) / t.num_stages());
    const SpeedBound speed = speed_bound(t, mbs, true);
    if (speed.max_ms == kInf) continue;  // no order's stages can hold the model's work
    const double sum = std::max(agg.sum, speed.sum_ms);
    const double max = std::max({sum / S, agg.unit_max, agg.cheapest[most], speed.max_ms});
    const double shave = 1.0 - 1e-12;  // as bounds_entry's, applied to smaller terms
    it->second.push_back(MicroBatchOption{mbs, sum * shave, max * shave});
  }
  return it->second;
}

TemplateEvaluator::Bounds& TemplateEvaluator::bounds_entry(int tpl) {
  grow();
  auto& slot = bounds_[static_cast<std::size_t>(tpl)];
  if (slot) return *slot;
  slot.emplace();
  slot->per_size.resize(num_sizes());
  const PipelineTemplate& t = set_.at(tpl);
  template_links(ctx_, t, links_);  // both branches price t's transfers at several sizes
  if (order_free_bounds_) {
    order_free_entry(t, *slot);
    return *slot;
  }
  slot->deep = !ctx_.opt.bound_generation;
  if (!slot->deep) slot->cheap.resize(num_sizes());
  for (std::size_t mi = 0; mi < num_sizes(); ++mi) {
    const std::optional<CheapTerms> c = cheap_terms(t, mi);
    if (!c) continue;
    if (slot->deep) {
      slot->per_size[mi] = deep_option(t, mi, *c);
    } else {
      slot->per_size[mi] = cheap_option(t, mi, *c);
      slot->cheap[mi] = *c;
    }
    if (slot->per_size[mi]) slot->present.push_back(*slot->per_size[mi]);
  }
  return *slot;
}

bool TemplateEvaluator::deepen(int tpl) {
  Bounds& b = bounds_entry(tpl);
  if (b.deep) return false;
  b.deep = true;
  b.present.clear();
  const PipelineTemplate& t = set_.at(tpl);
  for (std::size_t mi = 0; mi < num_sizes(); ++mi) {
    if (!b.per_size[mi]) continue;
    b.per_size[mi] = deep_option(t, mi, b.cheap[mi]);
    if (b.per_size[mi]) b.present.push_back(*b.per_size[mi]);
  }
  b.cheap = {};
  tightened(tpl);
  return true;
}

std::optional<TemplateEvaluator::CheapTerms> TemplateEvaluator::cheap_terms(
    const PipelineTemplate& t, std::size_t mi) {
  const std::int64_t mbs = ctx_.opt.micro_batch_sizes[mi];
  double capacity = 0;
  if (!group_tables(t, mbs, tabs_, capacity)) return std::nullopt;
  const UnitAggregate& agg = unit_aggregate(tabs_);
  // The memory floor: the template's memory cannot hold every unit at least once, or its
  // stages cannot hold the units (in order, or at all).
  if (agg.floor_bytes > capacity || !memory_floor_holds(t, tabs_)) return std::nullopt;
  // Some stage holds at least ceil(U / S) units: the bottleneck is at least the sum of that
  // many of the cheapest units.
  const auto most =
      static_cast<std::size_t>((ctx_.num_units() + t.num_stages() - 1) / t.num_stages());
  return CheapTerms{agg.sum, agg.unit_max, agg.cheapest[most],
                    links_comm_ms(links_, tabs_.front()->boundary_bytes)};
}

// Shaved by 1e-12 so rounding never lifts a bound above the exact value it bounds.
constexpr double kShave = 1.0 - 1e-12;

MicroBatchOption TemplateEvaluator::cheap_option(const PipelineTemplate& t, std::size_t mi,
                                                 const CheapTerms& c) {
  const auto S = static_cast<double>(t.num_stages());
  const double sum = c.sum + c.comm;
  return MicroBatchOption{ctx_.opt.micro_batch_sizes[mi], sum * kShave,
                          std::max({round_trip_slot_ms(sum, S), c.unit_max, c.crowded}) * kShave};
}

std::optional<MicroBatchOption> TemplateEvaluator::deep_option(const PipelineTemplate& t,
                                                               std::size_t mi,
                                                               const CheapTerms& c) {
  const std::int64_t mbs = ctx_.opt.micro_batch_sizes[mi];
  const auto S = static_cast<double>(t.num_stages());
  const SpeedBound speed = speed_bound(t, mbs);
  if (speed.max_ms == kInf) return std::nullopt;  // the stages cannot hold the model's work
  const double known = std::max({round_trip_slot_ms(std::max(c.sum, speed.sum_ms) + c.comm, S),
                                 c.unit_max, c.crowded, speed.max_ms});
  const double count = count_bound(t, mbs, known);
  if (count == kInf) return std::nullopt;  // the stages together cannot hold every unit
  return MicroBatchOption{mbs, (std::max(c.sum, speed.sum_ms) + c.comm) * kShave,
                          std::max(known, count) * kShave};
}

const TemplateEvaluator::RangeFit& TemplateEvaluator::fill_range_fit(FitTable& f,
                                                                     const UnitTable& tab,
                                                                     double capacity,
                                                                     std::int64_t q) {
  const auto qi = static_cast<std::size_t>(q);
  if (f.per_q.size() <= qi) f.per_q.resize(qi + 1);
  RangeFit& out = f.per_q[qi].emplace();
  const auto& w = unit_work();
  const std::size_t U = w.size();
  // Whether units [i, j) fit, j > i, given the largest workspace among them.
  auto fits = [&](std::size_t i, std::size_t j, double ws) {
    double held = kInf;
    for (const auto& h : tab.held_prefix) held = std::min(held, h[j] - h[i]);
    return tab.static_prefix[j] - tab.static_prefix[i] + ws + static_cast<double>(q) * held <=
           capacity;
  };
  // The window's largest workspace, kept by a queue of its units whose workspace no later one
  // reaches (front: the largest), so each start costs what its window moves, not its length.
  std::vector<std::size_t>& peaks = peaks_;
  peaks.clear();
  std::size_t head = 0;
  double cur = 0;
  std::size_t j = 0;
  out.reach.resize(U);
  for (std::size_t i = 0; i < U; ++i) {
    if (j < i) {
      j = i;
      cur = 0;
    }
    while (head < peaks.size() && peaks[head] < i) ++head;
    while (j < U) {
      const double front =
          head < peaks.size() ? std::max(0.0, tab.workspace[peaks[head]]) : 0.0;
      if (!fits(i, j + 1, std::max(front, tab.workspace[j]))) break;
      while (peaks.size() > head && tab.workspace[peaks.back()] <= tab.workspace[j]) {
        peaks.pop_back();
      }
      peaks.push_back(j);
      cur += w[j++];
    }
    out.reach[i] = j;
    out.max_work = std::max(out.max_work, cur);
    out.max_units = std::max(out.max_units, j - i);
    if (j > i) cur -= w[i];
  }
  return out;
}

const TemplateEvaluator::FitSums& TemplateEvaluator::fit_sums(FitTable& f, const UnitTable& tab,
                                                              double capacity, std::int64_t q) {
  FitSums& sums = f.sums;
  while (static_cast<std::int64_t>(sums.units.size()) <= q) {
    const RangeFit& fit =
        range_fit(f, tab, capacity, static_cast<std::int64_t>(sums.units.size()));
    sums.units.push_back(sums.units.back() + fit.max_units);
    sums.work.push_back(sums.work.back() + fit.max_work);
  }
  return sums;
}

bool TemplateEvaluator::memory_floor_holds(const PipelineTemplate& t,
                                           const std::vector<const UnitTable*>& tabs) {
  const std::int64_t S = t.num_stages();
  const auto U = static_cast<std::size_t>(ctx_.num_units());
  const double total = unit_work_total();
  std::size_t units = 0;
  double work = 0;
  std::int64_t s = 0;
  for (std::size_t gi = 0; gi < t.groups.size(); ++gi) {
    const StageGroup& g = t.groups[gi];
    const double capacity = ctx_.types[static_cast<std::size_t>(g.type)].capacity_bytes;
    const UnitTable& tab = *tabs[gi];
    // The group's stages hold q = S - s down to S - s - count + 1 micro-batches; a stage holds
    // no fewer units with fewer in flight, so the first holds the fewest.
    const std::int64_t hi = S - s, lo = S - s - g.count + 1;
    const FitSums& f = fit_sums(fit_table(tab, capacity), tab, capacity, hi);
    const auto h = static_cast<std::size_t>(hi), l = static_cast<std::size_t>(lo);
    if (f.units[h] == f.units[h - 1]) return false;  // a stage that holds no unit at all
    units += f.units[h] - f.units[l - 1];
    work += f.work[h] - f.work[l - 1];
    s += g.count;
  }
  // The work summed by prefix differences: 1e-9 below the total still counts as holding it.
  if (units < U || work < total * (1.0 - 1e-9)) return false;
  return stages_can_reach(t, tabs);
}

bool TemplateEvaluator::stages_can_reach(const PipelineTemplate& t,
                                         const std::vector<const UnitTable*>& tabs) {
  const std::int64_t S = t.num_stages();
  const auto U = static_cast<std::size_t>(ctx_.num_units());
  std::size_t reach = 0;
  std::int64_t s = 0;
  for (std::size_t gi = 0; gi < t.groups.size(); ++gi) {
    const StageGroup& g = t.groups[gi];
    const double capacity = ctx_.types[static_cast<std::size_t>(g.type)].capacity_bytes;
    const UnitTable& tab = *tabs[gi];
    FitTable& f = fit_table(tab, capacity);
    for (std::int64_t k = 0; k < g.count; ++k, ++s) {
      reach = range_fit(f, tab, capacity, S - s).reach[reach];
      if (reach >= U) return true;
    }
  }
  return false;
}

void TemplateEvaluator::order_free_entry(const PipelineTemplate& t, Bounds& out) {
  const auto& shared = order_free_options(t);
  const auto S = static_cast<double>(t.num_stages());
  const double shave = 1.0 - 1e-12;
  for (const MicroBatchOption& o : shared) {
    const auto mi = static_cast<std::size_t>(
        std::find(ctx_.opt.micro_batch_sizes.begin(), ctx_.opt.micro_batch_sizes.end(), o.mbs) -
        ctx_.opt.micro_batch_sizes.begin());
    double capacity = 0;
    if (!group_tables(t, o.mbs, tabs_, capacity) || !stages_can_reach(t, tabs_)) continue;
    const double sum = o.sum_ms + links_comm_ms(links_, tabs_.front()->boundary_bytes) * shave;
    out.per_size[mi] =
        MicroBatchOption{o.mbs, sum, std::max(o.max_ms, round_trip_slot_ms(sum, S) * shave)};
    out.present.push_back(*out.per_size[mi]);
  }
}

}  // namespace eth::search
