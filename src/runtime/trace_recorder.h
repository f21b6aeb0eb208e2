// Recording what a rank really did, for `eth train --trace`: every forward and backward per
// micro-batch, recompute, sends, the time blocked on a neighbour, each gradient collective, the
// sync after the schedule, the optimizer step and the emulation stretch, for the chosen steps.
// One recorder per rank, passed in (no globals); the runtime's action sites hold one-line
// TraceScopes that do nothing but test a null pointer when tracing is off. After the run,
// gather_trace (collective) brings every rank's events to rank 0 on rank 0's clock, and
// measured_trace_json formats them as a Chrome trace (docs/runtime.md "Tracing a run").
// Not a profiler of kernels, and not thread-safe: one rank, one thread.
//
// How to use (every rank):
//   TraceRecorder rec({2, 3, 4});            // the steps to record
//   cfg.trace = &rec;                         // DistTrainConfig; the runtime records into it
//   ... train ...
//   auto all = gather_trace(rec, world);      // collective; rank 0 gets every rank's events
//   if (world.rank() == 0) write(measured_trace_json(all, info));
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"
#include "core/precision.h"
#include "core/json_cursor.h"
#include "plan/plan.h"

namespace eth {

enum class TraceKind : std::uint8_t {
  Step,            // the whole step on this rank
  Forward,         // F of a micro-batch over the stage's units (emulation stretch included)
  Backward,        // B of a micro-batch (recompute and stretch included)
  Recompute,       // recomputing one unit's dropped tensors inside a backward (index: the unit)
  SendActivation,  // posting the activation of a micro-batch to the next stage
  SendGradient,    // posting the input gradient to the previous stage
  RecvActivation,  // blocked until the previous stage's activation arrived (index: that stage)
  RecvGradient,    // blocked until the next stage's gradient arrived (index: that stage)
  SendWait,        // blocked at the end of the schedule until the neighbours took every send
  CollectivePost,  // packing and posting gradient collective `index` (not emitted: see below)
  CollectiveWait,  // waiting for collective `index` after the schedule (not emitted: see below)
  Collective,      // collective `index` from its post (or the previous one's end) to its end
  Sync,            // at RD and OPT: gradient aggregation not hidden + loss/norm reduction
  Optimizer,       // norm, clipping, AdamW (stretch included)
  Stretch,         // the emulation's sleep at the end of an op
};
inline constexpr int kNumTraceKinds = static_cast<int>(TraceKind::Stretch) + 1;

// "forward", "recv_activation", ...: the `cat` of the Chrome trace events.
std::string_view trace_kind_name(TraceKind k);

struct TraceEvent {
  TraceKind kind = TraceKind::Step;
  std::int64_t step = 0;
  std::int64_t start_ns = 0, end_ns = 0;  // this process's steady clock (rank 0's after gather)
  std::int64_t microbatch = -1;
  // Collective*: the collective's index in the global order (cost/blocks.h, groups of one left
  // out: the simulator's numbering); Recompute: the unit; Recv*/Send*: the neighbour stage.
  std::int64_t index = -1;
  std::int64_t cpu_ns = -1;  // Forward/Backward/Optimizer/Recompute/Stretch: thread CPU time
  std::int64_t late_ns = 0;  // Stretch: how long after its deadline the sleep ended
};

class TraceRecorder {
 public:
  // `steps`: the steps whose events are kept (any order, duplicates ignored).
  explicit TraceRecorder(std::vector<std::int64_t> steps);
  // Replaces the chosen steps (before the first of them runs).
  void choose_steps(std::vector<std::int64_t> steps);

  static std::int64_t now_ns();         // steady clock
  static std::int64_t thread_cpu_ns();  // this thread's CPU time

  // The trainer brackets each step (TraceStep does); events are kept only inside chosen steps.
  void begin_step(std::int64_t step);
  void end_step();
  bool on() const { return on_; }

  // Keeps `e` (its step set to the current one) when on(). CollectivePost only notes when the
  // collective was posted; CollectiveWait becomes a Collective event from the later of that
  // post and the previous collective's end (a rank runs its collectives one at a time, in
  // order) to the end of the wait (when the rank saw it complete: an upper bound).
  void add(TraceEvent e);

  const std::vector<TraceEvent>& events() const { return events_; }
  const std::vector<std::int64_t>& steps() const { return steps_; }

