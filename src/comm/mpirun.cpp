// Builds mpirun argument vectors (see mpirun.h); validation names the offending field.
#include "comm/mpirun.h"

#include <unistd.h>

#include "core/error.h"

namespace eth {

namespace {

bool valid_env_name(const std::string& name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  for (char c : name) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '_';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

std::vector<std::string> mpirun_argv(const MpirunOptions& options,
                                     const std::vector<std::string>& program) {
  if (options.mpirun.empty()) throw InputError("launch", "", "mpirun", "must not be empty");
  if (options.num_ranks < 1) {
    throw InputError("launch", "", "num_ranks",
                     "must be >= 1, got " + std::to_string(options.num_ranks));
  }
  if (program.empty() || program.front().empty()) {
    throw InputError("launch", "", "program", "expected the program to run on every rank");
  }
  for (std::size_t i = 0; i < options.env.size(); ++i) {
    const std::string& e = options.env[i];
    if (!valid_env_name(e.substr(0, e.find('=')))) {
      throw InputError("launch", "", "env[" + std::to_string(i) + "]",
                       "expected NAME=VALUE or NAME with NAME of letters, digits and _, got \"" +
                           e + "\"");
    }
  }
  std::vector<std::string> argv{options.mpirun};
  if (options.as_root) argv.emplace_back("--allow-run-as-root");
  if (options.oversubscribe) argv.emplace_back("--oversubscribe");
  argv.insert(argv.end(), {"--bind-to", "none"});
  argv.insert(argv.end(),
              {"--mca", "btl", options.hostfile.empty() ? "self,vader" : "self,vader,tcp"});
  argv.insert(argv.end(), {"--mca", "btl_vader_single_copy_mechanism", "none"});
  if (!options.hostfile.empty()) argv.insert(argv.end(), {"--hostfile", options.hostfile});
  for (const std::string& e : options.env) argv.insert(argv.end(), {"-x", e});
  argv.insert(argv.end(), {"-n", std::to_string(options.num_ranks)});
  argv.insert(argv.end(), program.begin(), program.end());
  return argv;
}

bool running_as_root() { return geteuid() == 0; }

}  // namespace eth
