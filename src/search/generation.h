// Internal to search/: what the generators of partitions (partition.cpp, layer_partitions.cpp)
// share: counts that saturate rather than overflow, and handing partitions to the stream.
#pragma once

#include <cstdint>
#include <vector>

#include "search/partition.h"

namespace eth::search::generation {

constexpr std::int64_t kCountCap = std::int64_t{1} << 62;  // counts saturate here

inline std::int64_t saturating_product(std::int64_t a, std::int64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > kCountCap / b ? kCountCap : a * b;
}
inline std::int64_t saturating_sum(std::int64_t a, std::int64_t b) {
  return a > kCountCap - b ? kCountCap : a + b;
}

// Appends `p`, hands full batches to the flush, and stops generation at the budget.
inline void append(const GenerateOptions& opt, const Partition& p, std::vector<Partition>& out) {
  if (opt.stopped && *opt.stopped) return;
  if (opt.budget > 0 && opt.appended && *opt.appended >= opt.budget) {
    if (opt.stopped) *opt.stopped = true;
    return;
  }
  out.push_back(p);
  if (opt.appended) ++*opt.appended;
  if (opt.flush && out.size() >= opt.flush_at) opt.flush(out);
}

}  // namespace eth::search::generation
