// The typed end of a launch (outcome.h): mpirun's messages read line by line, and the outcome
// with its exit code and the rank named.
#include "launch/outcome.h"

#include <csignal>
#include <map>
#include <regex>

#include "core/exit_codes.h"

namespace eth {

namespace {

// What was lost, as MpirunMessages read it: a host lost whole, else the rank that died on a
// signal, exited on its own without a word, or that another rank waited for past --timeout.
LaunchOutcome lost_of(const MpirunMessages& m, const std::vector<LaunchRank>& ranks) {
  LaunchOutcome out;
  out.lost_host = m.lost_host;
  if (m.signal_rank >= 0) {
    out.lost_rank = m.signal_rank;
    out.lost_cause = std::string("killed by ") + signal_name(m.signal) + " (signal " +
                     std::to_string(m.signal) + ")";
  } else if (m.exit_rank >= 0 && !is_reported_code(m.exit_code)) {
    out.lost_rank = m.exit_rank;
    out.lost_cause = "exited with code " + std::to_string(m.exit_code);
  } else if (m.timeout_rank >= 0) {
    out.lost_rank = m.timeout_rank;
    out.lost_cause = "stopped answering (rank " + std::to_string(m.timeout_waiter) +
                     " waited " + m.timeout_seconds + " s for it)";
  }
  if (out.lost_rank >= 0 && static_cast<std::size_t>(out.lost_rank) < ranks.size()) {
    out.lost_device = ranks[static_cast<std::size_t>(out.lost_rank)].device;
  }
  return out;
}

}  // namespace

const char* signal_name(int sig) {
  switch (sig) {
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    default: return "a signal";
  }
}

void MpirunMessages::feed(const std::string& line) {
  static const std::regex died(
      R"(process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+))");
  static const std::regex name(R"(Process name:\s*\[\[\d+,\d+\],(\d+)\])");
  static const std::regex code(R"(Exit code:\s*(-?\d+))");
  // comm/communicator.h timeout_message; Open MPI, ssh and scripts/netns-agent naming a host.
  static const std::regex timeout(R"(\(world rank (\d+)\): .* timed out after ([0-9.]+) s )"
                                  R"(waiting for rank \d+ \(world rank (\d+)\))");
  static const std::regex host(R"((?:Remote daemon: \S+ on node |netns-agent: lost host |)"
                               R"(netns-agent: host "|ssh: connect to host |)"
                               R"(ssh: Could not resolve hostname )([A-Za-z0-9._-]+))");
  static const std::regex fault(R"(^\[fault\] .* at monotonic ([0-9.]+) s)");
  std::smatch m;
  if (timeout_rank < 0 && std::regex_search(line, m, timeout)) {
    timeout_waiter = std::stoi(m[1]);
    timeout_seconds = m[2];
    timeout_rank = std::stoi(m[3]);
    return;
  }
  if (lost_host.empty() && std::regex_search(line, m, host)) {
    lost_host = m[1];
    return;
  }
  if (!fault_monotonic_s && std::regex_search(line, m, fault)) {
    fault_monotonic_s = std::stod(m[1]);
    return;
  }
  if (signal_rank < 0 && std::regex_search(line, m, died)) {
    signal_rank = std::stoi(m[1]);
    signal = std::stoi(m[2]);
  } else if (std::regex_search(line, m, name)) {
    pending_rank_ = std::stoi(m[1]);
  } else if (pending_rank_ >= 0 && std::regex_search(line, m, code)) {
    if (exit_rank < 0) {
      exit_rank = pending_rank_;
      exit_code = std::stoi(m[1]);
    }
    pending_rank_ = -1;
  }
}

bool MpirunMessages::failure_seen() const {
  return signal_rank >= 0 || exit_rank >= 0 || timeout_rank >= 0 || !lost_host.empty() ||
         fault_monotonic_s.has_value();
}

