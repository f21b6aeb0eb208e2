// The schedule IR (STYLE.md section 7, docs/simulator.md): what each stage of a pipeline does, in
// order, as plain data. Generators (generate.h) build the compute order, passes (lower.h) add the
// point-to-point and gradient actions, validate.h checks the rules. No time and no costs here:
// the simulator (sim/) and the runtime's executor both consume a Schedule.
//
// How to use:
//   Schedule s = make_1f1b(num_stages, num_microbatches);   // F and B only
//   insert_p2p(s);                                           // paired Send/Recv actions
//   append_reductions(s, blocks_per_stage);                  // ReduceGradients + OptimizerStep
//   auto problems = validate_schedule(s);                    // empty when every rule holds
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace eth {

enum class ActionKind : std::uint8_t {
  Forward,
  Backward,
  SendActivation,   // to stage + 1, after Forward of the same micro-batch
  RecvActivation,   // from stage - 1, before Forward of the same micro-batch
  SendGradient,     // to stage - 1, after Backward of the same micro-batch
  RecvGradient,     // from stage + 1, before Backward of the same micro-batch
  ReduceGradients,  // join the collective of gradient block `block` (asynchronous, see below)
  OptimizerStep,    // after every reduction of the stage's devices
};
inline constexpr int kNumActionKinds = 8;

// Short names used by the text form: F B SA RA SG RG RD OPT.
std::string_view action_kind_token(ActionKind k);
std::string_view action_kind_name(ActionKind k);  // "forward", "send_activation", ...
bool is_compute(ActionKind k);                    // Forward, Backward, OptimizerStep

// One step of a stage's program. `microbatch` is -1 for ReduceGradients and OptimizerStep;
// `block` is -1 except for ReduceGradients, where it indexes the caller's collective list.
struct Action {
  ActionKind kind = ActionKind::Forward;
  std::int64_t stage = 0;        // 0-based stage of the pipeline
  std::int64_t microbatch = -1;  // 0-based
  std::int64_t block = -1;
  bool operator==(const Action&) const = default;
};

// The program every device of one stage runs (they run it in lockstep: tp and dp replicas of a
// stage do the same work on their shard). Semantics for an executor:
//  - Forward / Backward / OptimizerStep occupy the stage's compute, in program order;
//  - Send* start a transfer and do not wait for it; Recv* wait until the matching transfer
//    has arrived;
//  - ReduceGradients actions are asynchronous: their order fixes the order of the stage's
//    collectives on its communication resource (one global order on every device, so no two
//    devices wait on each other in opposite orders); each starts once every holder's
//    gradients for the block are final, which may be in the middle of the last Backward;
//  - OptimizerStep waits for every collective of the stage's devices.
struct RankProgram {
  std::int64_t stage = 0;
  std::vector<Action> actions;
  bool operator==(const RankProgram&) const = default;
};

enum class ScheduleKind : std::uint8_t { OneFOneB, GPipe };
std::string_view schedule_kind_name(ScheduleKind k);  // "1f1b", "gpipe"
std::optional<ScheduleKind> parse_schedule_kind(std::string_view name);

struct Schedule {
  ScheduleKind kind = ScheduleKind::OneFOneB;
  std::int64_t num_stages = 0;
  std::int64_t num_microbatches = 0;
  std::vector<RankProgram> programs;  // programs[s].stage == s
  bool operator==(const Schedule&) const = default;
};

// Text form: one line per stage, "s0: F0 F1 B0 F2 B1 B2", tokens as in action_kind_token with
// the micro-batch (or block) appended; OPT has no number. Round-trips through parse_schedule_text.
std::string action_token(const Action& a);
std::string format_schedule(const Schedule& s);
// Parses the text form (num_microbatches is taken as 1 + the largest micro-batch seen). Throws
// InputError naming the line and token on malformed input.
Schedule parse_schedule_text(std::string_view text, ScheduleKind kind = ScheduleKind::OneFOneB);

// The step x stage grid: row i holds action i of every program. `marker[s]`, when in range,
// flags program s's action at that index with '*' (the action it is stuck on). Used by the
// validator's and simulator's deadlock reports.
std::string format_grid(const Schedule& s, const std::vector<std::int64_t>& marker = {});

}  // namespace eth
