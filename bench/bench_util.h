// Small pieces several bench programs need: running a shell command with its stdout captured,
// and the median of a set of timings.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace eth::bench {

// Runs `cmd` through the shell with its stdout in a file of this process's own (removed after)
// and returns its exit status (-1 when a signal ended it); the output goes to *out when given.
inline int run_capture(const std::string& cmd, std::string* out = nullptr) {
  const std::filesystem::path tmp = std::filesystem::temp_directory_path() /
                                    ("eth_bench_stdout_" + std::to_string(::getpid()));
  const int status = std::system((cmd + " >" + tmp.string()).c_str());
  if (out) {
    std::ifstream in(tmp);
    std::stringstream ss;
    ss << in.rdbuf();
    *out = ss.str();
  }
  std::filesystem::remove(tmp);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The middle value, or the mean of the two middle ones for an even count; 0 for none.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace eth::bench
