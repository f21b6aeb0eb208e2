// eth launch --elastic's restart decision case by case, with no processes: a lost device is
// planned without (and kept out with those already out), a rank's own error and an interrupt
// stop with their codes, the restart limit gives up (still recording the loss), devices removed
// from the --lost-devices file come back, and a run that ends early unasked is a bug. The
// expected sets are written out by hand.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "cluster/cluster_spec.h"
#include "core/exit_codes.h"
#include "elastic/lost_devices.h"
#include "launch/restart.h"

namespace eth {
namespace {

using Ids = std::set<std::int64_t>;
using Action = Decision::Action;
using Why = Decision::Why;

LaunchEnd lost(Ids taken) { return LaunchEnd{Ended::DeviceLost, kExitComm, taken, false, false}; }
LaunchEnd stopped_when_asked() { return LaunchEnd{Ended::AllOk, kExitOk, {}, true, false}; }

RestartState fresh(Ids planned_without = {}, Ids out = {}) {
  return RestartState{0, 10, planned_without, out};
}

// Two nodes of four devices: ids 0-3 on node 0, 4-7 on node 1.
ClusterSpec two_nodes() {
  ClusterSpec c;
  c.nodes = {NodeSpec{"cpu", 4}, NodeSpec{"cpu", 4}};
  return c;
}

TEST(RestartDecision, LostDeviceIsPlannedWithout) {
  const Decision d = decide_restart(lost({2}), fresh());
  EXPECT_EQ(d.action, Action::Restart);
  EXPECT_EQ(d.why, Why::DeviceLost);
  EXPECT_EQ(d.restart, 1);
  EXPECT_EQ(d.taken, Ids({2}));
  EXPECT_EQ(d.lost, Ids({2}));
  EXPECT_EQ(d.change.gone, Ids({2}));
  EXPECT_TRUE(d.change.back.empty());
}

TEST(RestartDecision, ALossAddsToTheDevicesAlreadyOut) {
  RestartState s = fresh({5}, {5, 6});  // 6 was listed in the file while the run went
  s.restarts = 3;
  const Decision d = decide_restart(lost({2}), s);
  EXPECT_EQ(d.action, Action::Restart);
  EXPECT_EQ(d.restart, 4);
  EXPECT_EQ(d.lost, Ids({2, 5, 6}));
  EXPECT_EQ(d.change.gone, Ids({2, 6}));
  EXPECT_TRUE(d.change.back.empty());
}

TEST(RestartDecision, ALossWithNoDeviceNamedRestartsOnTheSameDevices) {
  const Decision d = decide_restart(lost({}), fresh({1}, {1}));
  EXPECT_EQ(d.action, Action::Restart);
  EXPECT_EQ(d.lost, Ids({1}));
  EXPECT_EQ(d.change, DeviceChange{});
}

TEST(RestartDecision, RanksOwnErrorGivesUpWithItsCode) {
  for (int code : {kExitInput, kExitInternal}) {
    const Decision d = decide_restart(LaunchEnd{Ended::OwnError, code, {3}, false, false},
                                      fresh());
    EXPECT_EQ(d.action, Action::GiveUp) << code;
    EXPECT_EQ(d.why, Why::OwnError);
    EXPECT_EQ(d.exit_code, code);
    EXPECT_TRUE(d.taken.empty());  // nothing is recorded as lost
  }
}

TEST(RestartDecision, InterruptStopsWithItsCodeEvenWithRestartsLeftOrStepsDone) {
  for (int code : {kExitSigint, kExitSigterm}) {
    for (bool done : {false, true}) {
      const Decision d =
          decide_restart(LaunchEnd{Ended::Interrupted, code, {1}, true, done}, fresh());
      EXPECT_EQ(d.action, Action::Interrupted);
      EXPECT_EQ(d.exit_code, code);
      EXPECT_TRUE(d.taken.empty());
    }
  }
}

TEST(RestartDecision, RestartLimitGivesUpButStillRecordsTheLoss) {
  RestartState s = fresh({}, {});
  s.restarts = s.max_restarts = 2;
  EXPECT_FALSE(may_restart(s));
  const Decision d = decide_restart(lost({7}), s);
  EXPECT_EQ(d.action, Action::GiveUp);
  EXPECT_EQ(d.why, Why::RestartLimit);
  EXPECT_EQ(d.exit_code, kExitComm);
  EXPECT_EQ(d.taken, Ids({7}));
  // A run stopped to take a device change failed nothing itself: it gives up as a lost rank.
  const Decision c = decide_restart(stopped_when_asked(), s);
  EXPECT_EQ(c.action, Action::GiveUp);
  EXPECT_EQ(c.exit_code, kExitComm);
  // --max-restarts 0: the first loss already gives up; one below the limit still restarts.
  EXPECT_EQ(decide_restart(lost({1}), RestartState{0, 0, {}, {}}).action, Action::GiveUp);
  EXPECT_EQ(decide_restart(lost({1}), RestartState{1, 2, {}, {}}).action, Action::Restart);
  EXPECT_TRUE(may_restart(RestartState{1, 2, {}, {}}));
}

TEST(RestartDecision, DevicesRemovedFromTheLostDevicesFileComeBack) {
  const ClusterSpec full = two_nodes();
  // The plan was made without node 1 and device 2; the person then deleted the "4-7" line.
  const Ids before = parse_lost_devices("4-7  # node 1 serviced\n2\n", "lost.txt", full);
  const Ids now = parse_lost_devices("2\n", "lost.txt", full);
  const Decision d = decide_restart(stopped_when_asked(), fresh(before, now));
  EXPECT_EQ(d.action, Action::Restart);
  EXPECT_EQ(d.why, Why::DevicesChanged);
  EXPECT_EQ(d.lost, Ids({2}));
  EXPECT_EQ(d.change.back, Ids({4, 5, 6, 7}));
  EXPECT_TRUE(d.change.gone.empty());
  EXPECT_TRUE(d.taken.empty());
  // Back and gone at once: 4-7 back, 0 listed instead.
  const Decision both = decide_restart(stopped_when_asked(), fresh(before, Ids{0, 2}));
  EXPECT_EQ(both.change.back, Ids({4, 5, 6, 7}));
  EXPECT_EQ(both.change.gone, Ids({0}));
}

TEST(RestartDecision, StepsDoneFinishesAndAnUnaskedEarlyEndIsABug) {
  EXPECT_EQ(decide_restart(LaunchEnd{Ended::AllOk, 0, {}, false, true}, fresh()).action,
            Action::Finish);
  EXPECT_EQ(decide_restart(LaunchEnd{Ended::AllOk, 0, {}, true, true}, fresh()).action,
            Action::Finish);
  const Decision d = decide_restart(LaunchEnd{Ended::AllOk, 0, {}, false, false}, fresh());
  EXPECT_EQ(d.action, Action::GiveUp);
  EXPECT_EQ(d.why, Why::EndedUnasked);
  EXPECT_EQ(d.exit_code, kExitInternal);
}

TEST(RestartDecision, DeviceChangeIsTheSetDifferenceBothWays) {
  EXPECT_EQ(device_change({1, 2, 3}, {3, 4}), (DeviceChange{{1, 2}, {4}}));
  EXPECT_EQ(device_change({}, {}), DeviceChange{});
}

TEST(DevicesTaken, AHostTakesItsNodeElseTheRankTakesItsDevice) {
  const ClusterSpec full = two_nodes();
  const std::vector<std::string> hosts{"hostA", "hostB"};
  LaunchOutcome o;
  o.lost_host = "hostB";
  o.lost_device = 5;
  EXPECT_EQ(devices_taken(o, full, hosts), Ids({4, 5, 6, 7}));
  o.lost_host = "hostC";  // not one of the run's hosts: the rank's device
  EXPECT_EQ(devices_taken(o, full, hosts), Ids({5}));
  o.lost_host.clear();
  EXPECT_EQ(devices_taken(o, full, {}), Ids({5}));
  o.lost_device = -1;
  EXPECT_TRUE(devices_taken(o, full, hosts).empty());
}

}  // namespace
}  // namespace eth
