// Fault injection for the tests and benches of what a failure does to a distributed run (a dead
// rank, a rank that stops answering, a rank lost while a checkpoint is written), driven by
// ETH_TEST_KILL_RANK on every rank of `eth train --plan`:
//   ETH_TEST_KILL_RANK=FAULT[,FAULT...]   FAULT = R:S[:HOW][@N]
// Rank R fails when it is about to take step S (HOW = exit: exits abruptly with code 9, no
// clean-up, as a crash would; kill: SIGKILL, as `kill -9` or the OOM killer; stop: SIGSTOP, a
// rank that stops answering), or, with HOW = checkpoint, dies of SIGKILL while the checkpoint of
// step S is being written (rank 0 after writing part of the file's temporary; another rank
// before sending its units, so rank 0 waits mid-checkpoint). HOW = hold is no failure: the rank
// waits before step S until the run's --stop-file exists (at most 60 s), so a test can change a
// run's devices while it is known to be running (eth launch --elastic creates that file when it
// sees the change). @N: only in a run of N ranks, so a
// fault fires once in an elastic run whose later plans have fewer ranks. Before it fails the rank
// prints "[fault] ... at monotonic T s" (the system-wide monotonic clock), from which
// `eth launch --elastic` measures how long detection took.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string_view>
#include <vector>

namespace eth {

// One FAULT of ETH_TEST_KILL_RANK, parsed.
enum class FaultHow : std::uint8_t { Exit, Kill, Stop, Checkpoint, Hold };
struct FaultSpec {
  int rank = -1;
  std::int64_t step = -1;
  FaultHow how = FaultHow::Exit;
  int ranks = 0;  // 0: a run of any size
  bool operator==(const FaultSpec&) const = default;
};

// The faults of the variable's value `value`, in order ("" has none). Throws InputError naming
// ETH_TEST_KILL_RANK for a malformed one: a test whose fault never fires would pass for the
// wrong reason.
std::vector<FaultSpec> parse_fault_specs(std::string_view value);

// The first of `faults` that fires on `rank` of a run of `ranks` before step `step` (or, with
// `in_checkpoint`, while the checkpoint of step `step` is written); nullptr when none does.
const FaultSpec* find_fault(const std::vector<FaultSpec>& faults, int rank, int ranks,
                            std::int64_t step, bool in_checkpoint);

// Before step `step` on rank `rank` of `ranks`; `stop_file`: eth train's --stop-file (may be
// empty), for hold.
void maybe_fail_before_step(int rank, int ranks, std::int64_t step,
                            const std::filesystem::path& stop_file);
// Before the checkpoint of `step` (steps done) into `dir`.
void maybe_fail_in_checkpoint(int rank, int ranks, std::int64_t step,
                              const std::filesystem::path& dir);

}  // namespace eth
