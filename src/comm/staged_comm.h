// A host communicator (MPI) carrying device buffers: every buffer of its messages, all-reduces
// and broadcasts is device memory, downloaded into a host copy before the host operation and
// uploaded from it once the operation completes (a receive's, an all-reduce's, a broadcast's
// result). The copies are explicit and made by the device's own functions (device_memory.h), so
// host code never reads device memory. For the emulated device under MPI, where ranks are
// processes and each has its own device memory; a GPU per rank uses NCCL instead
// (nccl/nccl_comm.h). Gathers are host memory, passed through. Splits and groups are staged too.
#pragma once

#include "comm/communicator.h"
#include "comm/device_memory.h"

namespace eth {

// `host` carries the bytes; `device` (must outlive the result) moves them to and from the
// device. Not collective.
Communicator make_host_staged_communicator(const Communicator& host,
                                           const DeviceMemoryOps& device);

}  // namespace eth
