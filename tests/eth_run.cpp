#include "eth_run.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>

namespace eth::test {

namespace fs = std::filesystem;

namespace {

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::string quoted(const std::string& s) {
  std::string q = "'";
  for (const char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

std::string eth_binary() { return ETH_BINARY; }

EthRun eth_cli(const std::string& args, const fs::path& dir, const std::string& prefix, int limit_s,
               const std::string& stdout_to) {
  return eth_shell(quoted(eth_binary()) + " " + args, dir, prefix, limit_s, stdout_to);
}

EthRun eth_shell(const std::string& command, const fs::path& dir_in, const std::string& prefix,
                 int limit_s, const std::string& stdout_to) {
  fs::path dir = dir_in;
  if (dir.empty()) {
    dir = fs::temp_directory_path() / ("eth_run_" + std::to_string(::getpid()));
    fs::create_directories(dir);
  }
  const fs::path out = dir / "eth.stdout", err = dir / "eth.stderr", script = dir / "eth.sh";
  fs::remove(out);
  fs::remove(err);
  // mpirun refuses root without the two variables; one OpenMP thread per process keeps ranks
  // from oversubscribing the cores (the kernels' results do not depend on the thread count).
  // The prefix comes after these, so a test may change them.
  const std::string line =
      "export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1\n" +
      prefix + (prefix.empty() ? "" : "\n") + "exec timeout -s KILL " + std::to_string(limit_s) +
      " " + command + " >" + (stdout_to.empty() ? quoted(out.string()) : stdout_to) + " 2>" +
      quoted(err.string()) + "\n";
  std::ofstream(script) << line;
  const int status = std::system(("bash " + quoted(script.string())).c_str());
  EthRun r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_all(out);
  r.err = read_all(err);
  return r;
}

}  // namespace eth::test
