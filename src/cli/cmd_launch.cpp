// `eth launch`: its flags, and what it prints. It starts `eth train --plan` under mpirun with
// one rank per device of the plan and the flags this kind of machine needs (launch/mpirun.h), so
// nobody writes the mpirun line by hand. mpirun runs as a child (launch/supervisor.h): a dead
// rank, Ctrl-C and SIGTERM become ETH's exit codes with the rank and device named. --elastic:
// launch/elastic_run.h, with the plan, cluster and profile resolved here.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "cli/device_choice.h"
#include "cli/plan_inputs.h"
#include "cli/planner_args.h"
#include "cli/train_args.h"
#include "comm/nccl/nccl_comm.h"
#include "core/error.h"
#include "launch/command.h"
#include "launch/elastic_run.h"
#include "launch/hosts.h"
#include "launch/mpirun.h"
#include "launch/supervisor.h"
#include "plan/plan.h"

namespace eth::cli {

namespace {

struct ElasticArgs {
  bool enabled = false;
  // --checkpoint-dir, --checkpoint-every, --lost-devices, --elastic-log, --max-restarts; the rest
  // is resolved by run_elastic_launch.
  ElasticSetup run;
  PlannerArgs planner;
  std::vector<CLI::Option*> options;  // every option but --elastic (refused without it)
};

// The value of option `name` among eth train's arguments, given as "NAME VALUE" or
// "NAME=VALUE" ("" when absent; eth train refuses one given twice).
std::string option_value(const std::vector<std::string>& args, const std::string& name) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == name && i + 1 < args.size()) return args[i + 1];
    if (args[i].rfind(name + "=", 0) == 0) return args[i].substr(name.size() + 1);
  }
  return "";
}

// eth train's own parser over the arguments after --: the values the supervisor needs (steps,
// log, cluster, ...) and every flag checked before the first launch.
TrainArgs parse_train_args(const std::vector<std::string>& args) {
  CLI::App app{"eth train"};
  TrainArgs t;
  add_train_options(&app, &t);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them reversed
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    throw UsageError("--", std::string("the arguments of eth train: ") + e.what());
  }
  for (const char* flag : {"--checkpoint-dir", "--checkpoint-every", "--resume", "--stop-file"}) {
    if (app.count(flag) > 0) {
      throw UsageError(flag, std::string("with --elastic, eth launch manages ") + flag +
                                 " (give --checkpoint-dir and --checkpoint-every to eth launch)");
    }
  }
  return t;
}

// eth launch --elastic: the flags checked and the plan, cluster and re-planning profile resolved
// before launch/elastic_run.h takes over.
int run_elastic_launch(const LaunchArgs& a, const ElasticArgs& e) {
  if (a.dry_run) throw UsageError("--dry-run", "not with --elastic: its plans depend on the run");
  if (e.run.checkpoint_dir.empty() || e.run.checkpoint_every < 1) {
    throw UsageError(e.run.checkpoint_dir.empty() ? "--checkpoint-dir" : "--checkpoint-every",
                     "--elastic resumes from checkpoints: give --checkpoint-dir DIR and "
                     "--checkpoint-every N (N >= 1)");
  }
  const TrainArgs train = parse_train_args(a.train_args);
  ElasticSetup s = e.run;
  s.launch = a;
  s.target = train.stop_at > 0 ? std::min(train.stop_at, train.steps) : train.steps;
  s.user_plan = load_plan(a.plan);
  s.full = cluster_for_plan(s.user_plan, train.cluster);
  apply_emulation(s.full, train.emulate);
  const PlannerProfile profile =
      planner_profile(e.planner, s.user_plan.model, s.full, s.user_plan.seq_len);
  s.replan.model = s.user_plan.model;
  s.replan.full = s.full;
  s.replan.profile = &profile.db;
  s.replan.gbs = s.user_plan.gbs;
  s.replan.seq_len = s.user_plan.seq_len;
  s.replan.method = planner_method(e.planner);
  s.replan.options = planner_options(e.planner);
  // The re-plan shards the optimizer state as the run it replaces did (issue 28).
  s.replan.options.optimizer_sharding = s.user_plan.optimizer_sharding;
  s.train_log = train.log;
  return run_elastic(s, std::cerr);
}

int run_launch(const LaunchArgs& a) {
  const Plan plan = load_plan(a.plan);
  require_trainable(plan.model);  // before any rank starts
  std::vector<HostRanks> hosts;
  // Host by host in device order (host_of_rank(hosts, r) names rank r's host).
  if (!a.hostfile.empty()) {
    hosts = launch_hosts(plan, a.plan, cluster_for_plan(plan, option_value(a.train_args, "--cluster")),
                         a.hostfile);
  }
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
  const std::string checkpoint_dir = option_value(a.train_args, "--checkpoint-dir");
  std::vector<LaunchRank> ranks = launch_ranks(plan);
  for (LaunchRank& r : ranks) r.host = host_of_rank(hosts, r.rank);
  SuperviseHooks hooks;
  hooks.echo = &std::cerr;
  const LaunchOutcome outcome = supervise_launch(argv, ranks, checkpoint_dir, hooks);
  if (!outcome.message.empty()) std::cerr << outcome.message << "\n";
  return outcome.exit_code;
}

void add_elastic_options(CLI::App* sub, ElasticArgs& e) {

  const char* group = "Elastic (--elastic)";
  sub->add_flag("--elastic", e.enabled,
                "Survive lost devices: when a rank dies or stops answering (or its host goes), "
                "re-plan on the devices left and resume from the last checkpoint, until --steps; "
                "devices listed in or removed from --lost-devices are acted on at the next "
                "checkpoint (docs/runtime.md, Recovery)")
      ->group(group);
  auto& o = e.options;
  o.push_back(sub->add_option("--checkpoint-dir", e.run.checkpoint_dir,
                              "Checkpoints, re-plans (elastic-plan-N.json) and the run's log "
                              "(train.jsonl, unless --log after --) go here")
                  ->group(group));
  o.push_back(sub->add_option("--checkpoint-every", e.run.checkpoint_every,
                              "Checkpoint period in steps: the most steps a failure costs")
                  ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40))
                  ->group(group));
  o.push_back(sub->add_option("--lost-devices", e.run.lost_devices,
                              "File of device ids (of the plan's cluster) not to use: ids or "
                              "ranges A-B, # comments; a failed device is added to it, and "
                              "removing a line brings the device back at the next checkpoint")
                  ->group(group));
  o.push_back(sub->add_option("--elastic-log", e.run.log,
                              "Append one JSON line per event (start, recovery with its "
                              "detection, planning and restart times, stop, finish)")
                  ->group(group));
  o.push_back(sub->add_option("--max-restarts", e.run.max_restarts,
                              "Most relaunches (after failures or device changes) before "
                              "giving up")
                  ->check(CLI::Range(0, 1000000))
                  ->capture_default_str()
                  ->group(group));
  for (CLI::Option* p : add_planner_options(sub, e.planner, true)) {
    p->group("Elastic re-planning (as eth plan; default eth, analytic profile)");
    // One comma-separated word each: a list left open would take the `--` before eth train's
    // arguments as its own end.
    p->allow_extra_args(false);
    o.push_back(p);
  }
}

void refuse_elastic_options(const ElasticArgs& e) {
  for (const CLI::Option* p : e.options) {
    if (p->count() > 0) throw UsageError(p->get_name(), "only with --elastic");
  }
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
