// The node's link figures for the predictor, measured by collectives independent of the
// aggregations they are used to predict, each through the runtime's own path (Communicator,
// AllreduceQueue: the same 512 KiB pieces and window as the gradient collectives), B = 16 MiB:
//   node_shared_bandwidth_gbps  docs/plan-format.md's definition: one all-reduce of B over all
//                               n ranks of the node, taking t: 2 (n-1) B 8 / t;
//   intra_node_bandwidth_gbps   the n ranks in n/2 disjoint pairs (0,1), (2,3), ..., every pair
//                               all-reducing B at once, taking t: the node moves n B 8 / t
//                               (2 B per pair) with every rank busy, as in an aggregation, and
//                               the predictor runs a shared node's collectives one at a time,
//                               so one pair's ring at that rate moves its B per holder at half
//                               of it: n B 8 / (2 t);
//   collective latency          what one more collective costs in the runtime's queue: the
//                               same pairs all-reducing B as kLinkProbePieces collectives of
//                               B / kLinkProbePieces (one 256 KiB piece each, several in flight
//                               in the window, as tensor-wise's are) against B as one
//                               collective, the difference over kLinkProbePieces - 1;
// and, printed only, a one-element blocking all-reduce in every pair at once (median of
// kLinkProbeTinyCount in a row): a round trip with nothing else in flight, which the runtime's
// windowed collectives do not pay in full. runtime_bench interleaves a probe with the modes it
// times, so a launch's link speed (which on the 2-vCPU VM switches between launches) is the
// one its predictions are made with (docs/runtime.md, "Aggregation, measured").
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
inline constexpr std::size_t kLinkProbePieces = 64;
inline constexpr int kLinkProbeTinyCount = 20;  // blocking one-element all-reduces per sample

// Per-sample times (ms, the slowest rank's; filled on rank 0 only).
struct LinkSamples {
  std::vector<double> world_ms, pairs_ms, pairs_pieces_ms, tiny_ms;
};

// The figures from the samples, for n ranks on one node.
struct LinkFigures {
  double shared_gbps = 0, link_gbps = 0, latency_ms = 0;  // what the predictor is given
  double blocking_latency_ms = 0;                         // printed only
};

class LinkProbe {
 public:
  // Collective over `world` (an even number of ranks >= 2).
  explicit LinkProbe(const Communicator& world)
      : world_(world),
        pairs_(world.split(world.rank() / 2, world.rank())),
        data_(kLinkProbeBytes / sizeof(float), 1.0f) {}

  // One sample of each figure (collective over the world).
  void sample(LinkSamples& out) {
    time(out.world_ms, [&] { allreduce(world_, 1); });
    time(out.pairs_ms, [&] { allreduce(pairs_, 1); });
    time(out.pairs_pieces_ms, [&] { allreduce(pairs_, kLinkProbePieces); });
    float one = 1.0f;
    time(out.tiny_ms, [&] {
      for (int i = 0; i < kLinkProbeTinyCount; ++i) pairs_.allreduce_sum(std::span<float>(&one, 1));
    });
    if (!out.tiny_ms.empty()) out.tiny_ms.back() /= kLinkProbeTinyCount;
  }

  static LinkFigures figures(const LinkSamples& s, int ranks) {
    const double b = static_cast<double>(kLinkProbeBytes);
    LinkFigures f;
    f.shared_gbps = node_shared_gbps_from_allreduce(ranks, b, median(s.world_ms));
    f.link_gbps = intra_node_gbps_from_pairs(ranks, b, median(s.pairs_ms));
    // Paired per sample (the same repetition's one-collective time), then the median.
    std::vector<double> extra;
    for (std::size_t i = 0; i < s.pairs_ms.size(); ++i) {
      extra.push_back(
          collective_latency_from_split(s.pairs_ms[i], s.pairs_pieces_ms[i], kLinkProbePieces));
    }
    f.latency_ms = median(extra);
    f.blocking_latency_ms = median(s.tiny_ms);
    return f;
  }

 private:
  // B summed in place over `c` as `collectives` equal collectives queued at once.
  void allreduce(const Communicator& c, std::size_t collectives) {
    AllreduceQueue q(c.options().window_bytes);
    const std::size_t per = data_.size() / collectives;
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
  }

  Communicator world_, pairs_;
  std::vector<float> data_;
};

}  // namespace eth::bench
