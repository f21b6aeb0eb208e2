// The planner's cost tables: per (device type, tp, micro-batch size), prefix sums over the
// model's units of forward time, backward time and held activation bytes for each candidate
// recompute set, and of static bytes (per parameter: the entry's precision), so any unit range
// costs O(1) to price.
// Built once per key from a ProfileDb and then searched over; the memory arithmetic is the one
// of cost/stage_costs.h (weights + gradients + optimizer state, workspace and recompute copies,
// in-flight activations, message and collective buffers, the process baseline), each charged
// at least as the predictor charges it, so a range that fits here fits under the predictor. Not
// a predictor: the planner's final plan is priced by cost/predictor.h.
// Under optimizer sharding (issue 28) a table is built for a least holder count D: every
// gradient element of a planner plan is held by one device per pipeline, so a search that
// only builds plans of D or more pipelines charges each stage its even share of the state
// (state / D, cost/sharding_memory.h) and the reduce-scatter's receive buffer.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/precision.h"
#include "cost/stage_costs.h"
#include "model/arithmetic.h"
#include "model/recompute.h"
#include "profile/profile.h"

namespace eth::search {

// The recompute sets a stage may choose from, in this order (docs/planner.md): none, mlp_act,
// attn_dropout, attn_dropout+attn_score, +attn_softmax, +qkv, the five operator classes, unit.
inline constexpr int kNumRecomputeCandidates = 8;
const std::array<RecomputeSet, kNumRecomputeCandidates>& recompute_candidates();
inline constexpr int kFullRecompute = kNumRecomputeCandidates - 1;  // {unit}

// One (device type, tp, micro-batch size): every vector indexed by unit (per-unit) or by unit
// boundary 0..U (prefix sums: the value of units [i, j) is prefix[j] - prefix[i]).
struct UnitTable {
  std::string device_type;
  std::int64_t tp = 1;
  std::int64_t mbs = 1;
  std::vector<double> forward_prefix;                                        // ms
  std::array<std::vector<double>, kNumRecomputeCandidates> backward_prefix;  // ms, recompute incl.
  std::array<std::vector<double>, kNumRecomputeCandidates> held_prefix;  // bytes per micro-batch
  // bytes: weights + gradients + optimizer state per parameter in the entry's precision
  // (core/precision.h) x parameters per tp rank (unit_params)
  std::vector<double> static_prefix;
  // Per unit: cost/stage_costs.h's unit_workspace_bound_bytes plus the process baseline, so the
  // maximum over a range is the stage's transient workspace (slightly above it for one-unit
  // ranges) and the baseline, both independent of the recompute set.
  std::vector<double> workspace;
  // Per candidate set and unit kind (embedding, block, head): the copy the runtime keeps of
  // what the set drops (cost/stage_costs.h, recompute_copy_bytes), charged once per kind a range
  // holds (range_copy_bytes).
  std::array<std::array<double, 3>, kNumRecomputeCandidates> copy_bytes{};
  std::vector<double> compute_ms;     // per unit: forward + backward, nothing recomputed
  // Bytes of the activation a stage sends to the next one (the hidden state of one micro-batch).
  double boundary_bytes = 0;
  // Gradient bytes per unit boundary (prefix sums, gradient_element bytes per parameter) and
  // the collective window (per holder group): a stage is charged the temporaries of its range's
  // gradient as if it aggregated it (the predictor charges only the devices that do), in as many
  // groups as it may join (range_comm_bytes).
  std::vector<double> gradient_prefix;
  double collective_window_bytes = 0;
  // Optimizer sharding: the least number of holders of every element (0: not sharded). Then
  // static_prefix charges the optimizer state as even_share_bound of D holders, and
  // range_comm_bytes the larger of the all-reduce temporaries (tensor- and device-wise runs
  // keep them) and the reduce-scatter's buffer.
  std::int64_t shard_holders = 0;
  Precision precision = Precision::Mixed16;
  // The candidates worth trying, in the order tried (order_recompute_candidates). Empty: all,
  // in index order, keeping the fastest that fits.
  std::vector<int> rc_order;
  // True when every unit's backward time is non-decreasing along rc_order, so the first set
  // that fits is the fastest and the scan stops there.
  bool rc_first_fit = false;

