// The MPI backend in builds without MPI (ETH_WITH_MPI=OFF or no MPI found): CMake compiles this
// file instead of mpi_comm.cpp, so no caller needs #ifdef. Everything throws one clear error.
#include "comm/mpi/mpi_comm.h"

namespace eth {

namespace {
[[noreturn]] void built_without_mpi() {
  throw CommError(
      "[comm] built without MPI: install libopenmpi-dev and openmpi-bin, then reconfigure with "
      "-DETH_WITH_MPI=ON");
}
}  // namespace

bool mpi_compiled() { return false; }

MpiSession::MpiSession() { built_without_mpi(); }

MpiSession::~MpiSession() = default;

Communicator MpiSession::world(CommOptions /*options*/) const { built_without_mpi(); }

void MpiSession::abort_job(int /*exit_code*/) { built_without_mpi(); }

}  // namespace eth
