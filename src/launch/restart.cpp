// The restart decision (restart.h).
#include "launch/restart.h"

#include "core/exit_codes.h"

namespace eth {

DeviceChange device_change(const std::set<std::int64_t>& before,
                           const std::set<std::int64_t>& after) {
  DeviceChange c;
  for (std::int64_t d : before) {
    if (after.count(d) == 0) c.back.insert(d);
  }
  for (std::int64_t d : after) {
    if (before.count(d) == 0) c.gone.insert(d);
  }
  return c;
}

bool may_restart(const RestartState& s) { return s.restarts < s.max_restarts; }

Decision decide_restart(const LaunchEnd& end, const RestartState& state) {
  using Action = Decision::Action;
  using Why = Decision::Why;
  Decision d;
  switch (end.ended) {
    case Ended::Interrupted:
      d.action = Action::Interrupted;
      d.why = Why::Signal;
      d.exit_code = end.exit_code;
      return d;
    case Ended::OwnError:
      d.action = Action::GiveUp;
      d.why = Why::OwnError;
      d.exit_code = end.exit_code;
      return d;
    case Ended::AllOk:
      if (end.steps_done) return d;  // Finish
      if (!end.stop_requested) {
        d.action = Action::GiveUp;
        d.why = Why::EndedUnasked;
        d.exit_code = kExitInternal;
        return d;
      }
      d.why = Why::DevicesChanged;
      break;
    case Ended::DeviceLost:
      d.why = Why::DeviceLost;
      d.taken = end.taken;
      break;
  }
  if (!may_restart(state)) {
    d.action = Action::GiveUp;
    d.why = Why::RestartLimit;
    // A run that stopped to take a device change failed nothing itself: say a rank was lost.
    d.exit_code = end.ended == Ended::AllOk ? kExitComm : end.exit_code;
    return d;
  }
  d.action = Action::Restart;
  d.restart = state.restarts + 1;
  d.lost = state.out;
  d.lost.insert(d.taken.begin(), d.taken.end());
  d.change = device_change(state.planned_without, d.lost);
  return d;
}

std::set<std::int64_t> devices_taken(const LaunchOutcome& o, const ClusterSpec& full,
                                     const std::vector<std::string>& node_hosts) {
  std::set<std::int64_t> out;
  if (!o.lost_host.empty()) {
    std::int64_t id = 0;
    for (std::size_t k = 0; k < full.nodes.size(); ++k) {
      for (std::int64_t i = 0; i < full.nodes[k].devices; ++i, ++id) {
        if (k < node_hosts.size() && node_hosts[k] == o.lost_host) out.insert(id);
      }
    }
  }
  if (out.empty() && o.lost_device >= 0) out.insert(o.lost_device);
  return out;
}

}  // namespace eth
