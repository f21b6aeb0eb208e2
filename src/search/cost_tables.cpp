// Building the planner's per-unit prefix tables from profile entries, and pricing a unit range
// on one stage with its cheapest fitting recompute set.
#include "search/cost_tables.h"

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "cost/sharding_memory.h"
#include "cost/stage_costs.h"
#include "model/arithmetic.h"

namespace eth::search {

const std::array<RecomputeSet, kNumRecomputeCandidates>& recompute_candidates() {
  static const std::array<RecomputeSet, kNumRecomputeCandidates> sets = [] {
    using Op = RecomputeOp;
    auto make = [](std::initializer_list<Op> ops) {
      RecomputeSet s;
      for (Op op : ops) s.add(op);
      return s;
    };
    return std::array<RecomputeSet, kNumRecomputeCandidates>{
        make({}),
        make({Op::MlpAct}),
        make({Op::AttnDropout}),
        make({Op::AttnDropout, Op::AttnScore}),
        make({Op::AttnDropout, Op::AttnScore, Op::AttnSoftmax}),
        make({Op::AttnDropout, Op::AttnScore, Op::AttnSoftmax, Op::Qkv}),
        RecomputeSet::all_ops(),
        make({Op::Unit}),
    };
  }();
  return sets;
}

namespace {

// A device holds a unit's elements in at most this many gradient blocks: its tp-sharded and
// tp-replicated pieces, and the tied embedding's block (plan/blocks.h).
constexpr double kBlocksPerUnit = 3;

}  // namespace

UnitTable build_unit_table(const ProfileEntry& entry, const ModelSpec& model,
                           std::int64_t seq_len, double collective_window_bytes,
                           std::int64_t shard_holders, const std::vector<double>* params_of) {
  const std::size_t n = entry.units.size();
  UnitTable t;
  t.device_type = entry.key.device_type;
  t.tp = entry.key.tp;
  t.mbs = entry.key.mbs;
  t.forward_prefix.assign(n + 1, 0.0);
  t.static_prefix.assign(n + 1, 0.0);
  t.gradient_prefix.assign(n + 1, 0.0);
  t.collective_window_bytes = collective_window_bytes;
  t.shard_holders = shard_holders;
  t.precision = entry.precision;
  for (auto& v : t.backward_prefix) v.assign(n + 1, 0.0);
  for (auto& v : t.held_prefix) v.assign(n + 1, 0.0);
  t.workspace.resize(n);
  t.compute_ms.resize(n);
  const auto& sets = recompute_candidates();
  const PrecisionBytes bytes = precision_bytes(entry.precision);
  const bool dropout = profile_has_dropout(entry);
  for (std::size_t u = 0; u < n; ++u) {
    const UnitProfile& p = entry.units[u];
    t.forward_prefix[u + 1] = t.forward_prefix[u] + p.forward_ms;
    // Parameters as cost/stage_costs.cpp counts them: the model's table at this tp.
    const double params =
        params_of != nullptr && params_of->size() == n
            ? (*params_of)[u]
            : static_cast<double>(unit_params(model, static_cast<std::int64_t>(u), entry.key.tp));
    // Sharded, the optimizer state is the even share of the least holder count.
    const double unit_static =
        shard_holders > 0
            ? (bytes.weights + bytes.gradients) * params +
                  shard_state_bytes(entry.precision,
                                    even_share_bound(params, shard_holders, kBlocksPerUnit))
            : bytes.per_parameter() * params;
    t.static_prefix[u + 1] = t.static_prefix[u] + unit_static;
    t.gradient_prefix[u + 1] = t.gradient_prefix[u] + bytes.gradient_element * params;
    for (int r = 0; r < kNumRecomputeCandidates; ++r) {
      const auto ri = static_cast<std::size_t>(r);
      t.backward_prefix[ri][u + 1] =
          t.backward_prefix[ri][u] + p.backward_with_recompute_ms(sets[ri]);
      t.held_prefix[ri][u + 1] = t.held_prefix[ri][u] + p.activation.held(sets[ri]);
    }
    const auto unit = static_cast<std::int64_t>(u);
    t.workspace[u] = unit_workspace_bound_bytes(model, unit, entry.key.mbs, seq_len, entry.key.tp,
                                                entry.precision, dropout) +
                     entry.process_baseline_bytes;
    const auto kind = static_cast<std::size_t>(unit_kind(model, unit));
    for (std::size_t r = 0; r < sets.size(); ++r) {
      double& copy = t.copy_bytes[r][kind];
      copy = std::max(copy, p.activation.total() - p.activation.held(sets[r]));
    }
    t.compute_ms[u] = p.forward_ms + p.backward_ms;
  }
  // The hidden state of one micro-batch: mbs x seq x hidden x the precision's element bytes.
  t.boundary_bytes = bytes.activation * static_cast<double>(entry.key.mbs) *
                     static_cast<double>(seq_len) *
                     static_cast<double>(model.hidden);
  order_recompute_candidates(t);
  return t;
}

void order_recompute_candidates(UnitTable& t) {
  const std::size_t n = t.workspace.size();
  auto unit = [](const std::vector<double>& prefix, std::size_t u) {
    return prefix[u + 1] - prefix[u];
  };
  std::vector<int> order(kNumRecomputeCandidates);
  for (int r = 0; r < kNumRecomputeCandidates; ++r) order[static_cast<std::size_t>(r)] = r;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return t.backward_prefix[static_cast<std::size_t>(a)][n] <
           t.backward_prefix[static_cast<std::size_t>(b)][n];
  });
  bool monotone = true;
  for (std::size_t k = 1; k < order.size() && monotone; ++k) {
    const auto& prev = t.backward_prefix[static_cast<std::size_t>(order[k - 1])];
    const auto& cur = t.backward_prefix[static_cast<std::size_t>(order[k])];
    for (std::size_t u = 0; u < n && monotone; ++u) monotone = unit(prev, u) <= unit(cur, u);
  }
  t.rc_first_fit = monotone;
  t.rc_order.clear();
  // Unit kinds as range_copy_bytes reads them: the first unit, the blocks, the last unit.
  auto kind = [n](std::size_t u) { return u == 0 ? 0 : (u + 1 == n ? 2 : 1); };
  for (int r : order) {
    bool dominated = false;
    const auto ri = static_cast<std::size_t>(r);
    for (int kept : t.rc_order) {
      if (!monotone) break;
      const auto ki = static_cast<std::size_t>(kept);
      // r holds at least kept's bytes on every unit, and on each unit at least as much more as
      // kept's copy of that unit's kind exceeds r's (a range holding the unit pays that copy
      // once): then r needs at least kept's memory on every range, at any in-flight count.
      bool holds_more = true;
      for (std::size_t u = 0; u < n && holds_more; ++u) {
        const double more = unit(t.held_prefix[ri], u) - unit(t.held_prefix[ki], u);
        const auto k = static_cast<std::size_t>(kind(u));
        holds_more = more >= 0 && more >= t.copy_bytes[ki][k] - t.copy_bytes[ri][k];
      }
      dominated = dominated || holds_more;
    }
    if (!dominated) t.rc_order.push_back(r);
  }
}

