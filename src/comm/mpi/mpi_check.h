// ETH_MPI_CHECK(call): every MPI return code goes through it (STYLE.md section 6). Internal to
// comm/mpi/ and its tests: the only header of ETH that includes <mpi.h>.
#pragma once

#include <mpi.h>

namespace eth {

// Throws CommError "[comm] MPI call failed at FILE:LINE: CALL: <MPI's error string> (code N)".
[[noreturn]] void throw_mpi_error(const char* call, const char* file, int line, int code);

}  // namespace eth

#define ETH_MPI_CHECK(call)                                                  \
  do {                                                                       \
    const int eth_mpi_rc_ = (call);                                          \
    if (eth_mpi_rc_ != MPI_SUCCESS) {                                        \
      ::eth::throw_mpi_error(#call, __FILE__, __LINE__, eth_mpi_rc_);        \
    }                                                                        \
  } while (0)
