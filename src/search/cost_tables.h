// The planner's cost tables: per (device type, tp, micro-batch size), prefix sums over the
// model's units of forward time, backward time and held activation bytes for each candidate
// recompute set, and of static bytes (per parameter: the entry's precision), so any unit range
// costs O(1) to price.
// Built once per key from a ProfileDb and then searched over; the memory arithmetic is the one
// of cost/stage_costs.h (weights + gradients + optimizer state, workspace, in-flight
// activations). Not a predictor: the planner's final plan is priced by cost/predictor.h.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

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
  std::vector<double> workspace;      // per unit: its full (nothing recomputed) activation bytes
  std::vector<double> compute_ms;     // per unit: forward + backward, nothing recomputed
  // Bytes of the activation a stage sends to the next one (the hidden state of one micro-batch).
  double boundary_bytes = 0;
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
  CostTables(const ProfileDb& profile, std::int64_t seq_len, bool operator_recompute = true);

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
  std::map<ProfileKey, std::unique_ptr<UnitTable>> tables_;
};

UnitTable build_unit_table(const ProfileEntry& entry, const ModelSpec& model, std::int64_t seq_len);
// Fills rc_order and rc_first_fit from the prefix tables: candidates sorted by total backward
// time (index on ties); when that order holds unit by unit, a candidate that holds at least the
// bytes of an earlier one on every unit can never be chosen and is dropped.
void order_recompute_candidates(UnitTable& t);
// Keeps only "nothing" and "unit" (full recompute) in rc_order.
void restrict_to_full_recompute(UnitTable& t);

// The cost of units [first, last) on one stage holding `in_flight` micro-batches, with the
// cheapest candidate recompute set (by backward time) that fits `capacity_bytes`.
struct RangeCost {
  bool fits = false;
  double time_ms = 0;       // forward + backward (recompute included)
  int recompute = 0;        // index into recompute_candidates()
  double memory_bytes = 0;  // static + workspace + in_flight x held, for that set
};
RangeCost range_cost(const UnitTable& t, double capacity_bytes, std::int64_t in_flight,
                     std::int64_t first, std::int64_t last);
// The same with the range's workspace (max of t.workspace over the range) already known: the
// planner's inner loops extend a range one unit at a time and keep that maximum running.
RangeCost range_cost_ws(const UnitTable& t, double capacity_bytes, double in_flight,
                        std::size_t first, std::size_t last, double workspace_bytes);
// The same for a caller that grows one range (same stage, a longer range each call): a set
// that does not fit a range fits no longer one, so with rc_first_fit the scan of rc_order
// resumes at *position (0 for the first call), which it advances to the set chosen.
RangeCost range_cost_ws(const UnitTable& t, double capacity_bytes, double in_flight,
                        std::size_t first, std::size_t last, double workspace_bytes,
                        std::size_t* position);
// Peak bytes of a stage of units [first, last) with recompute candidate `rc`.
double range_memory(const UnitTable& t, std::int64_t in_flight, std::int64_t first,
                    std::int64_t last, int rc);

}  // namespace eth::search
