// eth launch --elastic's loop over supervised launches. When a rank dies or stops answering (or
// its host goes), it takes that device out, re-plans on the devices left with the run's model,
// global batch, sequence length and planner options, and resumes from the newest whole
// checkpoint under the new plan until the requested steps are done; a device taken out or
// brought back through --lost-devices (or a host through --hostfile) is acted on at the next
// checkpoint, where the run is asked to stop (eth train --stop-file). The global batch, the data
// order and the learning-rate schedule never change, so the losses are those of an uninterrupted
// run. Every recovery is said on `err` and logged (--elastic-log, JSON lines).
//
// What to do after each launch is restart.h's decision; the re-plan and the lost-devices file
// are elastic/'s (recovery.h, lost_devices.h); this file runs, watches and reports. The flags
// are parsed by cli/cmd_launch.cpp, which resolves the plan, cluster and profile given here.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "cluster/cluster_spec.h"
#include "elastic/recovery.h"
#include "launch/command.h"
#include "plan/plan.h"

namespace eth {

struct ElasticSetup {
  LaunchArgs launch;          // the plan file, --hostfile, mpirun, eth train's arguments (after --)
  Plan user_plan;             // the plan in launch.plan
  ClusterSpec full;           // the cluster the run starts on (its emulation applied)
  ReplanInputs replan;        // replan.profile outlives the run
  std::int64_t target = 0;    // the step the run ends at
  std::string train_log;      // eth train's --log among its arguments; "": the loop names one
  std::string checkpoint_dir;
  std::int64_t checkpoint_every = 0;
  std::string lost_devices;   // a file of device ids the run must not use; may not exist yet
  std::string log;            // --elastic-log: JSON lines, one per event ("": none)
  int max_restarts = 10;
};

// Runs the elastic loop, saying what it does on `err` (mpirun's and the ranks' stderr pass
// through it too); returns the exit code: 0 once the steps are done, kExitNoPlan when no plan
// fits the devices left, the last failure's code past max_restarts, 2 or 3 for a rank's own
// input error or bug (not a device loss), 130/143 when interrupted. Throws InputError for a
// malformed --lost-devices or --hostfile before the first launch.
int run_elastic(const ElasticSetup& setup, std::ostream& err);

}  // namespace eth
