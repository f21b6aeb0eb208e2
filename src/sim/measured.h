// A real run's trace (`eth train --trace`, runtime/trace_recorder.h) read back as the
// simulator's Timeline, and the comparison of both per stage: forward, backward, wait on
// neighbours, sync after the pipeline, optimizer and iteration time, simulated vs measured.
// `eth simulate --plan P --measured TRACE` prints it and draws both timelines (trace.h).
// Pure: the caller reads the file; nothing here reads a clock or prints.
//
// How to use:
//   MeasuredRun run = measured_from_json(read_json_file(path, "simulate"), plan, path);
//   SimResult sim = simulate(plan, costs, colls, {});
//   StageComparison table = compare_measured(plan, sim, run);
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/json_cursor.h"
#include "core/precision.h"
#include "plan/plan.h"
#include "sim/simulator.h"

namespace eth {

// A measured interval that has no simulated counterpart in the Timeline.
struct MeasuredSpan {
  std::int64_t device = 0;
  TimeNs start = 0, end = 0;
};

// One traced step, its times from the step's origin (the earliest rank's step start).
struct MeasuredStep {
  std::int64_t step = 0;
  // Forward, Backward, OptimizerStep (the norm and the update are two entries), sends (the
  // posting), RecvActivation/RecvGradient (the time blocked on the neighbour) and
  // ReduceGradients (block = the collective's index, as the simulator numbers them).
  Timeline timeline;
  std::vector<MeasuredSpan> sync;       // after the schedule: aggregation not hidden + reduction
  std::vector<MeasuredSpan> send_wait;  // end of the schedule: until neighbours took the sends
  std::vector<MeasuredSpan> stretch;    // emulation sleeps (inside forwards/backwards/optimizer)
  std::map<std::int64_t, TimeNs> device_end;  // per device: the end of its step
  TimeNs iteration = 0;                       // the latest device_end
  // The run's period at this step, when the step before it was traced too: from the moment
  // that one was done on every rank to the moment this one was. A rank that was done early
  // starts early (it leaves the step's last collective first), so `iteration` also counts the
  // spread of the ranks' starts; the period is what the run's throughput is. 0: not known.
  TimeNs period = 0;
  // The period where known, else `iteration`.
  TimeNs iteration_or_period() const { return period > 0 ? period : iteration; }
};

struct MeasuredRun {
  std::string aggregation;                 // the run's aggregation mode
  Precision precision = Precision::Fp32;   // the run's (traces before bf16 were all fp32)
  std::map<std::string, double> slowdown;  // emulated device types of the run
  std::vector<MeasuredStep> steps;         // ascending
};

// Reads a measured trace. Throws InputError("simulate", source, path, ...) for a document that is
// not an eth measured trace (otherData.format), one of another version, or one of another plan
// than `plan` (its model, batch, sequence and pipelines must be `plan`'s).
MeasuredRun measured_from_json(const Json& doc, const Plan& plan, const std::string& source);

// Where a device's iteration goes, in ms. On both sides forward + backward + wait + sync +
// optimizer adds up to the iteration (measured: up to the few microseconds between actions).
struct PhaseTimes {
  double forward_ms = 0;    // every forward of the step
  double backward_ms = 0;   // every backward (recompute included)
  double wait_ms = 0;       // blocked on neighbours before the last backward ended
  double sync_ms = 0;       // after the last backward until the optimizer could start
  double optimizer_ms = 0;  // the optimizer step
  double iteration_ms = 0;  // from the step's origin to the end of this device's optimizer
};

// Simulated: wait = idle time before the device's last backward ends, sync = from there to the
// start of its optimizer step.
PhaseTimes simulated_phase_times(const SimResult& sim, std::int64_t device);
// Measured: the sums of the step's forwards, backwards, receive and send waits, syncs and
// optimizer entries of the device.
PhaseTimes measured_phase_times(const MeasuredStep& step, std::int64_t device);

struct StagePhases {
  std::int64_t pipeline = 0, stage = 0;
  std::string device_type;
  std::vector<std::int64_t> devices;
  PhaseTimes simulated, measured;  // means over the stage's devices (and the traced steps)
};

struct MeasuredComparison {
  std::vector<StagePhases> stages;  // pipeline-major
  double simulated_iteration_ms = 0;
  double measured_iteration_ms = 0;  // mean over the traced steps (their periods where known)
  std::vector<std::int64_t> steps;
};

MeasuredComparison compare_measured(const Plan& plan, const SimResult& sim, const MeasuredRun& run);

// (simulated - measured) / measured; 0 when both are 0, and +-infinity when only measured is.
double relative_error(double simulated, double measured);

// The traced step whose iteration is the median of the run's (the one worth a picture).
const MeasuredStep& median_step(const MeasuredRun& run);

}  // namespace eth
