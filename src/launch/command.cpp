// The mpirun command line of eth launch (command.h).
#include "launch/command.h"

#include <filesystem>

#include "launch/hosts.h"
#include "launch/single_copy_probe.h"
#include "core/error.h"

namespace eth {

namespace {

std::string quoted(const std::string& s) {
  if (!s.empty() && s.find_first_of(" \t'\"\\$`") == std::string::npos) return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

std::vector<std::string> train_launch_argv(const LaunchArgs& a, const std::string& plan_file,
                                           int num_ranks, const std::vector<HostRanks>& hosts,
                                           const std::vector<std::string>& train_args,
                                           bool kill_at_once) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) {
    throw InputError("launch", "/proc/self/exe", "", "cannot find this program: " + ec.message());
  }
  MpirunOptions o;
  o.mpirun = a.mpirun;
  o.num_ranks = num_ranks;
  o.as_root = running_as_root();
  o.network = a.network;
  o.hosts = hosts;
  o.kill_at_once = kill_at_once;
  o.single_copy = a.single_copy == "cma" || (a.single_copy == "auto" && hosts.empty() &&
                                             single_copy_available());
  if (!hosts.empty()) {
    for (const std::string& name : eth_environment()) o.env.push_back(name);
  }
  std::vector<std::string> program{self.string(), "train", "--plan", plan_file, "--backend",
                                   "mpi"};
  for (const std::string& s : train_args) {
    if (s == "--plan" || s.rfind("--plan=", 0) == 0) {
      throw InputError("launch", "--plan", "", "give the plan to eth launch only, not after --");
    }
    program.push_back(s);
  }
  if (!a.device.empty() && a.device != "cpu") {
    program.push_back("--device");
    program.push_back(a.device);
  }
  return mpirun_argv(o, program);
}

std::string command_line_text(const std::vector<std::string>& argv) {
  std::string line;
  for (const auto& s : argv) line += (line.empty() ? "" : " ") + quoted(s);
  return line;
}

}  // namespace eth
