// `eth launch`: starts `eth train --plan` under mpirun with one rank per device of the plan and
// the flags this kind of machine needs (comm/mpirun.h), so nobody writes the mpirun line by hand.
// mpirun runs as a child (cli/launch_supervisor.h): a dead rank, Ctrl-C and SIGTERM become ETH's
// exit codes with the rank and device named. --elastic: cli/elastic_launch.h.
#include <filesystem>
#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "cli/device_choice.h"
#include "cli/elastic_launch.h"
#include "cli/launch_command.h"
#include "cli/launch_supervisor.h"
#include "cli/launch_hosts.h"
#include "cli/train_args.h"
#include "comm/mpirun.h"
#include "comm/nccl_comm.h"
#include "core/error.h"
#include "plan/plan.h"

namespace eth::cli {

namespace {

int run_launch(const LaunchArgs& a) {
  const Plan plan = load_plan(a.plan);
  require_trainable(plan.model);  // before any rank starts
  std::vector<HostRanks> hosts;
  // Host by host in device order (host_of_rank(hosts, r) names rank r's host).
  if (!a.hostfile.empty()) hosts = launch_hosts(plan, a.plan, a.hostfile, a.train_args);
  const int num_ranks = static_cast<int>(plan.num_devices());
  const std::vector<std::string> argv =
      train_launch_argv(a, a.plan, num_ranks, hosts, a.train_args);
  const std::string line = command_line_text(argv);
  std::cerr << "launching " << num_ranks << " ranks: " << line << "\n" << std::flush;
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
  for (LaunchRank& r : ranks) r.host = host_of_rank(hosts, r.rank);
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
  sub->add_option("--mpi-single-copy", a->single_copy,
                  "How Open MPI moves large messages between ranks of one host: cma (the "
                  "receiver copies straight from the sender's memory, so a message does not wait "
                  "for the sender's next MPI call), none (through shared-memory fragments the "
                  "sender feeds from inside its MPI calls), or auto (default): cma on one host "
                  "where this kernel allows it, none across hosts (docs/runtime.md, \"Emulated "
                  "heterogeneity\")")
      ->check(CLI::IsMember({"auto", "cma", "none"}))
      ->capture_default_str();
  sub->add_option("train_args", a->train_args, "Arguments of eth train, after --");
  // Checked before the plan is read or any rank starts (each rank would refuse it later), then
  // passed on to every rank's eth train. cuda: one GPU per rank over NCCL, bootstrapped over
  // MPI; emulated: every rank its own emulated device, messages staged through host copies.
  sub->add_option("--device", a->device,
                  std::string(kDeviceHelp) +
                      ". Under eth launch every rank is a process: cuda takes one GPU per rank "
                      "(NCCL between them), emulated gives each rank its own emulated device")
      ->check(CLI::IsMember(kDeviceNames))
      ->capture_default_str();
  auto e = std::make_shared<ElasticArgs>();
  add_elastic_options(sub, *e);
  sub->footer(
      "--elastic: eth launch keeps the run going when devices are lost. A rank that dies or stops "
      "answering takes its device out (written into --lost-devices when given); eth launch "
      "re-plans on the devices left with the same model, global batch, sequence length and "
      "planner options and resumes from the newest checkpoint that reads back whole, until "
      "--steps. Data order and learning-rate schedule are unchanged, so the losses are those of "
      "an uninterrupted run. Devices added to or removed from --lost-devices (or hosts to "
      "--hostfile) are acted on at the next checkpoint. Each recovery prints the lost device, "
      "detection, planning and relaunch times, steps redone and the old and new predicted "
      "iteration time (--elastic-log: JSON lines). Exit 5 when no plan fits the devices left "
      "(the last checkpoint is whole: bring devices back and run the same command again).\n"
      "  eth launch --plan P --elastic --checkpoint-dir C --checkpoint-every 50 -- --data D "
      "--steps N");
  r.on(sub, [a, e] {
    const Device device = choose_device(a->device, "--device");
    if (device == Device::Cuda && !nccl_compiled()) {
      throw InputError("launch", "--device", "",
                       "cuda under eth launch needs the NCCL communicator, and this build has "
                       "none (rebuild with NCCL next to the CUDA toolkit); eth train --plan P "
                       "--backend threads --device cuda runs a plan on one GPU");
    }
    for (const std::string& s : a->train_args) {
      if (s == "--device" || s.rfind("--device=", 0) == 0) {
        throw InputError("launch", "--device", "", "give the device to eth launch, not after --");
      }
    }
    if (e->enabled) return run_elastic_launch(*a, *e);
    refuse_elastic_options(*e);
    return run_launch(*a);
  });
}

}  // namespace eth::cli