void restrict_to_full_recompute(UnitTable& t) {
  // A subsequence of rc_order keeps its unit-by-unit time order, so rc_first_fit still holds.
  std::erase_if(t.rc_order, [](int r) { return r != 0 && r != kFullRecompute; });
  if (t.rc_order.empty()) {
    t.rc_order = {0, kFullRecompute};
    t.rc_first_fit = false;
  }
}

CostTables::CostTables(const ProfileDb& profile, std::int64_t seq_len, bool operator_recompute,
                       double collective_window_bytes, std::int64_t shard_holders)
    : profile_(&profile),
      seq_len_(seq_len),
      num_units_(profile.model().num_units()),
      operator_recompute_(operator_recompute),
      collective_window_bytes_(collective_window_bytes),
      shard_holders_(shard_holders) {}

bool CostTables::covers(const std::string& device_type, std::int64_t tp, std::int64_t mbs) const {
  const auto& entries = profile_->entries();
  auto it = entries.lower_bound(ProfileKey{device_type, tp, 0});
  return it != entries.end() && it->first.device_type == device_type && it->first.tp == tp &&
         it->first.mbs <= mbs;
}

const UnitTable& CostTables::get(const std::string& device_type, std::int64_t tp,
                                 std::int64_t mbs) {
  const ProfileKey key{device_type, tp, mbs};
  auto it = tables_.find(key);
  if (it != tables_.end()) return *it->second;
  ETH_CHECK(covers(device_type, tp, mbs), "cost table requested for an uncovered profile key");
  const ProfileLookup lk = profile_->lookup(device_type, tp, mbs);
  const ModelSpec& model = profile_->model();
  auto [params, fresh] = params_.try_emplace(tp);
  if (fresh) {
    for (std::int64_t u = 0; u < num_units_; ++u) {
      params->second.push_back(static_cast<double>(unit_params(model, u, tp)));
    }
  }
  auto table = std::make_unique<UnitTable>(build_unit_table(
      lk.entry, model, seq_len_, collective_window_bytes_, shard_holders_, &params->second));
  if (!operator_recompute_) restrict_to_full_recompute(*table);
  const UnitTable& ref = *table;
  tables_.emplace(key, std::move(table));
  return ref;
}

