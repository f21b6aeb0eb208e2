// The MPI backend's entry points: MpiSession initializes and finalizes MPI and hands out the
// world communicator. Deliberately free of <mpi.h>, so callers compile the same in builds
// without MPI, where mpi/no_mpi.cpp's versions throw "built without MPI" (CMake picks the file).
// Library eth_comm_mpi: the only one of ETH that links libmpi (ETH_WITH_MPI).
#pragma once

#include "comm/communicator.h"

namespace eth {

// True when this build has the MPI backend (ETH_WITH_MPI=ON).
bool mpi_compiled();

// Owns MPI's lifetime in one process (MPI_THREAD_SERIALIZED: several threads may communicate,
// one at a time; the emulator's progress thread is the second). Create one in main(), before
// any communicator, and keep it until after the last.
class MpiSession {
 public:
  // MPI_Init_thread unless MPI is already initialized. Throws CommError in builds without MPI.
  MpiSession();
  // MPI_Finalize if this session initialized MPI (and it is not finalized yet).
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  // A fresh duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN and these options. Collective
  // over every process of the job (unbounded: MPI_Comm_dup has no non-blocking form). Throws
  // InputError for invalid options.
  Communicator world(CommOptions options = {}) const;

  // MPI_Abort over the whole job: for the CLI after a rank failed, so no rank waits in
  // MPI_Finalize for one that will never come.
  [[noreturn]] static void abort_job(int exit_code);

 private:
  bool initialized_here_ = false;
};

}  // namespace eth
