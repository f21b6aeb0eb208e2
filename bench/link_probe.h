// The node's link figures for the predictor, measured by collectives independent of the
// aggregations they are used to predict, each through the runtime's own path (Communicator,
// AllreduceQueue: the same 512 KiB pieces and window as the gradient collectives), B = 16 MiB:
//   node_shared_bandwidth_gbps  docs/plan-format.md's definition: one all-reduce of B over all
//                               n ranks of the node, taking t: 2 (n-1) B 8 / t;
//   intra_node_bandwidth_gbps   the n ranks in n/2 disjoint pairs, every pair all-reducing B at
//                               once, taking t: the node moves n B 8 / t (2 B per pair) with
//                               every rank busy, as in an aggregation, and the predictor runs a
//                               shared node's transfers one at a time, so one pair's ring at
//                               that rate moves its B per holder at half of it: n B 8 / (2 t);
//   piece latency               the same pairs each queueing kLinkProbeTinyPieces all-reduces
//                               of 1 KiB at once (one piece each, all in the window), taking t:
//                               t / kLinkProbeTinyPieces (PredictOptions::
//                               collective_piece_latency_ms, cost/link_figures.h).
// Which ranks pair up matters on a host with fewer cores than ranks: with 4 ranks on 2 vCPUs
// one pairing of the three ran 16 MiB in 8-10 ms and the other two in 29-31 ms in the same
// launch, a different one in each launch (the scheduler keeps two ranks on each core for a
// whole launch, and a pair sharing a core beats one waiting for its partner on the other).
// The pairs figures therefore run over every pairing of the round-robin schedule (n-1 of
// them) and take the median over pairings, a pair as the node's scheduler treats a typical one,
// whichever ranks an aggregation's groups hold. runtime_bench interleaves a probe with the
// modes it times, so a launch's link speed (which on the 2-vCPU VM switches between launches)
// is the one its predictions are made with (docs/runtime.md, "Aggregation, measured").
#pragma once

#include <algorithm>
#include <chrono>
#include <span>
#include <vector>

#include "bench_util.h"
#include "comm/allreduce_queue.h"
#include "comm/communicator.h"
#include "cost/link_figures.h"

namespace eth::bench {

inline constexpr std::size_t kLinkProbeBytes = 16u << 20;  // B
inline constexpr std::size_t kLinkProbeTinyPieces = 128;
inline constexpr std::size_t kLinkProbeTinyFloats = 256;   // 1 KiB

// Per-sample times (ms, the slowest rank's, the median over pairings; rank 0 only).
struct LinkSamples {
  std::vector<double> world_ms, pairs_ms, tiny_ms;
};

// The figures from the samples, for n ranks on one node.
struct LinkFigures {
  double shared_gbps = 0, link_gbps = 0, piece_latency_ms = 0;
};

// Round `round` (0 .. n-2) of the circle method over n ranks (n even): the lower rank of the
// pair `rank` is in, so every pair of ranks meets in exactly one round.
inline int round_robin_pair(int n, int round, int rank) {
  const int fixed = n - 1;
  int partner = 0;
  if (rank == fixed) {
    partner = round;
  } else if (rank == round) {
    partner = fixed;
  } else {
    partner = ((2 * round - rank) % fixed + fixed) % fixed;
  }
  return std::min(rank, partner);
}

class LinkProbe {
 public:
  // Collective over `world` (an even number of ranks >= 2).
  explicit LinkProbe(const Communicator& world)
      : world_(world), data_(kLinkProbeBytes / sizeof(float), 1.0f) {
    for (int r = 0; r + 1 < world.size(); ++r) {
      pairings_.push_back(world.split(round_robin_pair(world.size(), r, world.rank()),
                                      world.rank()));
    }
  }

  // One sample of each figure (collective over the world).
  void sample(LinkSamples& out) {
    time(out.world_ms, [&] { allreduce(world_, data_.size(), 1); });
    std::vector<double> pairs, tiny;
    for (const Communicator& p : pairings_) {
      time(pairs, [&] { allreduce(p, data_.size(), 1); });
      time(tiny, [&] { allreduce(p, kLinkProbeTinyPieces * kLinkProbeTinyFloats,
                                 kLinkProbeTinyPieces); });
    }
    if (world_.rank() == 0) {
      out.pairs_ms.push_back(median(pairs));
      out.tiny_ms.push_back(median(tiny));
    }
  }

  static LinkFigures figures(const LinkSamples& s, int ranks) {
    const double b = static_cast<double>(kLinkProbeBytes);
    LinkFigures f;
    f.shared_gbps = node_shared_gbps_from_allreduce(ranks, b, median(s.world_ms));
    f.link_gbps = intra_node_gbps_from_pairs(ranks, b, median(s.pairs_ms));
    f.piece_latency_ms = piece_latency_from_tiny(median(s.tiny_ms), kLinkProbeTinyPieces);
    return f;
  }

 private:
  // The first `floats` of the data summed in place over `c` as `collectives` equal
  // collectives queued at once.
  void allreduce(const Communicator& c, std::size_t floats, std::size_t collectives) {
    AllreduceQueue q(c.options().window_bytes);
    const std::size_t per = floats / collectives;
    for (std::size_t i = 0; i < collectives; ++i) {
      q.push(c, std::span<float>(data_).subspan(i * per, per));
    }
    q.wait_all();
  }
  // The sums grow every call (ones double per pair, float overflows after ~128 calls), so the
  // data are reset before each, outside the timed region.
  template <typename F>
  void time(std::vector<double>& out, F f) {
    std::fill(data_.begin(), data_.end(), 1.0f);
    world_.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const std::vector<double> mine{
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e3};
    const std::vector<double> all = world_.gather(std::span<const double>(mine));
    if (world_.rank() == 0) out.push_back(*std::max_element(all.begin(), all.end()));
    // Every rank done before any starts the next fill (the gather does not wait for them all;
    // runtime_bench's aggregation loop says what a fill beside the stragglers costs).
    world_.barrier();
  }

  Communicator world_;
  std::vector<Communicator> pairings_;
  std::vector<float> data_;
};

}  // namespace eth::bench
