// `eth launch`: starts `eth train --plan` under mpirun with one rank per device of the plan and
// the flags this kind of machine needs (comm/mpirun.h), so nobody writes the mpirun line by hand.
// mpirun runs as a child (cli/launch_supervisor.h): a dead rank, Ctrl-C and SIGTERM become ETH's
// exit codes with the rank and device named.
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "cli/launch_supervisor.h"
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
  // Where the ranks write checkpoints, for the report of an interrupted run.
  std::string checkpoint_dir;
  for (std::size_t i = 0; i < a.train_args.size(); ++i) {
    const std::string& s = a.train_args[i];
    if (s == "--checkpoint-dir" && i + 1 < a.train_args.size()) {
      checkpoint_dir = a.train_args[i + 1];
    }
    if (s.rfind("--checkpoint-dir=", 0) == 0) checkpoint_dir = s.substr(17);
  }
  std::vector<LaunchRank> ranks = launch_ranks(plan);
  for (LaunchRank& r : ranks) r.host = host_of_rank(o.hosts, r.rank);
  const LaunchOutcome outcome = supervise_launch(argv, ranks, checkpoint_dir);
  if (!outcome.message.empty()) std::cerr << outcome.message << "\n";
  return outcome.exit_code;
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
