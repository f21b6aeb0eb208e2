// The inverse of the ring model's pricing for the probes of cost/link_figures.h.
#include "cost/link_figures.h"

#include "core/error.h"

namespace eth {

namespace {

constexpr double kBitsPerGbit = 1e9;

void check_time(double ms) { ETH_CHECK(ms > 0, "a probe's time must be positive"); }

}  // namespace

double node_shared_gbps_from_allreduce(std::int64_t ranks, double bytes, double ms) {
  ETH_CHECK(ranks >= 2, "an all-reduce needs two ranks");
  check_time(ms);
  return 2.0 * static_cast<double>(ranks - 1) * bytes * 8.0 / (ms * 1e-3) / kBitsPerGbit;
}

double intra_node_gbps_from_pairs(std::int64_t ranks, double bytes, double ms) {
  ETH_CHECK(ranks >= 2 && ranks % 2 == 0, "the pairs probe needs an even number of ranks");
  check_time(ms);
  return static_cast<double>(ranks) * bytes * 8.0 / (2.0 * ms * 1e-3) / kBitsPerGbit;
}

double piece_latency_from_tiny(double ms, std::size_t pieces) {
  ETH_CHECK(pieces >= 1, "the tiny probe needs at least one piece");
  check_time(ms);
  return ms / static_cast<double>(pieces);
}

}  // namespace eth
