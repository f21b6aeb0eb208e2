// eth launch's supervision of mpirun (launch_supervisor.h): fork + exec with mpirun's stderr on a
// pipe, a self-pipe that wakes the loop when SIGINT or SIGTERM arrives, and the mapping of the
// outcome to exit codes.
#include "cli/launch_supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <regex>

#include "cli/command.h"
#include "core/error.h"
#include "train/checkpoint.h"

namespace eth::cli {

namespace {

volatile std::sig_atomic_t g_signal = 0;        // the last of SIGINT/SIGTERM received
volatile std::sig_atomic_t g_signal_count = 0;  // how many were received
int g_wake_fd = -1;                             // write end of the self-pipe

extern "C" void on_signal(int sig) {
  g_signal = sig;
  g_signal_count = g_signal_count + 1;
  const int saved = errno;
  if (g_wake_fd >= 0) {
    const char b = 1;
    [[maybe_unused]] const ssize_t n = ::write(g_wake_fd, &b, 1);
  }
  errno = saved;
}

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

void write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // our stderr is gone: nothing better to do with mpirun's output
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

// Restores the previous SIGINT/SIGTERM handlers and closes the self-pipe on every exit path.
struct SignalScope {
  struct sigaction old_int {}, old_term {};
  int wake[2] = {-1, -1};
  SignalScope() {
    if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) wake[0] = wake[1] = -1;
    g_signal = 0;
    g_signal_count = 0;
    g_wake_fd = wake[1];
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: poll() returns at once
    ::sigaction(SIGINT, &sa, &old_int);
    ::sigaction(SIGTERM, &sa, &old_term);
  }
  ~SignalScope() {
    ::sigaction(SIGINT, &old_int, nullptr);
    ::sigaction(SIGTERM, &old_term, nullptr);
    g_wake_fd = -1;
    for (int fd : wake) {
      if (fd >= 0) ::close(fd);
    }
  }
};

// What was lost, as MpirunMessages read it: a host lost whole, else the rank that died on a
// signal, exited on its own without a word, or that another rank waited for past --timeout.
LaunchOutcome lost_of(const MpirunMessages& m, const std::vector<LaunchRank>& ranks) {
  LaunchOutcome out;
  out.lost_host = m.lost_host;
  if (m.signal_rank >= 0) {
    out.lost_rank = m.signal_rank;
    out.lost_cause = std::string("killed by ") + signal_name(m.signal) + " (signal " +
                     std::to_string(m.signal) + ")";
  } else if (m.exit_rank >= 0 && m.exit_code != kExitInput && m.exit_code != kExitInternal &&
             m.exit_code != kExitComm) {
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

// AtomicFile's temporaries are ".<name>.tmp-<pid>-<n>".
std::string checkpoint_report(const std::filesystem::path& dir) {
  if (dir.empty()) return "";
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return "; no checkpoint was written";
  std::vector<std::filesystem::path> temporaries;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.starts_with(".step_") && name.find(".safetensors.tmp-") != std::string::npos) {
      temporaries.push_back(it->path());
    }
  }
  for (const auto& t : temporaries) std::filesystem::remove(t, ec);
  const auto latest = latest_checkpoint(dir);
  if (!latest) return "; no checkpoint was written";
  try {
    const CheckpointMeta meta = read_checkpoint_meta(*latest);
    return "; the last checkpoint, " + latest->string() + " (step " + std::to_string(meta.step) +
           "), is whole: --resume " + dir.string() + " continues from it";
  } catch (const InputError& e) {
    return "; the newest checkpoint does not read back: " + std::string(e.what());
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

LaunchOutcome supervise_launch(const std::vector<std::string>& argv,
                               const std::vector<LaunchRank>& ranks,
                               const std::filesystem::path& checkpoint_dir,
                               const SuperviseHooks& hooks) {
  ETH_CHECK(!argv.empty(), "supervise_launch: empty command line");
  int err_pipe[2], exec_pipe[2];
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  if (::pipe2(exec_pipe, O_CLOEXEC) != 0) {
    ::close(err_pipe[0]);
    ::close(err_pipe[1]);
    throw std::runtime_error("pipe2 failed");
  }
  std::vector<char*> cargv;
  for (const auto& s : argv) cargv.push_back(const_cast<char*>(s.c_str()));
  cargv.push_back(nullptr);
  SignalScope signals;
  std::cout.flush();
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child == 0) {
    // mpirun gets the dispositions eth launch was started with; its stderr is our pipe.
    ::sigaction(SIGINT, &signals.old_int, nullptr);
    ::sigaction(SIGTERM, &signals.old_term, nullptr);
    ::dup2(err_pipe[1], STDERR_FILENO);
    ::execvp(cargv[0], cargv.data());
    const int err = errno;
    [[maybe_unused]] const ssize_t n = ::write(exec_pipe[1], &err, sizeof err);
    ::_exit(127);
  }
  ::close(err_pipe[1]);
  ::close(exec_pipe[1]);
  if (child < 0) {
    ::close(err_pipe[0]);
    ::close(exec_pipe[0]);
    throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  }
  int exec_errno = 0;
  const ssize_t got = ::read(exec_pipe[0], &exec_errno, sizeof exec_errno);
  ::close(exec_pipe[0]);
  if (got == static_cast<ssize_t>(sizeof exec_errno)) {
    ::close(err_pipe[0]);
    int status = 0;
    ::waitpid(child, &status, 0);
    throw InputError("launch", "--mpirun", "",
                     "cannot start " + argv[0] + ": " + std::strerror(exec_errno) +
                         " (install openmpi-bin, or scripts/install-deps.sh does)");
  }

  MpirunMessages messages;
  std::string line;
  int forwarded = 0, interrupted = 0;
  int status = 0;
  bool exited = false, eof = false;
  std::chrono::steady_clock::time_point drain_until{};
  std::optional<std::chrono::steady_clock::time_point> failed_at;
  char buf[4096];
  const int poll_ms = static_cast<int>(std::max<std::int64_t>(1, hooks.poll_interval.count()));
  while (!(exited && (eof || std::chrono::steady_clock::now() > drain_until))) {
    pollfd fds[2] = {{err_pipe[0], static_cast<short>(eof ? 0 : POLLIN), 0},
                     {signals.wake[0], POLLIN, 0}};
    ::poll(fds, 2, poll_ms);
    if (hooks.on_poll && !exited) hooks.on_poll();
    if (signals.wake[0] >= 0) {
      while (::read(signals.wake[0], buf, sizeof buf) > 0) {
      }
    }
    // Every SIGINT/SIGTERM goes on to mpirun, which stops every rank (SIGTERM, then SIGKILL).
    for (const int n = g_signal_count; forwarded < n; ++forwarded) {
      interrupted = g_signal;
      ::kill(child, interrupted);
    }
    if (!eof && (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      const ssize_t n = ::read(err_pipe[0], buf, sizeof buf);
      if (n > 0) {
        write_all(STDERR_FILENO, buf, static_cast<std::size_t>(n));
        for (ssize_t i = 0; i < n; ++i) {
          if (buf[i] == '\n') {
            messages.feed(line);
            line.clear();
            if (!failed_at && messages.failure_seen()) failed_at = std::chrono::steady_clock::now();
          } else if (line.size() < 4096) {
            line += buf[i];
          }
        }
      } else if (n == 0 || errno != EINTR) {
        eof = true;
      }
    }
    if (!exited) {
      const pid_t w = ::waitpid(child, &status, WNOHANG);
      if (w == child) {
        exited = true;
        // A rank that outlived mpirun may hold the pipe: read what is there, then stop.
        drain_until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      }
    }
  }
  ::close(err_pipe[0]);
  if (!line.empty()) messages.feed(line);

  LaunchOutcome out = lost_of(messages, ranks);
  out.ended = std::chrono::steady_clock::now();
  out.failed_at = failed_at;
  if (messages.fault_monotonic_s) {
    out.failed_at = std::chrono::steady_clock::time_point(
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::duration<double>(*messages.fault_monotonic_s)));
  }
  out.interrupted = interrupted;
  const int n = static_cast<int>(ranks.size());
  const std::string all = n > 0 ? "all " + std::to_string(n) + " ranks" : "every rank";
  if (interrupted != 0) {
    out.exit_code = interrupted == SIGINT ? kExitSigint : kExitSigterm;
    out.message = std::string("eth launch: interrupted by ") + signal_name(interrupted) +
                  ": stopped " + all + checkpoint_report(checkpoint_dir);
    return out;
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == 0) {
    out.lost_rank = -1, out.lost_device = -1, out.lost_cause.clear(), out.lost_host.clear();
    return out;
  }
  if (messages.signal_rank >= 0) {
    out.exit_code = kExitComm;
    out.message = "error: [launch] " + describe_rank(ranks, messages.signal_rank) +
                  " died: killed by " + signal_name(messages.signal) + " (signal " +
                  std::to_string(messages.signal) + "); mpirun stopped the other ranks" +
                  checkpoint_report(checkpoint_dir);
    return out;
  }
  // A rank that reported its own error aborted the job with that code (2, 3 or 4); its message
  // is already printed.
  const bool own_code = code == kExitInput || code == kExitInternal || code == kExitComm;
  if (messages.exit_rank >= 0 && !(own_code && messages.exit_code == code)) {
    out.exit_code = kExitComm;
    out.message = "error: [launch] " + describe_rank(ranks, messages.exit_rank) +
                  " exited with code " + std::to_string(messages.exit_code) +
                  " without reporting an error; mpirun stopped the other ranks" +
                  checkpoint_report(checkpoint_dir);
    return out;
  }
  if (own_code) {
    out.exit_code = code;
    const std::string report = checkpoint_report(checkpoint_dir);
    if (!report.empty()) out.message = "eth launch: the run stopped" + report;
    return out;
  }
  out.exit_code = kExitComm;
  out.message = "error: [launch] the run ended abnormally (mpirun " +
                (WIFSIGNALED(status)
                     ? std::string("killed by ") + signal_name(WTERMSIG(status))
                     : "exited with code " + std::to_string(code)) +
                "); see mpirun's message above" + checkpoint_report(checkpoint_dir);
  return out;
}

}  // namespace eth::cli
