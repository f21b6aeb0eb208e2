// An independent checker of a simulated timeline (the simulator's test oracle, usable on any
// result): re-derives every duration and dependency from the plan, costs and collectives and
// reports each violation. It shares no code with the engine beyond ms_to_ns, so an engine bug
// does not hide itself. Not a performance model.
#pragma once

#include <string>
#include <vector>

#include "sim/simulator.h"

namespace eth {

// Checks, per device: no two compute ops overlap, nor two sends, two receives or two
// collectives; every compute op and transfer lasts what its cost says; exactly one F and B per
// micro-batch; F after its activation arrived, the send after F, the receive the same interval
// as the neighbour's send, B after its gradient arrived and after its own F, the gradient send
// after B; every collective has one entry per holder, all over the same interval of its priced
// length, starting after every holder's gradients were final (overlap) or after every backward
// of the plan (no overlap); the optimizer step after the device's collectives and backward; each
// weight gather (SimOptions) on every holder over one interval of its length after the holder's
// step; the iteration time is the last end. Needs the timeline recorded with the default schedules.
std::vector<std::string> check_timeline(const Plan& plan, const std::vector<PipelineCosts>& costs,
                                        const std::vector<SimCollective>& collectives,
                                        const SimResult& result, const SimOptions& options);

}  // namespace eth
