// The subcommands of `eth`. Each lives in its own cmd_*.cpp and registers itself on the
// top-level CLI11 app; only cli/ (and launch/, for the processes it starts) prints, reads the
// environment or chooses exit codes.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/cli_fwd.h"

#include "core/exit_codes.h"

namespace eth::cli {

// Exit codes: core/exit_codes.h, declared here too so eth::cli::kExitOk ... keep naming them.
using eth::kExitComm;
using eth::kExitInput;
using eth::kExitInternal;
using eth::kExitNoPlan;
using eth::kExitOk;
using eth::kExitSigint;
using eth::kExitSigterm;
using eth::kExitUsage;

// A command line that is wrong whatever the files hold: a flag missing, a value outside its set,
// flags that exclude each other. Exit 1, like CLI11's own parse errors. Problems that depend on
// what a file holds are InputError (exit 2).
class UsageError : public std::runtime_error {
 public:
  UsageError(const std::string& flag, const std::string& detail)
      : std::runtime_error(flag + ": " + detail) {}
};

// A command's action runs after parsing; it returns the exit code.
using Action = std::function<int()>;

// Registration: each cmd_*.cpp defines one of these; main.cpp calls them all.
struct Registry {
  std::vector<std::pair<CLI::App*, Action>> actions;
  void on(CLI::App* sub, Action a) { actions.emplace_back(sub, std::move(a)); }
};

void add_models_command(CLI::App& app, Registry& r);
void add_devices_command(CLI::App& app, Registry& r);
void add_clusters_command(CLI::App& app, Registry& r);
void add_validate_command(CLI::App& app, Registry& r);
void add_profile_command(CLI::App& app, Registry& r);
void add_simulate_command(CLI::App& app, Registry& r);
void add_plan_command(CLI::App& app, Registry& r);
void add_compare_command(CLI::App& app, Registry& r);
void add_data_command(CLI::App& app, Registry& r);
void add_train_command(CLI::App& app, Registry& r);
void add_launch_command(CLI::App& app, Registry& r);
void add_convert_command(CLI::App& app, Registry& r);
void add_eval_command(CLI::App& app, Registry& r);
void add_sample_command(CLI::App& app, Registry& r);

}  // namespace eth::cli
