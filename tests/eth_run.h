// Running the built `eth` from a test as a user would from a shell: the one place that knows the
// binary's path and the environment every run gets (one OpenMP thread, mpirun allowed as root).
// Only tests declared eth_test(... USES_CLI) link it, and its library depends on the `eth`
// target, so a test that runs the tool always runs a fresh one. Test-only.
#pragma once

#include <filesystem>
#include <string>

namespace eth::test {

struct EthRun {
  int code = -1;  // exit status; 128 + n when signal n ended it (as bash reports)
  std::string out, err;
  // For checks that look for a message wherever the tool wrote it.
  std::string out_and_err() const { return out + err; }
};

// The built tool's path.
std::string eth_binary();

// `eth <args>` through bash, stdout and stderr captured apart: through <dir>/eth.stdout and
// <dir>/eth.stderr, which stay until the next run in `dir` (`dir` empty: a scratch folder of
// this process). `prefix` runs first in the same shell (ulimit,
// trap, `export NAME=value`). Past `limit_s` the tool is killed (exit 137): a liveness bound,
// generous, that says nothing about speed. `stdout_to` sends stdout there (say /dev/full)
// instead of capturing it.
EthRun eth_cli(const std::string& args, const std::filesystem::path& dir = {},
               const std::string& prefix = "", int limit_s = 600,
               const std::string& stdout_to = "");

// The same for a whole shell command line that starts the tool itself (say through mpirun);
// `eth_binary()` gives its path.
EthRun eth_shell(const std::string& command, const std::filesystem::path& dir = {},
                 const std::string& prefix = "", int limit_s = 600,
                 const std::string& stdout_to = "");

}  // namespace eth::test
