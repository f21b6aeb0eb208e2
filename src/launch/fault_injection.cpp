// ETH_TEST_KILL_RANK (fault_injection.h). Malformed specs are an InputError naming the variable:
// a test whose fault never fires would pass for the wrong reason.
#include "launch/fault_injection.h"

#include <unistd.h>

#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "train/checkpoint.h"

namespace eth {

namespace {

template <class T>
bool parse_number(std::string_view s, T& out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size() && out >= 0;
}

std::optional<FaultSpec> parse_fault(std::string_view f) {
  FaultSpec out;
  if (const auto at = f.find('@'); at != std::string_view::npos) {
    if (!parse_number(f.substr(at + 1), out.ranks) || out.ranks < 1) return std::nullopt;
    f = f.substr(0, at);
  }
  const auto c1 = f.find(':');
  if (c1 == std::string_view::npos || !parse_number(f.substr(0, c1), out.rank)) return std::nullopt;
  f = f.substr(c1 + 1);
  const auto c2 = f.find(':');
  if (!parse_number(f.substr(0, c2), out.step)) return std::nullopt;
  if (c2 == std::string_view::npos) return out;
  const std::string_view how = f.substr(c2 + 1);
  if (how == "exit") out.how = FaultHow::Exit;
  else if (how == "kill") out.how = FaultHow::Kill;
  else if (how == "stop") out.how = FaultHow::Stop;
  else if (how == "checkpoint") out.how = FaultHow::Checkpoint;
  else if (how == "hold") out.how = FaultHow::Hold;
  else return std::nullopt;
  return out;
}

const FaultSpec* fault_here(int rank, int ranks, std::int64_t step, bool in_checkpoint) {
  static const std::vector<FaultSpec> all = [] {
    const char* env = std::getenv("ETH_TEST_KILL_RANK");
    return env == nullptr ? std::vector<FaultSpec>{} : parse_fault_specs(env);
  }();
  return find_fault(all, rank, ranks, step, in_checkpoint);
}

void announce(int rank, std::int64_t step, const char* what) {
  const double t =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  std::fprintf(stderr, "[fault] ETH_TEST_KILL_RANK: rank %d %s at step %lld at monotonic %.6f s\n",
               rank, what, static_cast<long long>(step), t);
  std::fflush(stderr);
}

}  // namespace

std::vector<FaultSpec> parse_fault_specs(std::string_view value) {
  std::vector<FaultSpec> out;
  std::string_view rest = value;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const auto f = parse_fault(rest.substr(0, comma));
    if (!f) {
      throw InputError("env", "ETH_TEST_KILL_RANK", "",
                       "expected RANK:STEP[:exit|kill|stop|checkpoint|hold][@RANKS], comma-separated, "
                       "got \"" + std::string(value) + "\"");
    }
    out.push_back(*f);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  return out;
}

const FaultSpec* find_fault(const std::vector<FaultSpec>& faults, int rank, int ranks,
                            std::int64_t step, bool in_checkpoint) {
  for (const FaultSpec& f : faults) {
    if (f.rank == rank && f.step == step && (f.ranks == 0 || f.ranks == ranks) &&
        (f.how == FaultHow::Checkpoint) == in_checkpoint) {
      return &f;
    }
  }
  return nullptr;
}

void maybe_fail_before_step(int rank, int ranks, std::int64_t step,
                            const std::filesystem::path& stop_file) {
  const FaultSpec* f = fault_here(rank, ranks, step, false);
  if (f == nullptr) return;
  switch (f->how) {
    case FaultHow::Hold: {
      // Not a failure: no "[fault]" line, which eth launch would read as one.
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      std::error_code ec;
      while (!stop_file.empty() && !std::filesystem::exists(stop_file, ec) &&
             std::chrono::steady_clock::now() < until) {
        ::usleep(10000);
      }
      return;
    }
    case FaultHow::Kill:
      announce(rank, step, "dies of SIGKILL");
      ::raise(SIGKILL);
      break;
    case FaultHow::Stop:
      announce(rank, step, "stops answering (SIGSTOP)");
      ::raise(SIGSTOP);
      return;  // continued by someone else: carry on
    default:
      announce(rank, step, "exits abruptly");
      std::_Exit(9);
  }
}

void maybe_fail_in_checkpoint(int rank, int ranks, std::int64_t step,
                              const std::filesystem::path& dir) {
  if (fault_here(rank, ranks, step, true) == nullptr) return;
  if (rank == 0) {
    // What a write cut short leaves: the temporary sibling with the start of a checkpoint, never
    // the final name (AtomicFile renames only after everything is on disk).
    AtomicFile out(checkpoint_path(dir, step), "checkpoint");
    const std::uint64_t header_bytes = 1 << 20;
    out.write(&header_bytes, sizeof header_bytes);
    out.write(std::string_view(R"({"__metadata__": {"format": "eth-checkpoint", )"));
    announce(rank, step, "dies of SIGKILL while writing its checkpoint");
    // Here, while `out` is open: its destructor would remove the temporary a crash leaves.
    ::raise(SIGKILL);
  }
  announce(rank, step, "dies of SIGKILL while the checkpoint is being gathered");
  ::raise(SIGKILL);
}

}  // namespace eth
