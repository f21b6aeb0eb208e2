// Unit tables filled by hand for the search's tests: per-unit raw figures (the tests' ground
// truth) turned into a UnitTable's prefix sums, and random figures in which each further
// recompute candidate holds fewer bytes and costs more backward time, unit by unit. Test-only.
#pragma once

#include <array>
#include <random>
#include <vector>

#include "search/cost_tables.h"

namespace eth::search::raw_units {

// Per-unit raw figures of one (type, tp, mbs), as the test's ground truth.
struct RawUnits {
  std::vector<double> fwd, static_bytes, workspace;
  std::vector<std::array<double, kNumRecomputeCandidates>> bwd, held;
};

inline UnitTable make_table(const RawUnits& r) {
  const std::size_t n = r.fwd.size();
  UnitTable t;
  t.forward_prefix.assign(n + 1, 0);
  t.static_prefix.assign(n + 1, 0);
  for (auto& v : t.backward_prefix) v.assign(n + 1, 0);
  for (auto& v : t.held_prefix) v.assign(n + 1, 0);
  for (std::size_t u = 0; u < n; ++u) {
    t.forward_prefix[u + 1] = t.forward_prefix[u] + r.fwd[u];
    t.static_prefix[u + 1] = t.static_prefix[u] + r.static_bytes[u];
    for (std::size_t k = 0; k < kNumRecomputeCandidates; ++k) {
      t.backward_prefix[k][u + 1] = t.backward_prefix[k][u] + r.bwd[u][k];
      t.held_prefix[k][u + 1] = t.held_prefix[k][u] + r.held[u][k];
    }
  }
  t.workspace = r.workspace;
  t.compute_ms.assign(n, 0);
  return t;
}

inline RawUnits random_units(std::mt19937& rng, std::size_t U) {
  std::uniform_real_distribution<double> t(0.1, 2.0), bytes(1.0, 10.0);
  RawUnits r;
  for (std::size_t u = 0; u < U; ++u) {
    r.fwd.push_back(t(rng));
    r.static_bytes.push_back(bytes(rng));
    r.workspace.push_back(bytes(rng));
    std::array<double, kNumRecomputeCandidates> bw{}, held{};
    double extra = 0, kept = bytes(rng) * 3;
    for (std::size_t k = 0; k < kNumRecomputeCandidates; ++k) {
      // Each further set recomputes more: more backward time, fewer bytes held.
      bw[k] = 2 * r.fwd[u] + extra;
      held[k] = kept;
      extra += t(rng) * 0.3;
      kept *= 0.7;
    }
    r.bwd.push_back(bw);
    r.held.push_back(held);
  }
  return r;
}

}  // namespace eth::search::raw_units
