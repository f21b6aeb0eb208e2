// `eth launch --elastic`: a supervisor over supervised launches. When a rank dies or stops
// answering (or its host goes), it takes that device out, re-plans on the devices left with the
// run's model, global batch, sequence length and planner options, and resumes from the newest
// whole checkpoint under the new plan until the requested steps are done; a device taken out or
// brought back through --lost-devices (or a host through --hostfile) is acted on at the next
// checkpoint, where the run is asked to stop (eth train --stop-file). The global batch, the data
// order and the learning-rate schedule never change, so the losses are those of an uninterrupted
// run. Every recovery is printed and logged (--elastic-log, JSON lines). The decisions that need
// no processes are in elastic/ (recovery.h, lost_devices.h); this file runs and watches.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/cli_fwd.h"
#include "cli/launch_command.h"
#include "cli/planner_args.h"

namespace eth::cli {

struct ElasticArgs {
  bool enabled = false;
  std::string checkpoint_dir;
  std::int64_t checkpoint_every = 0;
  std::string lost_devices;  // a file of device ids the run must not use; may not exist yet
  std::string log;           // JSON lines, one per event
  int max_restarts = 10;
  PlannerArgs planner;
  std::vector<CLI::Option*> options;  // every option but --elastic (refused without it)
};

// Declares --elastic and its options on eth launch's `sub`.
void add_elastic_options(CLI::App* sub, ElasticArgs& e);

// UsageError naming the first elastic option given without --elastic.
void refuse_elastic_options(const ElasticArgs& e);

// Runs the elastic loop; returns the exit code: 0 once the steps are done, kExitNoPlan when no
// plan fits the devices left, the last failure's code past --max-restarts, 2 or 3 for a rank's
// own input error or bug (not a device loss), 130/143 when interrupted.
int run_elastic_launch(const LaunchArgs& a, const ElasticArgs& e);

}  // namespace eth::cli
