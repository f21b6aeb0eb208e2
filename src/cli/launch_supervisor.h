// `eth launch` as a parent of mpirun rather than mpirun itself: it runs mpirun as a child, passes
// its output through, and turns the way the run ended into ETH's exit codes with the rank named:
//   - a rank that dies (SIGKILL, a crash) or exits without reporting an error: exit 4, naming
//     the rank and the device (and pipeline, stage, device type) the plan gave it;
//   - SIGINT or SIGTERM to eth launch: forwarded to mpirun, which stops every rank; eth launch
//     says it was interrupted and exits 130 or 143;
//   - a rank that reported its own error (exit 2, 3 or 4 through MPI_Abort): that code.
// Checkpoints are written atomically, so an interrupted run leaves the last one whole; the
// temporaries of a write cut short are removed. Kept apart from comm/mpirun.h (the command
// line) so the two change independently.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "plan/plan.h"

namespace eth::cli {

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

struct LaunchOutcome {
  using TimePoint = std::chrono::steady_clock::time_point;
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
  TimePoint ended{};
};

struct SuperviseHooks {
  // Called about every `poll_interval` while mpirun runs (eth launch --elastic watches its files
  // from here); it must not block.
  std::function<void()> on_poll;
  std::chrono::milliseconds poll_interval{100};
};

// Runs `argv` (mpirun and its arguments) as a child and waits for it, forwarding SIGINT and
// SIGTERM. `checkpoint_dir` (may be empty) is where the ranks write checkpoints. Throws
// InputError("launch", "--mpirun", ...) when mpirun cannot be started.
LaunchOutcome supervise_launch(const std::vector<std::string>& argv,
                               const std::vector<LaunchRank>& ranks,
                               const std::filesystem::path& checkpoint_dir,
                               const SuperviseHooks& hooks = {});

// Removes what checkpoint writes cut short left in `dir` (AtomicFile's temporaries) and says
// which checkpoint is the newest that reads back: "; the last checkpoint, FILE (step K), is
// whole: --resume DIR continues from it" ("" for an empty `dir`).
std::string checkpoint_report(const std::filesystem::path& dir);

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
  // ETH_TEST_KILL_RANK's "[fault] ... at monotonic T s" (cli/fault_injection.h), seconds.
  std::optional<double> fault_monotonic_s;
  // Whether any line so far reported a failure.
  bool failure_seen() const;

 private:
  int pending_rank_ = -1;  // "Process name" seen, "Exit code" not yet
};

}  // namespace eth::cli