 private:
  std::vector<std::int64_t> steps_;  // sorted, unique
  bool on_ = false;
  std::int64_t step_ = -1;
  std::int64_t step_start_ns_ = 0;
  std::int64_t last_collective_end_ns_ = 0;
  std::map<std::int64_t, std::int64_t> posted_ns_;  // collective index -> end of its post
  std::vector<TraceEvent> events_;
};

// Records one event of `kind` over its lifetime when `rec` is non-null and on; otherwise it only
// tests the pointer. Compute kinds also record the thread's CPU time.
class TraceScope {
 public:
  TraceScope(TraceRecorder* rec, TraceKind kind, std::int64_t microbatch = -1,
             std::int64_t index = -1)
      : rec_(rec != nullptr && rec->on() ? rec : nullptr) {
    if (rec_ != nullptr) start(kind, microbatch, index);
  }
  ~TraceScope() { end(); }
  // Ends the event now instead of at the end of the scope (later calls do nothing).
  void end() {
    if (rec_ != nullptr) finish();
    rec_ = nullptr;
  }
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  void start(TraceKind kind, std::int64_t microbatch, std::int64_t index);
  void finish();
  TraceRecorder* rec_;
  TraceEvent e_;
};

// Brackets one step: begin_step on construction, end_step on destruction (null: nothing).
class TraceStep {
 public:
  TraceStep(TraceRecorder* rec, std::int64_t step) : rec_(rec) {
    if (rec_ != nullptr) rec_->begin_step(step);
  }
  ~TraceStep() {
    if (rec_ != nullptr) rec_->end_step();
  }
  TraceStep(const TraceStep&) = delete;
  TraceStep& operator=(const TraceStep&) = delete;

 private:
  TraceRecorder* rec_;
};

// For StageComputeConfig::on_recompute: one Recompute event per unit recomputed while `rec` is
// on. Null `rec`: an empty function (StageCompute then calls nothing).
std::function<void(std::int64_t unit, bool done)> recompute_hook(TraceRecorder* rec);

// One rank's events after gather_trace, on rank 0's clock.
struct RankTrace {
  int rank = 0;
  std::int64_t clock_offset_ns = 0;  // added to this rank's clock to get rank 0's
  std::int64_t clock_error_ns = 0;   // half the round trip of the best ping-pong: the bound
  std::vector<TraceEvent> events;
};

// Collective over `world`. Clocks are aligned by ping-pong against rank 0 (`rounds` round
// trips per rank, the one with the shortest round trip kept, Cristian's method): this works
// across hosts, where steady clocks have different origins, and its error bound is measured
// (half that round trip), where a barrier-based origin would carry each rank's unknown wake-up
// delay from the barrier. Then every rank sends its events to rank 0. Rank 0 returns one
// RankTrace per rank (times shifted to its clock); other ranks return an empty vector.
std::vector<RankTrace> gather_trace(const TraceRecorder& rec, const Communicator& world,
                                    int rounds = 16);

// What the trace says about the run, besides the events.
struct TraceInfo {
  Plan plan;
  std::string aggregation;                  // block | tensor | device
  std::map<std::string, double> slowdown;   // emulated device types
  Precision precision = Precision::Fp32;    // the run's: the bytes of its messages on the wire
  std::vector<std::int64_t> steps;          // recorded steps
};

// The Chrome trace (JSON object format; opens in https://ui.perfetto.dev): one process per
// rank (pid = rank, named with its device, pipeline, stage and type), threads (tid) per lane:
// 0 compute (F, B, sync, OPT), 1 sends, 2 blocked on a neighbour, 3 gradient collectives,
// 4 emulation stretch, 5 recompute, 6 steps. Times in microseconds from the earliest event.
// "otherData" carries the format tag, the plan, the aggregation mode, the emulated slowdowns,
// the ranks' places and the clock alignment (docs/runtime.md "Tracing a run").
Json measured_trace_json(const std::vector<RankTrace>& ranks, const TraceInfo& info);

// Parses a --trace-steps value: "N", "A-B" (inclusive) or a comma list of those; InputError
// naming `flag` otherwise. Empty text: `default_count` steps after the first step of the run
// (which pays for first-touch set-up), clipped to [first, end).
std::vector<std::int64_t> parse_trace_steps(const std::string& text, std::int64_t first,
                                            std::int64_t end, const std::string& flag,
                                            std::int64_t default_count = 3);

}  // namespace eth
