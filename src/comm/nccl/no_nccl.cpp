// The NCCL backend of a build without it (ETH_CUDA=OFF or no NCCL found): see nccl_comm.h.
#include "comm/nccl/nccl_comm.h"

namespace eth {

bool nccl_compiled() { return false; }

Communicator make_nccl_communicator(const Communicator& /*host*/, int /*device*/) {
  throw CommError("[comm] built without NCCL (configure with the CUDA toolkit and NCCL: "
                  "-DETH_CUDA=ON, docs/gpu.md)");
}

}  // namespace eth
