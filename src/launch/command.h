// What `eth launch` was given and the mpirun command line it runs: `eth train --plan P --backend
// mpi ...` on one rank per device of the plan, here or host by host. Shared by a plain launch
// (cli/cmd_launch.cpp) and the elastic loop (elastic_run.h), which runs one after another.
#pragma once

#include <string>
#include <vector>

#include "launch/mpirun.h"

namespace eth {

struct LaunchArgs {
  std::string plan;
  std::string hostfile;
  std::string network;
  std::string mpirun = "mpirun";
  bool dry_run = false;
  // auto (default): cma on one host where single_copy_available(), none otherwise (another
  // host's kernel may forbid it, and Open MPI would fail the first large message there); cma;
  // none.
  std::string single_copy = "auto";
  // cpu | emulated | cuda: passed on to every rank's eth train as --device (not cpu).
  std::string device = "cpu";
  std::vector<std::string> train_args;  // after --
};

// [mpirun ..., this program, train, --plan, plan_file, --backend, mpi, train_args...] for
// `num_ranks` ranks on `hosts` (empty: all here; then ETH_* variables are passed on too).
// `kill_at_once`: MpirunOptions::kill_at_once. Throws InputError for --plan among `train_args`
// or a program path that cannot be found.
std::vector<std::string> train_launch_argv(const LaunchArgs& a, const std::string& plan_file,
                                           int num_ranks, const std::vector<HostRanks>& hosts,
                                           const std::vector<std::string>& train_args,
                                           bool kill_at_once = false);

// The command line as a shell would take it (words with spaces or quotes single-quoted).
std::string command_line_text(const std::vector<std::string>& argv);

}  // namespace eth
