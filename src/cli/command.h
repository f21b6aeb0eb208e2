// The subcommands of `eth`. Each lives in its own cmd_*.cpp and registers itself on the
// top-level CLI11 app; only cli/ prints, reads the environment or chooses exit codes.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace eth::cli {

// Exit codes, documented in `eth --help`.
inline constexpr int kExitOk = 0;
inline constexpr int kExitUsage = 1;     // bad flags
inline constexpr int kExitInput = 2;     // bad input file or value, or a plan that breaks a rule
inline constexpr int kExitInternal = 3;  // a bug in ETH
inline constexpr int kExitComm = 4;      // a rank died or stopped answering (distributed runs)

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

}  // namespace eth::cli
