// The lowered programs of a whole plan: one Schedule per pipeline, each stage's program ending in
// the gradient collectives its devices join and the optimizer step. The simulator prices these
// programs and the runtime executes them, so the two read the same reductions in the same places.
// Not a generator (generate.h) nor a pass over one schedule (lower.h): it routes the plan's
// collectives, given as holder lists, to the stages that hold them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/plan.h"
#include "schedule/schedule.h"

namespace eth {

// Holders of each gradient collective in the global order (global device ids, ascending, two or
// more each: the simulator's and the runtime's numbering of ReduceGradients blocks).
using CollectiveHolders = std::vector<std::vector<std::int64_t>>;

// Per pipeline: make_schedule(kind), insert_p2p, then append_reductions with, for each stage, the
// collectives any device of the stage holds (ascending). Throws via ETH_CHECK when a holder is
// not a device of the plan (the caller derived the holders from this plan).
std::vector<Schedule> lower_plan_schedules(const Plan& plan, ScheduleKind kind,
                                           const CollectiveHolders& holders);

// Problems of a plan's programs that no single Schedule shows: one schedule per pipeline with the
// pipeline's stage and micro-batch counts; every ReduceGradients names a collective that a device
// of its stage holds; and each collective is reduced by every holder's stage program or by none
// (a holder that never joins leaves the others waiting forever); every program ends with one
// OptimizerStep. Empty when all hold. validate_schedule checks each schedule on its own.
std::vector<std::string> validate_plan_schedules(const Plan& plan,
                                                 const std::vector<Schedule>& schedules,
                                                 const CollectiveHolders& holders);

}  // namespace eth