double sharded_comm_bytes(const UnitTable& t, double messages, double temporaries, double fed) {
  // Block-wise the reduce-scatter's buffer holds the largest share of a block the stage is in,
  // at most the even share of the range's elements (one block, rounded up).
  const double elements = fed / precision_bytes(t.precision).gradient_element;
  return messages +
         std::max(temporaries,
                  shard_receive_buffer_bytes(even_share_bound(elements, t.shard_holders, 1)));
}

double range_memory(const UnitTable& t, std::int64_t in_flight, std::int64_t first,
                    std::int64_t last, int rc) {
  const auto i = static_cast<std::size_t>(first), j = static_cast<std::size_t>(last);
  const auto r = static_cast<std::size_t>(rc);
  double ws = 0;
  for (std::size_t u = i; u < j; ++u) ws = std::max(ws, t.workspace[u]);
  const auto q = static_cast<double>(in_flight);
  return t.static_prefix[j] - t.static_prefix[i] + ws + range_copy_bytes(t, r, i, j) +
         range_comm_bytes(t, q, i, j) + q * (t.held_prefix[r][j] - t.held_prefix[r][i]);
}

RangeCost range_cost(const UnitTable& t, double capacity_bytes, std::int64_t in_flight,
                     std::int64_t first, std::int64_t last) {
  const auto i = static_cast<std::size_t>(first), j = static_cast<std::size_t>(last);
  double ws = 0;
  for (std::size_t u = i; u < j; ++u) ws = std::max(ws, t.workspace[u]);
  return range_cost_ws(t, capacity_bytes, static_cast<double>(in_flight), i, j, ws);
}

RangeCost range_cost_ws(const UnitTable& t, double capacity_bytes, double q, std::size_t i,
                        std::size_t j, double ws) {
  const double fixed = t.static_prefix[j] - t.static_prefix[i] + ws + range_comm_bytes(t, q, i, j);
  const double fwd = t.forward_prefix[j] - t.forward_prefix[i];
  RangeCost best;
  auto consider = [&](int r) {
    const auto ri = static_cast<std::size_t>(r);
    const double mem = fixed + range_copy_bytes(t, ri, i, j) +
                       q * (t.held_prefix[ri][j] - t.held_prefix[ri][i]);
    if (mem > capacity_bytes) return false;
    const double time = fwd + (t.backward_prefix[ri][j] - t.backward_prefix[ri][i]);
    if (!best.fits || time < best.time_ms) best = RangeCost{true, time, r, mem};
    return true;
  };
  if (t.rc_order.empty()) {
    for (int r = 0; r < kNumRecomputeCandidates; ++r) consider(r);
  } else if (t.rc_first_fit) {
    for (int r : t.rc_order) {
      if (consider(r)) break;
    }
  } else {
    for (int r : t.rc_order) consider(r);
  }
  return best;
}

}  // namespace eth::search
