// `eth`: the one command-line tool. Parses flags with CLI11, runs the chosen subcommand, and maps
// errors to exit codes. The only place in ETH that decides a process's fate.
#include <cstdio>
#include <exception>
#include <iostream>

#include "cli/command.h"
#include "comm/communicator.h"
#include "core/error.h"

int main(int argc, char** argv) {
  using namespace eth::cli;
  CLI::App app{
      "ETH: train GPT-style models on clusters of mixed accelerators with heterogeneous pipeline\n"
      "parallelism (HPP): several independent pipelines, each with its own batch, micro-batch\n"
      "size and stage layout, balanced by data rather than by layers.\n\n"
      "Exit codes: 0 ok, 1 bad command line, 2 bad input (file, field or plan rule),\n"
      "3 internal error (a bug in ETH: please report it), 4 communication failure (a rank\n"
      "of a distributed run died or stopped answering; the message names it).",
      "eth"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "eth 0.1.0");
  Registry registry;
  add_models_command(app, registry);
  add_devices_command(app, registry);
  add_clusters_command(app, registry);
  add_validate_command(app, registry);
  add_profile_command(app, registry);
  add_simulate_command(app, registry);
  add_plan_command(app, registry);
  add_compare_command(app, registry);
  add_data_command(app, registry);
  add_train_command(app, registry);
  add_launch_command(app, registry);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }
  try {
    for (auto& [sub, action] : registry.actions) {
      if (sub->parsed()) return action();
    }
    return kExitUsage;
  } catch (const eth::InputError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return kExitInput;
  } catch (const eth::CommError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return kExitComm;
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << e.what() << "\n";
    return kExitInternal;
  }
}
