// The restart decision of eth launch --elastic, as a function of how a launch ended and where
// the run stands: finish, restart on a new set of devices, give up with an exit code, or stop on
// an interrupt. Pure: the loop (elastic_run.h) reads the files and the checkpoints, asks here,
// then plans, writes and relaunches as told. Which exit code means what is outcome.h's.
//
// How to use:
//   LaunchEnd end{outcome.ended, outcome.exit_code, taken, stop_requested, steps_done};
//   Decision d = decide_restart(end, state);
//   if (d.action == Decision::Action::Restart) plan without d.lost, record d.taken, ...
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "cluster/cluster_spec.h"
#include "launch/outcome.h"

namespace eth {

// What the decision needs from one launch.
struct LaunchEnd {
  Ended ended = Ended::AllOk;
  int exit_code = 0;
  std::set<std::int64_t> taken;  // devices (full-cluster ids) the failure took; empty: unknown
  bool stop_requested = false;   // the loop asked the run to stop at a checkpoint (devices changed)
  bool steps_done = false;       // the newest whole checkpoint is at the run's last step
};

// Where the run stands before the decision.
struct RestartState {
  int restarts = 0;      // relaunches so far
  int max_restarts = 10;
  std::set<std::int64_t> planned_without;  // devices the running plan was made without
  // Devices out as things read now: listed in --lost-devices, on hosts gone from --hostfile, and
  // taken by earlier failures (not yet this launch's).
  std::set<std::int64_t> out;
};

// Devices that came back and went, from one set of devices out to the next.
struct DeviceChange {
  std::set<std::int64_t> back, gone;
  bool operator==(const DeviceChange&) const = default;
};
DeviceChange device_change(const std::set<std::int64_t>& before,
                           const std::set<std::int64_t>& after);

// Whether another relaunch is allowed (--max-restarts): the one limit for restarts after a
// failure and for stopping a run to take a device change.
bool may_restart(const RestartState& s);

struct Decision {
  enum class Action {
    Finish,       // the steps are done
    Restart,      // re-plan without `lost` and relaunch from the newest whole checkpoint
    GiveUp,       // stop with `exit_code`; the last checkpoint is whole
    Interrupted,  // SIGINT/SIGTERM: stop with `exit_code` (130/143)
  };
  enum class Why {
    StepsDone,
    DevicesChanged,  // the run stopped when asked: devices came back or went
    DeviceLost,      // a rank or host was lost (taken may be empty: restart on the same devices)
    OwnError,        // a rank's own error: another plan would meet it again
    RestartLimit,    // --max-restarts reached
    EndedUnasked,    // every rank ended before the last step without being asked to: a bug
    Signal,
  };
  Action action = Action::Finish;
  Why why = Why::StepsDone;
  int exit_code = 0;                 // GiveUp, Interrupted
  std::set<std::int64_t> taken;      // lost by this launch: recorded as lost (also on GiveUp)
  std::set<std::int64_t> lost;       // Restart: the devices the next plan is made without
  DeviceChange change;               // Restart: `lost` against state.planned_without
  int restart = 0;                   // Restart: its number (state.restarts + 1)
};

Decision decide_restart(const LaunchEnd& end, const RestartState& state);

// The devices a failure took: every device of the node whose host was lost whole (node k runs
// on node_hosts[k]), else the lost rank's device (full-cluster id), else none known.
std::set<std::int64_t> devices_taken(const LaunchOutcome& o, const ClusterSpec& full,
                                     const std::vector<std::string>& node_hosts);

}  // namespace eth