std::vector<LaunchRank> launch_ranks(const Plan& plan) {
  std::map<std::int64_t, LaunchRank> by_device;
  for (std::size_t p = 0; p < plan.pipelines.size(); ++p) {
    const auto& stages = plan.pipelines[p].stages;
    for (std::size_t s = 0; s < stages.size(); ++s) {
      for (std::int64_t d : stages[s].devices) {
        LaunchRank r;
        r.device = d;
        r.device_type = stages[s].device_type;
        r.pipeline = static_cast<std::int64_t>(p);
        r.stage = static_cast<std::int64_t>(s);
        if (!by_device.emplace(d, r).second) return {};
      }
    }
  }
  std::vector<LaunchRank> out;
  for (auto& [d, r] : by_device) {
    r.rank = static_cast<int>(out.size());
    out.push_back(r);
  }
  return out;
}

std::string describe_rank(const std::vector<LaunchRank>& ranks, int rank) {
  std::string s = "rank " + std::to_string(rank);
  if (rank < 0 || static_cast<std::size_t>(rank) >= ranks.size()) return s;
  const LaunchRank& r = ranks[static_cast<std::size_t>(rank)];
  s += " (device " + std::to_string(r.device) + ", " + r.device_type + ", pipeline " +
       std::to_string(r.pipeline) + " stage " + std::to_string(r.stage);
  if (!r.host.empty()) s += ", host " + r.host;
  return s + ")";
}


Ended ended_of(int exit_code) {
  switch (exit_code) {
    case kExitOk: return Ended::AllOk;
    case kExitInput:
    case kExitInternal: return Ended::OwnError;
    case kExitSigint:
    case kExitSigterm: return Ended::Interrupted;
    default: return Ended::DeviceLost;
  }
}

bool is_reported_code(int code) {
  return code == kExitInput || code == kExitInternal || code == kExitComm;
}

namespace {

// The exit code and message of a launch that did not end well, from mpirun's own end and what
// it printed.
void explain_failure(const MpirunMessages& m, const MpirunExit& exit,
                     const std::vector<LaunchRank>& ranks,
                     const std::function<std::string()>& report, LaunchOutcome& out) {
  if (exit.interrupted != 0) {
    const int n = static_cast<int>(ranks.size());
    const std::string all = n > 0 ? "all " + std::to_string(n) + " ranks" : "every rank";
    out.exit_code = exit.interrupted == SIGINT ? kExitSigint : kExitSigterm;
    out.message = std::string("eth launch: interrupted by ") + signal_name(exit.interrupted) +
                  ": stopped " + all + report();
    return;
  }
  out.exit_code = kExitComm;
  if (m.signal_rank >= 0) {
    out.message = "error: [launch] " + describe_rank(ranks, m.signal_rank) +
                  " died: killed by " + signal_name(m.signal) + " (signal " +
                  std::to_string(m.signal) + "); mpirun stopped the other ranks" + report();
    return;
  }
  // A rank that reported its own error aborted the job with that code (2, 3 or 4); its message
  // is already printed.
  const bool own_code = is_reported_code(exit.code);
  if (m.exit_rank >= 0 && !(own_code && m.exit_code == exit.code)) {
    out.message = "error: [launch] " + describe_rank(ranks, m.exit_rank) + " exited with code " +
                  std::to_string(m.exit_code) +
                  " without reporting an error; mpirun stopped the other ranks" + report();
    return;
  }
  if (own_code) {
    out.exit_code = exit.code;
    const std::string r = report();
    if (!r.empty()) out.message = "eth launch: the run stopped" + r;
    return;
  }
  out.message = "error: [launch] the run ended abnormally (mpirun " +
                (exit.signal != 0 ? std::string("killed by ") + signal_name(exit.signal)
                                  : "exited with code " + std::to_string(exit.code)) +
                "); see mpirun's message above" + report();
}

}  // namespace

LaunchOutcome outcome_of(const MpirunMessages& m, const MpirunExit& exit,
                         const std::vector<LaunchRank>& ranks,
                         const std::function<std::string()>& report) {
  LaunchOutcome out = lost_of(m, ranks);
  out.interrupted = exit.interrupted;
  if (exit.interrupted == 0 && exit.code == 0) {
    out.lost_rank = -1, out.lost_device = -1, out.lost_cause.clear(), out.lost_host.clear();
  } else {
    explain_failure(m, exit, ranks, report, out);
  }
  out.ended = ended_of(out.exit_code);
  return out;
}

}  // namespace eth
