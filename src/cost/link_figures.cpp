// The inverse of the ring model's pricing for the probes of cost/link_figures.h.
#include "cost/link_figures.h"

#include <algorithm>

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

double collective_latency_from_split(double one_ms, double many_ms, std::size_t collectives) {
  ETH_CHECK(collectives >= 2, "the split needs two or more collectives");
  return std::max(0.0, (many_ms - one_ms) / static_cast<double>(collectives - 1));
}

}  // namespace eth
