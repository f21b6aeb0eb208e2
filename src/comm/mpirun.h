// The mpirun command line for N ranks on this kind of machine, for CTest and `eth launch`: the
// flags Open MPI needs here (shared/notes/machine-figures.md). A pure function: it reads no
// environment and starts nothing; the caller says whether it runs as root.
#pragma once

#include <string>
#include <vector>

namespace eth {

struct MpirunOptions {
  std::string mpirun = "mpirun";
  int num_ranks = 1;
  bool as_root = false;       // Open MPI refuses root without --allow-run-as-root
  bool oversubscribe = true;  // allow more ranks than cores (2-core machines)
  std::string hostfile;       // empty: every rank on this host
  // Exported to every rank with -x: NAME=VALUE, or NAME alone for the launcher's own value.
  // The default makes glibc (and Open MPI's large collective temporaries) use huge pages.
  std::vector<std::string> env{"GLIBC_TUNABLES=glibc.malloc.hugetlb=1"};
};

// [mpirun, flags..., -n N, program...]. Flags: --allow-run-as-root (as_root), --oversubscribe,
// --bind-to none (concurrent jobs on a shared machine must not pin to the same cores),
// --mca btl self,vader (plus tcp with a hostfile: vader is shared memory only),
// --mca btl_vader_single_copy_mechanism none (CMA single copy is slow here),
// --hostfile FILE, -x ENV.... Throws InputError("launch", ...) naming the bad field for
// num_ranks < 1, an empty program or mpirun, or a malformed env entry.
std::vector<std::string> mpirun_argv(const MpirunOptions& options,
                                     const std::vector<std::string>& program);

// Whether this process runs as root (euid 0): the usual value of MpirunOptions::as_root.
bool running_as_root();

}  // namespace eth
