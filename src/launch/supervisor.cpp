// eth launch's supervision of mpirun (supervisor.h): fork + exec with mpirun's stderr on a pipe,
// and a self-pipe that wakes the loop when SIGINT or SIGTERM arrives; outcome.h reads the end.
#include "launch/supervisor.h"

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

#include "core/error.h"
#include "train/checkpoint.h"

namespace eth {

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
        if (hooks.echo != nullptr) hooks.echo->write(buf, n).flush();
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

  MpirunExit end;
  end.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  end.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  end.interrupted = interrupted;
  LaunchOutcome out =
      outcome_of(messages, end, ranks, [&] { return checkpoint_report(checkpoint_dir); });
  out.ended_at = std::chrono::steady_clock::now();
  out.failed_at = failed_at;
  if (messages.fault_monotonic_s) {
    out.failed_at = std::chrono::steady_clock::time_point(
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::duration<double>(*messages.fault_monotonic_s)));
  }
  return out;
}

}  // namespace eth
