// The schedule validator (Megatron's order test and PyTorch's _validate_pipeline_order, on our
// IR): structural rules, then a timeless dry run that finds deadlocks. Reports every problem it
// finds rather than the first; does not price anything (that is sim/).
#pragma once

#include <string>
#include <vector>

#include "schedule/schedule.h"

namespace eth {

// Rules (docs/simulator.md):
//  1. programs[s].stage == s and every action names stage s; micro-batches in [0, k);
//  2. every (stage, micro-batch) has exactly one Forward and one Backward, Forward first;
//  3. F(s, mb) runs before F(s + 1, mb) and B(s + 1, mb) before B(s, mb), in the dry run's
//     step order, and the dry run finishes (no deadlock; the report carries the grid);
//  4. if the schedule has any send/receive, it has all of them: each F on s < S - 1 is followed
//     by SendActivation, each F on s > 0 preceded by RecvActivation, likewise gradients, and
//     every send has exactly one matching receive on the neighbouring stage;
//  5. 1F1B: at most S - s micro-batches in flight (forwarded, not yet backwarded) on stage s;
//  6. ReduceGradients blocks ascend on each stage and come after the stage's last Backward;
//     OptimizerStep, if present, is the last action and comes after every Backward.
std::vector<std::string> validate_schedule(const Schedule& s);

// Throws InputError listing every problem when validate_schedule finds any.
void check_schedule(const Schedule& s, const std::string& source);

}  // namespace eth
