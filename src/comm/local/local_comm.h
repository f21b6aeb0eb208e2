// LocalWorld: N ranks as threads of one process, for fast integration tests of the runtime on
// 2-core machines. Same contract as the MPI backend, stricter where MPI is lenient (sends are
// synchronous, mismatched collectives are reported). Not a performance backend: everything
// runs under one mutex. Library eth_comm_local (`eth train --backend threads` and the tests):
// it links neither MPI nor CUDA.
//
// How to use:
//   LocalWorld world(4, options);
//   auto errors = run_on_threads(world, [&](Communicator c) { ... });  // one thread per rank
#pragma once

#include <exception>
#include <functional>
#include <vector>

#include "comm/communicator.h"
#include "comm/device_memory.h"

namespace eth {

// Determinism: allreduce_sum adds the ranks' buffers in ascending rank order (rank 0's value,
// plus rank 1's, ...) in the element type, and every rank receives the same bytes. So results
// are identical run to run and equal MPI's bitwise for 2 ranks; for more ranks Open MPI may
// associate differently (docs/comm.md "What is bitwise").
class LocalWorld {
 public:
  // Throws InputError for num_ranks < 1 or invalid options.
  explicit LocalWorld(int num_ranks, CommOptions options = {});
  // Ranks as threads sharing one device: every buffer of this world's (and its groups')
  // messages, all-reduces and broadcasts is memory of that device, moved by `device.copy` and
  // reduced by `device.reduce` (same order: rank 0's value, plus rank 1's, ...), never read by
  // the host; each rank synchronizes its own stream before it hands a buffer over. Gathers are
  // host memory. `device` must outlive the world.
  LocalWorld(int num_ranks, CommOptions options, const DeviceMemoryOps& device);

  int size() const { return static_cast<int>(comms_.size()); }
  // The world communicator of `rank`; every call returns a handle on the same one.
  Communicator comm(int rank) const;

 private:
  std::vector<Communicator> comms_;
};

// Runs body(world.comm(r)) on one thread per rank and joins them all. Returns what each rank
// threw (nullptr where it returned normally), indexed by rank.
std::vector<std::exception_ptr> run_on_threads(const LocalWorld& world,
                                               const std::function<void(Communicator)>& body);

}  // namespace eth
