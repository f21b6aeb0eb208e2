// Intra-pipeline balance: how one pipeline template's stages share the model's units at one
// micro-batch size. Lexicographic optimum: first the smallest bottleneck max_s (F_s + B_s) with
// every device within its memory (each stage taking its cheapest fitting recompute set), then,
// under that bottleneck, the smallest sum_s (F_s + B_s). Two exact solvers: the dynamic program
// over (stage, unit) (DPO) and exhaustive enumeration of the splits (tests and ablation only).
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "search/cost_tables.h"

namespace eth::search {

// One stage of a template, in pipeline order. Stage s (0-based) of S holds S - s micro-batches
// in flight at its peak under 1F1B (DESIGN.md section 3, with k_p >= S assumed: never too
// optimistic).
struct StageSlot {
  const UnitTable* table = nullptr;
  double capacity_bytes = 0;
};

struct UnitSplit {
  bool feasible = false;
  double max_ms = 0;  // bottleneck forward + backward of one full micro-batch
  double sum_ms = 0;  // sum over stages of forward + backward (stage order, left to right)
  std::vector<std::int64_t>
      bounds;                    // S + 1 unit boundaries: stage s holds [bounds[s], bounds[s+1])
  std::vector<int> recompute;    // per stage, index into recompute_candidates()
  std::vector<double> stage_ms;  // per stage forward + backward
  std::vector<double> memory_bytes;  // per stage, peak bytes of one device
};

// O(S * U^2) in the worst case, usually far less: for a fixed range end, ranges are extended
// towards the front only while they fit memory and stay below the best value so far.
UnitSplit split_units_dp(const std::vector<StageSlot>& stages, std::int64_t num_units);
// The same with caller-owned tables, reused across calls (the search runs thousands of splits).
struct SplitScratch {
  std::vector<double> best;
  std::vector<std::size_t> from;
  std::vector<std::size_t> start;
};
UnitSplit split_units_dp(const std::vector<StageSlot>& stages, std::int64_t num_units,
                         SplitScratch& scratch);
// The program in its two phases: the smallest bottleneck alone (+infinity when no split fits),
// and the split given that bottleneck (the same split as above). The search runs the first
// phase as a bound and the second only where the bound does not settle the question.
// What the caller knows makes the first phase cheaper and leaves its answer exact: `floor`
// must be at most the bottleneck (a lower bound; partial values at it need no improving), and
// with `cap` finite the answer is +infinity whenever the bottleneck is above cap (no stage
// range beyond cap is priced): the search passes the largest bottleneck a partition could
// still use, and keeps a +infinity answer as a proof that the bottleneck exceeds cap.
double split_units_bottleneck(const std::vector<StageSlot>& stages, std::int64_t num_units,
                              SplitScratch& scratch, double floor = 0,
                              double cap = std::numeric_limits<double>::infinity());
UnitSplit split_units_dp(const std::vector<StageSlot>& stages, std::int64_t num_units,
                         SplitScratch& scratch, double bottleneck);

// Every composition of the units into S non-empty contiguous ranges: C(U-1, S-1) of them.
UnitSplit split_units_enumerate(const std::vector<StageSlot>& stages, std::int64_t num_units);
double num_unit_splits(std::int64_t num_units, std::int64_t num_stages);  // C(U-1, S-1)

// The split that minimizes the largest ratio of a stage's peak bytes to its capacity, each stage
// taking its least-memory recompute set: the best any split can do for memory. A worst ratio
// above 1 proves the template cannot fit at this micro-batch size.
struct MemoryFloor {
  double worst_ratio = 0;
  std::vector<std::int64_t> bounds;
  std::vector<double> memory_bytes;  // per stage
};
MemoryFloor least_memory_split(const std::vector<StageSlot>& stages, std::int64_t num_units);

}  // namespace eth::search
