// The MPI backend's stub (src/comm/mpi/no_mpi.cpp), built only where ETH_WITH_MPI is OFF: every
// entry point says MPI is missing and how to get it, instead of failing later or silently.
#include <gtest/gtest.h>

#include <string>

#include "comm/mpi/mpi_comm.h"

namespace eth {
namespace {

TEST(MpiStub, BuildsWithoutMpiSayWhyMpiIsUnavailable) {
  EXPECT_FALSE(mpi_compiled());
  try {
    MpiSession session;
    ADD_FAILURE() << "MpiSession should throw in a build without MPI";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("built without MPI"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace eth
