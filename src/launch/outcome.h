// How one launch ended, typed: what mpirun and the ranks printed (MpirunMessages, fed line by
// line), read into a LaunchOutcome that says which way it ended (all ranks done, a device lost,
// a rank's own error, interrupted), the exit code and what was lost, with the rank named by the
// plan. Pure: no processes, no clock, no files (supervisor.h runs mpirun and feeds this; the
// elastic loop decides on the outcome in restart.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "plan/plan.h"

namespace eth {

// What the plan says about one rank, for messages.
struct LaunchRank {
  int rank = 0;
  std::int64_t device = 0;
  std::string device_type;
  std::int64_t pipeline = 0, stage = 0;
  std::string host;  // empty: this host
};

// Rank i runs the i-th device id of the plan in ascending order (runtime/placement.h). Never
// fails: a plan whose devices are not each in one stage gets an empty table (the ranks refuse
// such a plan themselves, by name).
std::vector<LaunchRank> launch_ranks(const Plan& plan);

// "rank 3 (device 3, cpu-slow, pipeline 1 stage 1)"
std::string describe_rank(const std::vector<LaunchRank>& ranks, int rank);

// The four ways a launch ends. The exit code says which (ended_of): the supervisor turns every
// failure that is not a rank's own report into kExitComm.
enum class Ended {
  AllOk,        // 0: every rank finished (or stopped when asked)
  DeviceLost,   // 4: a rank died, stopped answering, or its host went
  OwnError,     // 2 or 3: a rank reported bad input or a bug; another plan would meet it again
  Interrupted,  // 130 or 143: SIGINT or SIGTERM to eth launch
};
Ended ended_of(int exit_code);

// Whether a rank's exit code is one a rank chooses when it reports an error (2, 3, 4 through
// MPI_Abort, its message printed): any other non-zero code is a rank lost without a word.
bool is_reported_code(int code);

struct LaunchOutcome {
  using TimePoint = std::chrono::steady_clock::time_point;
  Ended ended = Ended::AllOk;
  int exit_code = 0;
  std::string message;  // printed by the caller when not empty
  // What was lost, as data (eth launch --elastic acts on it; `message` says it in words).
  int lost_rank = -1;               // the rank that died or stopped answering; -1: none known
  std::int64_t lost_device = -1;    // its device in `ranks` (-1: not in the table)
  std::string lost_cause;           // "killed by SIGKILL (signal 9)", "stopped answering ..."
  std::string lost_host;            // a host mpirun or its agent lost (every rank on it)
  int interrupted = 0;              // SIGINT or SIGTERM received by eth launch, else 0
  // When the failure first showed (the fault injection's own timestamp, else the first line of
  // mpirun's or a rank's report of it), and when mpirun had ended: the detection time.
  std::optional<TimePoint> failed_at;
  TimePoint ended_at{};
};

// What mpirun's messages say about how the run ended (Open MPI 4: "process rank 1 with PID ...
// exited on signal 9", "Process name: [[x,1],3]" + "Exit code: 9"). Fed line by line.
class MpirunMessages {
 public:
  void feed(const std::string& line);
  int signal_rank = -1, signal = 0;  // the first rank that died on a signal
  int exit_rank = -1, exit_code = 0;  // the first rank that exited non-zero on its own
  // A rank's bounded wait that expired ("... timed out after 2.000 s waiting for rank 1 (world
  // rank 1)"): the world rank waited for, who waited, and how long.
  int timeout_rank = -1, timeout_waiter = -1;
  std::string timeout_seconds;
  // A host lost as a whole: Open MPI's "Remote daemon: ... on node B", ssh's "connect to host B
  // port 22" or "Could not resolve hostname B", scripts/netns-agent's "lost host B" / "host "B"
  // is unreachable".
  std::string lost_host;
  // ETH_TEST_KILL_RANK's "[fault] ... at monotonic T s" (launch/fault_injection.h), seconds.
  std::optional<double> fault_monotonic_s;
  // Whether any line so far reported a failure.
  bool failure_seen() const;

 private:
  int pending_rank_ = -1;  // "Process name" seen, "Exit code" not yet
};

// How mpirun itself ended.
struct MpirunExit {
  int code = 0;          // its exit status; -1 when a signal ended it
  int signal = 0;        // that signal
  int interrupted = 0;   // SIGINT or SIGTERM eth launch received (and passed on), else 0
};

// The outcome of a launch whose mpirun ended as `exit` after printing `m`. `report` is called
// for the checkpoint sentence that ends a failure's message (supervisor.h checkpoint_report)
// only when the run failed or was interrupted. Times are left to the caller.
LaunchOutcome outcome_of(const MpirunMessages& m, const MpirunExit& exit,
                         const std::vector<LaunchRank>& ranks,
                         const std::function<std::string()>& report);

// "SIGKILL", ..., "a signal" for one without a name here.
const char* signal_name(int sig);

}  // namespace eth
