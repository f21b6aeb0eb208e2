// Where each MPI rank sits in a plan, and which samples it handles. Rank i runs the i-th device
// of the plan in ascending global device id (plan.h device_ids); from that a rank derives its
// (pipeline, stage, dp rank, tp rank). A micro-batch of b samples is split over a stage's dp
// replicas in contiguous chunks, replica r taking [r*b/dp, (r+1)*b/dp) (floor division), so two
// adjacent stages of different dp exchange the overlaps of their chunks. Pure: no communication.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cluster/cluster_spec.h"
#include "plan/plan.h"

namespace eth {

struct RankPlace {
  std::int64_t device = 0;  // global device id
  std::int64_t pipeline = 0;
  std::int64_t stage = 0;
  std::int64_t dp_rank = 0;
  std::int64_t tp_rank = 0;
};

// One entry per rank (size plan.num_devices()). ETH_CHECKs that every device of the plan is in
// exactly one stage (validate_plan's rule; call check_runnable first on untrusted plans).
std::vector<RankPlace> place_ranks(const Plan& plan);

// The world rank that runs device `device` of the plan (its index in plan.device_ids()).
int rank_of_device(const Plan& plan, std::int64_t device);

// Everything that stops `plan` from running on `world_size` ranks, checked before any compute:
// the plan's own rules against the cluster (plan/validate.h: tp divides heads and ffn, devices
// of the stage's type), a world size that is not the plan's device count, a tp group spread
// over two nodes or mixing device types, a sequence longer than the model's, and a global batch
// different from `gbs` when `gbs` > 0. Throws InputErrors naming `source` and the JSON path;
// returns normally when the plan can run.
void check_runnable(const Plan& plan, const ClusterSpec& cluster, int world_size,
                    const std::string& source, std::int64_t gbs = 0);

// Samples [begin, begin + size) of a micro-batch of `b` samples held by dp replica r of dp.
struct Chunk {
  std::int64_t begin = 0;
  std::int64_t size = 0;
  std::int64_t end() const { return begin + size; }
};
Chunk dp_chunk(std::int64_t b, std::int64_t dp, std::int64_t r);
// The overlap of two chunks (size 0 when they do not meet).
Chunk overlap(const Chunk& a, const Chunk& b);

}  // namespace eth
