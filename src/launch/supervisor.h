// `eth launch` as a parent of mpirun rather than mpirun itself: it runs mpirun as a child, passes
// its output on, and returns how the run ended (outcome.h) with ETH's exit codes and the rank
// named:
//   - a rank that dies (SIGKILL, a crash) or exits without reporting an error: exit 4, naming
//     the rank and the device (and pipeline, stage, device type) the plan gave it;
//   - SIGINT or SIGTERM to eth launch: forwarded to mpirun, which stops every rank; the outcome
//     says it was interrupted, exit 130 or 143;
//   - a rank that reported its own error (exit 2, 3 or 4 through MPI_Abort): that code.
// Checkpoints are written atomically, so an interrupted run leaves the last one whole; the
// temporaries of a write cut short are removed. Kept apart from mpirun.h (the command line) so
// the two change independently.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "launch/outcome.h"

namespace eth {

struct SuperviseHooks {
  // Called about every `poll_interval` while mpirun runs (eth launch --elastic watches its files
  // from here); it must not block.
  std::function<void()> on_poll;
  std::chrono::milliseconds poll_interval{100};
  // Where mpirun's stderr (its own messages and every rank's) is passed on as it comes; nullptr:
  // read for the outcome only.
  std::ostream* echo = nullptr;
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

}  // namespace eth
