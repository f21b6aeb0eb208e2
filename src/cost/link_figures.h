// A node's link figures for the ring model (ring_allreduce_ms, collective_time: cost/predictor.h)
// and its piece latency, from probe collectives timed on it: the inverse of the pricing, so
// that the predictor, given the figures, prices the probes at the times they took.
// docs/plan-format.md says how each probe is run; bench/link_probe.h runs them through the
// runtime's communicator. Pure arithmetic.
#pragma once

#include <cstddef>
#include <cstdint>

namespace eth {

// node_shared_bandwidth_gbps: one all-reduce of `bytes` over all `ranks` ranks of the node took
// `ms`. The predictor moves 2 (n-1) bytes through the node's memory for it: 2 (n-1) B 8 / t.
double node_shared_gbps_from_allreduce(std::int64_t ranks, double bytes, double ms);

// intra_node_bandwidth_gbps of a node whose devices share one memory system: its `ranks` ranks
// in ranks/2 disjoint pairs, every pair all-reducing `bytes` at once, took `ms` (every rank
// busy, as in an aggregation). The predictor runs such a node's collectives one at a time, each
// pair's ring moving `bytes` per holder over the link, so the link that prices the ranks/2
// pairs back to back at `ms` is ranks B 8 / (2 t) (while the node figure does not bind for a
// pair: an all-reduce over all ranks moves more bytes per second than a pair's, as measured on
// the 2-vCPU VM).
double intra_node_gbps_from_pairs(std::int64_t ranks, double bytes, double ms);

// PredictOptions::collective_piece_latency_ms: the node's ranks in disjoint pairs, every pair
// queueing `pieces` all-reduces of a few bytes at once (each one piece, all in the window),
// took `ms`. The predictor has each holder post its pieces one per latency while their bytes
// move, the node's shared memory busy only for the bytes (collective_time), so with the
// transfers negligible (a few bytes) the pairs run side by side and the latency that prices the
// probe at `ms` is ms / pieces.
double piece_latency_from_tiny(double ms, std::size_t pieces);

}  // namespace eth
