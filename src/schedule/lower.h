// Lowering passes over the schedule IR: from a compute order (generate.h) to the full program an
// executor runs. Each pass returns nothing and edits the schedule in place; each is idempotent
// only in the sense that running it twice is a bug (ETH_CHECK).
#pragma once

#include <cstdint>
#include <vector>

#include "schedule/schedule.h"

namespace eth {

// Adds the paired point-to-point actions: RecvActivation right before each Forward on stages
// > 0, SendActivation right after each Forward on stages < S - 1, RecvGradient right before
// each Backward on stages < S - 1, SendGradient right after each Backward on stages > 0.
void insert_p2p(Schedule& s);

// Appends, to every stage s, ReduceGradients(b) for each b of blocks_per_stage[s] (ascending:
// the global collective order), then one OptimizerStep. blocks_per_stage.size() == num_stages.
void append_reductions(Schedule& s, const std::vector<std::vector<std::int64_t>>& blocks_per_stage);

bool has_p2p(const Schedule& s);

}  // namespace eth
