// `eth`: the one command-line tool. Parses flags with CLI11, runs the chosen subcommand, and maps
// errors to exit codes. The only place in ETH that decides a process's fate.
#include <cstring>
#include <exception>
#include <iostream>

#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "cli/output.h"
#include "comm/communicator.h"
#include "core/error.h"

namespace {

// What the command printed must have reached its destination: a full disk (or /dev/full) under
// `> file` would otherwise pass unnoticed.
int finish_stdout(int code) {
  const int err = eth::cli::flush_checked_stdout();
  if (err == 0) return code;
  std::cerr << "error: [io] standard output: cannot write: " << std::strerror(err) << "\n";
  return eth::cli::kExitInput;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace eth::cli;
  install_checked_stdout();
  CLI::App app{
      "ETH: train GPT-style models on clusters of mixed accelerators with heterogeneous pipeline\n"
      "parallelism (HPP): several independent pipelines, each with its own batch, micro-batch\n"
      "size and stage layout, balanced by data rather than by layers.\n\n"
      "Exit codes (docs/exit-codes.md): 0 ok, 1 bad command line, 2 bad input (file, field or\n"
      "plan rule) or an output that cannot be written, 3 internal error (a bug in ETH: please\n"
      "report it), 4 communication failure (a rank of a distributed run died or stopped\n"
      "answering; the message names it), 5 eth launch --elastic: no plan fits the devices left\n"
      "(the last checkpoint is whole), 130/143 eth launch interrupted by SIGINT/SIGTERM.",
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
  add_convert_command(app, registry);
  add_eval_command(app, registry);
  add_sample_command(app, registry);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return finish_stdout(app.exit(e) == 0 ? kExitOk : kExitUsage);
  }
  int code = kExitUsage;
  try {
    for (auto& [sub, action] : registry.actions) {
      if (sub->parsed()) {
        code = action();
        break;
      }
    }
  } catch (const UsageError& e) {
    std::cerr << "error: [cli] " << eth::message_text(e.what(), 4096) << "\n"
              << "Run with --help for more information.\n";
    return kExitUsage;
  } catch (const eth::InputError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return kExitInput;
  } catch (const eth::CommError& e) {
    std::cerr << "error: " << eth::message_text(e.what(), 4096, true) << "\n";
    return kExitComm;
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << eth::message_text(e.what(), 4096, true) << "\n";
    return kExitInternal;
  }
  return finish_stdout(code);
}
