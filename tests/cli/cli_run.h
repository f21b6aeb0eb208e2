// Running the built `eth` as a user would, for the CLI tests: through bash, with stdout and
// stderr captured apart and a liveness bound (a command still running after `limit_s` is killed
// and shows as exit 137; the bound is generous and says nothing about speed). Test-only.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "test_util.h"

namespace eth::test {

struct EthRun {
  int code = -1;  // exit status; 128 + n when a signal ended it (as bash reports)
  std::string out, err;
};

// `eth <args>`; `prefix` runs first in the same shell (ulimit, trap, exports); stdout goes to
// `stdout_to` when given (e.g. /dev/full) instead of being captured.
inline EthRun eth_cli(const std::string& args, const std::filesystem::path& dir,
                      const std::string& prefix = "", int limit_s = 120,
                      const std::string& stdout_to = "") {
  const auto out = dir / "cli.stdout", err = dir / "cli.stderr";
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  const std::string script = prefix + (prefix.empty() ? "" : "; ") +
                             "OMP_NUM_THREADS=1 exec timeout -s KILL " + std::to_string(limit_s) +
                             " '" + std::string(ETH_BINARY) + "' " + args + " >" +
                             (stdout_to.empty() ? "'" + out.string() + "'" : stdout_to) + " 2>'" +
                             err.string() + "'";
  const auto file = dir / "cli.sh";
  write(file, script + "\n");
  const std::string cmd = "bash '" + file.string() + "'";
  const int status = std::system(cmd.c_str());
  EthRun r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

}  // namespace eth::test
