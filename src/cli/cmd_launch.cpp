// `eth launch`: starts `eth train --plan` under mpirun with one rank per device of the plan and
// the flags this kind of machine needs (comm/mpirun.h), so nobody writes the mpirun line by hand.
// Replaces this process with mpirun (exec), so signals and the exit code are mpirun's.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "cli/launch_hosts.h"
#include "comm/mpirun.h"
#include "core/error.h"
#include "plan/plan.h"

namespace eth::cli {

namespace {

struct LaunchArgs {
  std::string plan;
  std::string hostfile;
  std::string network;
  std::string mpirun = "mpirun";
  bool dry_run = false;
  std::vector<std::string> train_args;
};

std::string quoted(const std::string& s) {
  if (!s.empty() && s.find_first_of(" \t'\"\\$`") == std::string::npos) return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

int run_launch(const LaunchArgs& a) {
  const Plan plan = load_plan(a.plan);
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) {
    throw InputError("launch", "/proc/self/exe", "", "cannot find this program: " + ec.message());
  }
  MpirunOptions o;
  o.mpirun = a.mpirun;
  o.num_ranks = static_cast<int>(plan.num_devices());
  o.as_root = running_as_root();
  o.network = a.network;
  if (!a.hostfile.empty()) {
    // Host by host in device order (host_of_rank(o.hosts, r) names rank r's host).
    o.hosts = launch_hosts(plan, a.plan, a.hostfile, a.train_args);
    for (const std::string& name : eth_environment()) o.env.push_back(name);
  }
  std::vector<std::string> program{self.string(), "train", "--plan", a.plan, "--backend", "mpi"};
  for (const std::string& s : a.train_args) {
    if (s == "--plan" || s.rfind("--plan=", 0) == 0) {
      throw InputError("launch", "--plan", "", "give the plan to eth launch only, not after --");
    }
    program.push_back(s);
  }
  const std::vector<std::string> argv = mpirun_argv(o, program);
  std::string line;
  for (const auto& s : argv) line += (line.empty() ? "" : " ") + quoted(s);
  std::cerr << "launching " << o.num_ranks << " ranks: " << line << "\n" << std::flush;
  if (a.dry_run) {
    std::cout << line << "\n";
    return kExitOk;
  }
  std::vector<char*> cargv;
  for (const auto& s : argv) cargv.push_back(const_cast<char*>(s.c_str()));
  cargv.push_back(nullptr);
  ::execvp(cargv[0], cargv.data());
  throw InputError("launch", "--mpirun", "",
                   "cannot start " + a.mpirun + ": " + std::strerror(errno) +
                       " (install openmpi-bin, or scripts/install-deps.sh does)");
}

}  // namespace

void add_launch_command(CLI::App& app, Registry& r) {
  auto* sub = app.add_subcommand(
      "launch",
      "Start `eth train --plan P` on one MPI rank per device of the plan: eth launch --plan P "
      "-- --data D --steps N ... (everything after -- goes to eth train)");
  auto a = std::make_shared<LaunchArgs>();
  sub->add_option("--plan", a->plan, "Plan file (eth plan --out)")->required();
  sub->add_option("--hostfile", a->hostfile,
                  "Hosts, one per line, one per node of the cluster in its order: host k runs "
                  "the plan's devices of node k (default: every rank here)");
  sub->add_option("--net", a->network,
                  "With --hostfile: the network between the hosts, interface names or CIDR "
                  "subnets, comma-separated (default: every interface but loopback)");
  sub->add_option("--mpirun", a->mpirun, "The mpirun program")->capture_default_str();
  sub->add_flag("--dry-run", a->dry_run, "Print the mpirun command line and exit");
  sub->add_option("train_args", a->train_args, "Arguments of eth train, after --");
  r.on(sub, [a] { return run_launch(*a); });
}

}  // namespace eth::cli
