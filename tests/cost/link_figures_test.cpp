// The link figures from probe times (cost/link_figures.h): hand-computed values, and the
// property they exist for: the ring model, given the figures, prices the probes themselves at
// the times they took.
#include "cost/link_figures.h"

#include <gtest/gtest.h>

#include <tuple>
#include <utility>
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
  // 128 tiny pieces queued at once in 5.12 ms: 0.04 ms a piece.
  EXPECT_NEAR(piece_latency_from_tiny(5.12, 128), 0.04, 1e-12);
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
}

TEST(LinkFigures, TheModelPricesTheTinyProbeAtItsOwnTime) {
  // The tiny probe: every pair of the node queues `pieces` all-reduces of 1 KiB at once and
  // all pairs finish in `ms` (shapes of this VM: 4 ranks 1.8 ms, 8 ranks 5.0 ms for 128).
  const std::size_t pieces = 128;
  const double bytes = 1024;
  for (const auto& [n, ms] : std::vector<std::pair<std::int64_t, double>>{{4, 1.8}, {8, 5.0}}) {
    // Link figures of the same VM (the pairs' and the node's, Gbit/s).
    const ClusterSpec spec = host(n, 20, 48);  // ClusterIndex keeps a reference to it
    const ClusterIndex c(spec);
    PredictOptions o;
    o.collective_latency_ms = 0;
    o.collective_piece_latency_ms = piece_latency_from_tiny(ms, pieces);
    // One pair's pieces posted one after another take the probe's time, and the node's memory,
    // busy only for the transfers, lets the pairs run side by side: every pair's transfers
    // together fit in that time.
    const CollectiveTime one = collective_time(c, {0, 1}, bytes, o);
    EXPECT_NEAR(static_cast<double>(pieces) * one.issue_ms, ms, 1e-9) << n;
    EXPECT_LT(static_cast<double>(n / 2) * static_cast<double>(pieces) * one.transfer_ms, ms) << n;
  }
}

}  // namespace
}  // namespace eth
