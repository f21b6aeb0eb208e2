// The NCCL backend: one GPU per rank, every rank a process (NCCL refuses two ranks on one GPU),
// bootstrapped over a host communicator (MPI, or LocalWorld in tests). Deliberately free of
// <nccl.h> and <cuda_runtime.h>, so callers compile the same in builds without NCCL, where
// comm/nccl/no_nccl.cpp's version throws CommError "built without NCCL" (CMake picks the file).
// Library eth_comm_nccl: the only one of comm/ that links CUDA and NCCL (ETH_WITH_NCCL).
//
// Memory: the buffers of send/recv, the all-reduces and broadcast are DEVICE memory of the rank's
// GPU (kernels/cuda/runtime.h); gather (timings, counters) is host memory and goes over the host
// communicator. Ordering: NCCL matches messages between two ranks in posting order and has no
// tags, so both sides must post a pair's messages in the same order (the tag is ignored).
// Streams: each operation waits for the work the calling thread queued on its stream
// (cudaStreamPerThread, as the kernels use) and runs on the communicator's own stream, so
// communication overlaps later compute; Request::wait() returns once the data is in place,
// bounded by options().timeout (then the NCCL communicator is aborted and CommTimeout thrown).
//
// Status: compiled in CI, never run on a GPU yet (docs/gpu.md).
#pragma once

#include "comm/communicator.h"

namespace eth {

// True when this build has the NCCL backend (ETH_CUDA with NCCL found).
bool nccl_compiled();

// A communicator over the same ranks as `host`, on GPU `device` of this process (set as the
// calling thread's current device). Collective over every rank of `host`: rank 0 makes NCCL's
// unique id and broadcasts it over `host`. The result keeps `host` for gather and for the host
// side of split and create_group. Throws CommError naming the reason (no GPU, built without
// NCCL, an NCCL error).
Communicator make_nccl_communicator(const Communicator& host, int device);

}  // namespace eth