  std::int64_t num_units() const { return static_cast<std::int64_t>(workspace.size()); }
};

// Lazily built tables, one per key, kept for the life of the object (the planner's "build once,
// search many times"). Not thread-safe.
class CostTables {
 public:
  // operator_recompute false: stages may only choose no recompute or full recompute of every
  // unit (the layer baseline: Metis and HexiScale have no operator-level recompute).
  // `collective_window_bytes`: PredictOptions::collective_window_bytes of the plans' runs.
  // `shard_holders`: UnitTable::shard_holders of every table (0: not sharded).
  CostTables(const ProfileDb& profile, std::int64_t seq_len, bool operator_recompute = true,
             double collective_window_bytes = kDefaultCollectiveWindowBytes,
             std::int64_t shard_holders = 0);

  // True when the profile can answer (device type, tp, mbs) soundly: an entry of that type and
  // tp with a micro-batch size <= mbs exists (ProfileDb::lookup interpolates or extrapolates).
  bool covers(const std::string& device_type, std::int64_t tp, std::int64_t mbs) const;
  // The table for a covered key (ETH_CHECKs coverage).
  const UnitTable& get(const std::string& device_type, std::int64_t tp, std::int64_t mbs);
  std::int64_t num_units() const { return num_units_; }
  std::int64_t tables_built() const { return static_cast<std::int64_t>(tables_.size()); }

