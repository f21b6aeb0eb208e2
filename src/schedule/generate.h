// Schedule generators: the compute order (Forward and Backward only) of every stage for 1F1B and
// GPipe. Send/receive and gradient actions are added by the passes in lower.h. Pure.
#pragma once

#include <cstdint>

#include "schedule/schedule.h"

namespace eth {

// 1F1B (PipeDream-flush, Megatron's schedule): stage s (0-based) of S runs
// w = min(S - s - 1, k) warm-up forwards, then k - w pairs (forward of micro-batch w + i, backward
// of micro-batch i), then w cool-down backwards. At most S - s micro-batches are in flight on s.
Schedule make_1f1b(std::int64_t num_stages, std::int64_t num_microbatches);

// GPipe: every forward, then every backward (micro-batch order both times); k in flight.
Schedule make_gpipe(std::int64_t num_stages, std::int64_t num_microbatches);

Schedule make_schedule(ScheduleKind kind, std::int64_t num_stages, std::int64_t num_microbatches);

}  // namespace eth
