// The link figures from probe times (cost/link_figures.h): hand-computed values, and the
// property they exist for: the ring model, given the figures, prices the probes themselves at
// the times they took.
#include "cost/link_figures.h"

#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "cluster/cluster_spec.h"
#include "cost/predictor.h"

namespace eth {
namespace {

TEST(LinkFigures, HandComputed) {
  // 2 (4-1) x 1e6 bytes x 8 bit in 6 ms: 48e6 bit / 6e-3 s = 8e9 bit/s.
  EXPECT_NEAR(node_shared_gbps_from_allreduce(4, 1e6, 6.0), 8.0, 1e-12);
  // 4 ranks in 2 pairs, 1e6 bytes each in 2 ms: 4 x 8e6 bit / (2 x 2e-3 s) = 8e9 bit/s.
  EXPECT_NEAR(intra_node_gbps_from_pairs(4, 1e6, 2.0), 8.0, 1e-12);
  // 63 extra collectives cost 6.3 ms: 0.1 ms each; a split that came out faster: 0.
  EXPECT_NEAR(collective_latency_from_split(10.0, 16.3, 64), 0.1, 1e-12);
  EXPECT_EQ(collective_latency_from_split(10.0, 9.0, 64), 0.0);
}

// One node of `n` CPU-like devices whose ranks share one memory system, with the given figures.
ClusterSpec host(std::int64_t n, double link_gbps, double shared_gbps) {
  ClusterSpec c;
  c.name = "host";
  c.nodes = {{"host", n}};
  DeviceType t{"host", 1, 1, link_gbps, std::nullopt, 1.0};
  t.node_shared_bandwidth_gbps = shared_gbps;
  c.device_types["host"] = t;
  c.custom_types = {"host"};
  return c;
}

TEST(LinkFigures, TheModelPricesTheProbesAtTheirOwnTimes) {
  const double bytes = 16.0 * (1 << 20);
  // Times of the shape this 2-vCPU VM measures (bench/runtime_bench's probe lines). The pairs
  // come back at their own time while the node figure does not bind for a pair
  // (world_ms / (n-1) <= 2 pairs_ms / n): on this VM a 2-holder collective moves fewer bytes
  // per second through the node than one over all its ranks.
  for (const auto& [n, world_ms, pairs_ms] :
       std::vector<std::tuple<std::int64_t, double, double>>{{4, 12.5, 11.0}, {8, 40.0, 27.0}}) {
    const ClusterSpec c = host(n, intra_node_gbps_from_pairs(n, bytes, pairs_ms),
                               node_shared_gbps_from_allreduce(n, bytes, world_ms));
    std::vector<std::int64_t> all;
    for (std::int64_t i = 0; i < n; ++i) all.push_back(i);
    EXPECT_NEAR(ring_allreduce_ms(c, all, bytes, 0.0), world_ms, 1e-9) << n;
    // The predictor runs a shared node's collectives one at a time (Predictor,
    // ASharedNodeRunsOneCollectiveAtATime): the n/2 pairs back to back.
    double pairs = 0;
    for (std::int64_t i = 0; i < n; i += 2) pairs += ring_allreduce_ms(c, {i, i + 1}, bytes, 0.0);
    EXPECT_NEAR(pairs, pairs_ms, 1e-9) << n;
  }
  // The latency: k collectives of B/k against one of B differ by (k - 1) latencies.
  const ClusterSpec c = host(4, 20, 48);
  const double latency = 0.03;
  const double one = ring_allreduce_ms(c, {0, 1}, bytes, latency);
  const double many = 64 * ring_allreduce_ms(c, {0, 1}, bytes / 64, latency);
  EXPECT_NEAR(collective_latency_from_split(one, many, 64), latency, 1e-12);
}

}  // namespace
}  // namespace eth
