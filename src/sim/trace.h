// Writers for a simulated timeline: Chrome trace JSON (Trace Event Format; opens in Perfetto or
// chrome://tracing) and a self-contained SVG picture. Both return the document as a string;
// the caller writes the file (cli/ uses write_file_atomic). Not a parser of either format.
#pragma once

#include <string>

#include "plan/plan.h"
#include "sim/measured.h"
#include "sim/simulator.h"

namespace eth {

// Chrome trace: "X" (complete) events, pid = pipeline, tid = device for compute (forward,
// backward, optimizer); a device's sends, receives and gradient collectives sit on three more
// threads of the same process, tid = device + lane * (1 + largest device id) for lanes 1, 2, 3,
// so no two slices of one thread overlap. Times in microseconds. Memory per stage is a "C"
// counter track (GB). Thread and process names say pipeline, stage, device and type.
std::string chrome_trace_json(const Plan& plan, const SimResult& result);

struct SvgOptions {
  double width_px = 1200;  // whole picture
  double row_px = 22;      // one device
  std::string title;       // empty: "simulated iteration: <time>"
};

// One row per device (grouped by pipeline, in stage order): forward and backward bars in two
// colours with the micro-batch number where it fits, the optimizer step, sends as a thin bar
// above and gradient collectives below the compute bar; a time axis in ms and a legend.
std::string timeline_svg(const Plan& plan, const SimResult& result, const SvgOptions& options = {});

// The simulated and one measured step of the same plan (sim/measured.h) in one picture, two
// rows per device (simulated above measured, the same colours); the measured rows also show
// the time blocked on a neighbour and the sync after the schedule across the bar's middle.
std::string comparison_svg(const Plan& plan, const SimResult& sim, const MeasuredStep& measured,
                           const SvgOptions& options = {});

// Both timelines as one Chrome trace: the simulation's pipelines as processes 0..P-1 (named
// "simulated ..."), the measured step's as P..2P-1 ("measured ..."), lanes as above.
std::string comparison_trace_json(const Plan& plan, const SimResult& sim,
                                  const MeasuredStep& measured);

}  // namespace eth