 private:
  const ProfileDb* profile_;
  std::int64_t seq_len_;
  std::int64_t num_units_;
  bool operator_recompute_;
  double collective_window_bytes_;
  std::int64_t shard_holders_;
  std::map<ProfileKey, std::unique_ptr<UnitTable>> tables_;
  std::map<std::int64_t, std::vector<double>> params_;  // per tp: unit_params per unit
};

// `params_of`: unit_params(model, u, entry's tp) per unit when the caller has them (CostTables
// keeps them per tp: every device type and micro-batch size shares them), else worked out here.
UnitTable build_unit_table(const ProfileEntry& entry, const ModelSpec& model, std::int64_t seq_len,
                           double collective_window_bytes = kDefaultCollectiveWindowBytes,
                           std::int64_t shard_holders = 0,
                           const std::vector<double>* params_of = nullptr);
// Fills rc_order and rc_first_fit from the prefix tables: candidates sorted by total backward
// time (index on ties); when that order holds unit by unit, a candidate that needs at least the
// memory of an earlier one on every range (it holds at least its bytes on every unit, by at least
// what its smaller recompute copy of the unit's kind saves) can never be chosen and is dropped.
void order_recompute_candidates(UnitTable& t);
// Keeps only "nothing" and "unit" (full recompute) in rc_order.
void restrict_to_full_recompute(UnitTable& t);

// The cost of units [first, last) on one stage holding `in_flight` micro-batches, with the
// cheapest candidate recompute set (by backward time) that fits `capacity_bytes`.
struct RangeCost {
  bool fits = false;
  double time_ms = 0;       // forward + backward (recompute included)
  int recompute = 0;        // index into recompute_candidates()
  double memory_bytes = 0;  // static + workspace + copies + comm + in_flight x held, for that set
};
RangeCost range_cost(const UnitTable& t, double capacity_bytes, std::int64_t in_flight,
                     std::int64_t first, std::int64_t last);
// The same with the range's workspace (max of t.workspace over the range) already known: the
// planner's inner loops extend a range one unit at a time and keep that maximum running.
RangeCost range_cost_ws(const UnitTable& t, double capacity_bytes, double in_flight,
                        std::size_t first, std::size_t last, double workspace_bytes);
// The same for a caller that grows one range (same stage, a longer range each call): a set
// that does not fit a range fits no longer one, so with rc_first_fit the scan of rc_order
// resumes at *position (0 for the first call), which it advances to the set chosen. Inline
// (below): the unit split's inner loops call it millions of times.
inline RangeCost range_cost_ws(const UnitTable& t, double capacity_bytes, double in_flight,
                               std::size_t first, std::size_t last, double workspace_bytes,
                               std::size_t* position);
// The recompute copies of units [first, last) under candidate `rc`: copy_bytes of each unit
// kind the range holds.
inline double range_copy_bytes(const UnitTable& t, std::size_t rc, std::size_t first,
                               std::size_t last);
// The communication buffers of a stage of units [first, last) holding `in_flight` micro-batches,
// at least what the predictor charges any such stage: activation messages as for a middle
// stage (cost/stage_costs.h, message_buffer_bytes) and the range's collective temporaries.
inline double range_comm_bytes(const UnitTable& t, double in_flight, std::size_t first,
                               std::size_t last);
// Peak bytes of a stage of units [first, last) with recompute candidate `rc`.
double range_memory(const UnitTable& t, std::int64_t in_flight, std::int64_t first,
                    std::int64_t last, int rc);

// Definitions of the inline functions above.

inline double range_copy_bytes(const UnitTable& t, std::size_t rc, std::size_t first,
                               std::size_t last) {
  const std::size_t n = t.workspace.size();
  const auto& c = t.copy_bytes[rc];
  double bytes = 0;
  if (first == 0) bytes += c[static_cast<std::size_t>(UnitKind::Embedding)];
  if (std::max<std::size_t>(first, 1) < std::min(last, n - 1)) {
    bytes += c[static_cast<std::size_t>(UnitKind::Block)];
  }
  if (last == n) bytes += c[static_cast<std::size_t>(UnitKind::Head)];
  return bytes;
}

// range_comm_bytes under optimizer sharding (cost_tables.cpp): `temporaries` are the
// all-reduce's, `fed` the range's gradient bytes.
double sharded_comm_bytes(const UnitTable& t, double messages, double temporaries, double fed);

inline double range_comm_bytes(const UnitTable& t, double in_flight, std::size_t first,
                               std::size_t last) {
  // Receive buffers from both neighbours, two gradient sends (1F1B's, gradient_sends_in_flight),
  // a forward send per micro-batch in flight (message_buffer_bytes of a middle stage, the most
  // of any position).
  const double messages = (4.0 + in_flight) * t.boundary_bytes;
  // A table filled by hand (tests) may leave the gradient prefix empty: no gradients.
  const double fed =
      t.gradient_prefix.empty() ? 0.0 : t.gradient_prefix[last] - t.gradient_prefix[first];
  // The predictor charges each holder group its window; at tp 1 a device joins at most one
  // group per unit (block- and tensor-wise: groups are unions of unit ranges), at tp > 1 a
  // unit's tp chunks may go to several, so only the range's bytes bound it.
  const double window = t.tp == 1 && last > first
                            ? static_cast<double>(last - first) * t.collective_window_bytes
                            : std::numeric_limits<double>::infinity();
  // The paper's 16-bit training reduces in place (collective_buffer_bytes is 0): no call.
  const double temporaries =
      runtime_precision(t.precision) ? collective_buffer_bytes(t.precision, window, fed) : 0.0;
  if (t.shard_holders == 0) return messages + temporaries;
  return sharded_comm_bytes(t, messages, temporaries, fed);
}

[[gnu::always_inline]] inline RangeCost range_cost_ws(const UnitTable& t, double capacity_bytes,
                                                      double q, std::size_t i, std::size_t j,
                                                      double ws, std::size_t* position) {
  if (!t.rc_first_fit || t.rc_order.empty()) return range_cost_ws(t, capacity_bytes, q, i, j, ws);
  const double fixed = t.static_prefix[j] - t.static_prefix[i] + ws + range_comm_bytes(t, q, i, j);
  for (std::size_t k = *position; k < t.rc_order.size(); ++k) {
    const auto ri = static_cast<std::size_t>(t.rc_order[k]);
    const double mem = fixed + range_copy_bytes(t, ri, i, j) +
                       q * (t.held_prefix[ri][j] - t.held_prefix[ri][i]);
    if (mem > capacity_bytes) continue;
    *position = k;
    // Summed as the other overload does, so both give the same bits.
    const double fwd = t.forward_prefix[j] - t.forward_prefix[i];
    const double time = fwd + (t.backward_prefix[ri][j] - t.backward_prefix[ri][i]);
    return RangeCost{true, time, t.rc_order[k], mem};
  }
  *position = t.rc_order.size();
  return RangeCost{};
}

}  // namespace eth::search
