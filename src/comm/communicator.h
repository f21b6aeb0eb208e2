// The communicator layer of the distributed runtime: ranks, groups, point-to-point messages and
// sum all-reduces over float/double buffers, every wait bounded by a timeout. It knows bytes,
// ranks and groups, never models or plans. Backends, one folder each with its own library:
// LocalWorld (local/local_comm.h: ranks as threads in one process), MPI (mpi/mpi_comm.h) and
// NCCL (nccl/nccl_comm.h: one GPU per rank); the last two have a stub that throws "built without
// MPI/NCCL" where the build lacks them. make_host_staged_communicator (staged_comm.h) carries
// device buffers over any host communicator. This library itself links none of those libraries.
// docs/comm.md is the contract in prose: ordering rules, progress, what is bitwise.
//
// How to use:
//   LocalWorld world(4);                         // or: MpiSession mpi; mpi.world()
//   run_on_threads(world, [](Communicator c) {   // one thread per rank
//     std::vector<float> grad(n, 1.0f);
//     c.allreduce_sum(grad);                     // cut into pieces of <= options().chunk_bytes
//     Request r = c.iallreduce_sum(grad);        // overlap with compute, then
//     r.wait();                                  // bounded by options().timeout
//     std::vector<int> members{0, 2};
//     if (c.rank() == 0 || c.rank() == 2) Communicator pair = c.create_group(members);
//   });
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace eth {

// Knobs shared by a communicator and every sub-communicator split from it.
struct CommOptions {
  // Every blocking wait (wait(), send, recv, collectives, split, create_group) gives up after
  // this long and throws CommTimeout naming the ranks it waited for.
  std::chrono::milliseconds timeout{120'000};
  // allreduce_sum / iallreduce_sum / broadcast issue one collective per piece of at most this
  // many bytes: single MPI collectives of 64 MiB or more are 15-40x slower per byte here
  // (shared/notes/machine-figures.md), block-wise aggregation of ~30 MB per rank was 2-3x faster
  // in 1-4 MiB pieces than in 16 MiB ones, and pieces about half a core's L2 (512 KiB) keep the
  // shared-memory copy and the reduction in cache: a 2-rank all-reduce of 13.8 MB took 7.5-9.4
  // ms in 512 KiB pieces against 13.4-14.5 in 4 MiB ones, and block-wise aggregation on 4 ranks
  // 21-31 ms against 31-40 (bench/runtime_bench, docs/comm.md).
  std::size_t chunk_bytes = std::size_t{512} << 10;
  // AllreduceQueue (the gradient collectives) keeps at most this many bytes of pieces in
  // flight per communicator, posting the next piece as one completes: each posted MPI
  // all-reduce holds a temporary of its piece's size, so a rank holds at most
  // communicators * max(window_bytes, chunk_bytes) of them (docs/comm.md, "Window"). 2 MiB
  // (4 pieces): on 8 ranks over 2 cores aggregation took 23 ms against 25 with 4 MiB, 26 with
  // 16 MiB and 28-42 with no bound (bench/runtime_bench, asymmetric plan).
  std::size_t window_bytes = std::size_t{2} << 20;
};

// Throws InputError("comm", "", "timeout" | "chunk_bytes" | "window_bytes", ...) for a
// non-positive timeout, a chunk outside [8 bytes, 1 GiB] (MPI counts are int) or a window
// outside [8 bytes, 1 TiB].
void validate(const CommOptions& options);

// A communication failure at run time (a bad MPI return code, a message of the wrong size,
// mismatched collectives, a communicator used after a timeout). Not user input, not our bug.
class CommError : public std::runtime_error {
 public:
  explicit CommError(const std::string& message) : std::runtime_error(message) {}
};

// A bounded wait expired. what() names the operation, this rank and the ranks waited for, e.g.
//   "[comm] rank 0/4 (world rank 0): allreduce_sum of 100 f32 timed out after 1.000 s waiting
//    for rank 3 (world rank 3) ..."
// After a timeout the communicator is unusable (its later operations throw CommError): the
// intended reaction is to report and end the process.
class CommTimeout : public CommError {
 public:
  CommTimeout(const std::string& message, std::string operation, std::vector<int> peers,
              std::vector<int> peer_world_ranks)
      : CommError(message),
        operation_(std::move(operation)),
        peers_(std::move(peers)),
        peer_world_ranks_(std::move(peer_world_ranks)) {}

  const std::string& operation() const { return operation_; }
  // The ranks (in the communicator that timed out, and in the world) this rank waited for.
  const std::vector<int>& peers() const { return peers_; }
  const std::vector<int>& peer_world_ranks() const { return peer_world_ranks_; }

 private:
  std::string operation_;
  std::vector<int> peers_;
  std::vector<int> peer_world_ranks_;
};

// Builds CommTimeout's message; backends share it so every timeout reads the same.
std::string timeout_message(int rank, int size, int world_rank, std::string_view operation,
                            std::chrono::milliseconds timeout, const std::vector<int>& peers,
                            const std::vector<int>& peer_world_ranks, std::string_view note);

// The element types collectives understand.
enum class DType : std::uint8_t { F32, F64, I64 };
// The reductions all-reduces apply (max: the parallel cross-entropy's row maximum).
enum class ReduceOp : std::uint8_t { Sum, Max };
std::string_view reduce_op_name(ReduceOp op);  // "sum", "max"
std::size_t dtype_size(DType t);
std::string_view dtype_name(DType t);  // "f32", "f64", "i64"

// One posted non-blocking operation, as a backend implements it.
class RequestImpl {
 public:
  virtual ~RequestImpl() = default;
  // True once complete (and on every later call). Drives progress on backends that need it
  // (MPI). Throws CommError if the operation failed.
  virtual bool test() = 0;
  // Blocks until complete, at most the communicator's timeout, then throws CommTimeout.
  virtual void wait() = 0;
  // Waits at most `slice` for completion and returns whether it completed (no timeout error).
  // `waited`: how long the caller has been waiting for progress so far, so a backend can
  // apply the policy its wait() applies over a long wait (MPI: stop spinning when the machine
  // is crowded). The default polls test(), yielding between polls.
  virtual bool wait_for(std::chrono::microseconds slice, std::chrono::microseconds waited);
};

// A value handle on a posted operation; default-constructed means already complete. Its
// buffer must stay alive and untouched (sends: unmodified) until test() returned true or wait()
// returned. Copies share the operation.
class Request {
 public:
  Request() = default;
  explicit Request(std::shared_ptr<RequestImpl> impl) : impl_(std::move(impl)) {}

  bool test();
  void wait();
  // RequestImpl::wait_for: at most `slice`, true when complete. For callers that watch several
  // requests and must not block on one (AllreduceQueue).
  bool wait_for(std::chrono::microseconds slice, std::chrono::microseconds waited);

 private:
  std::shared_ptr<RequestImpl> impl_;
};

// Waits for each request in turn (each bounded by its own communicator's timeout).
void wait_all(std::span<Request> requests);

// The backend interface behind Communicator. Collective pieces are already cut to at most
// options().chunk_bytes; arguments are already checked. Implementations: local/local_comm.cpp,
// mpi/mpi_comm.cpp, nccl/nccl_comm.cpp, and the adapter staged_comm.cpp over any of them. `what`
// describes the operation for error messages.
class CommImpl {
 public:
  virtual ~CommImpl() = default;
  virtual std::string_view backend() const = 0;  // "local", "mpi" or "nccl"
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const std::vector<int>& world_ranks() const = 0;  // world rank of each rank
  virtual const CommOptions& options() const = 0;

  virtual std::shared_ptr<CommImpl> split(int color, int key) = 0;  // null for color < 0
  virtual std::shared_ptr<CommImpl> create_group(const std::vector<int>& ranks) = 0;
  virtual Request isend(std::span<const std::byte> data, int dest, int tag) = 0;
  virtual Request irecv(std::span<std::byte> data, int src, int tag) = 0;
  virtual Request iallreduce(void* data, std::size_t count, DType type, ReduceOp op,
                             std::string what) = 0;
  virtual Request ibroadcast(std::span<std::byte> data, int root, std::string what) = 0;
  virtual Request ibarrier() = 0;
  // Rank 0's `out` receives size() * count elements in rank order; other ranks pass nullptr.
  virtual Request igather(const void* in, void* out, std::size_t count, DType type) = 0;

  // After a timeout every later operation throws CommError naming the first failure.
  void mark_broken(const std::string& why);
  void check_usable(std::string_view operation) const;

 private:
  std::string broken_;
};

// A value handle on a group of ranks (MLX's Group shape): copies share one communicator, which
// lives until the last copy goes. A handle is used by one thread at a time. All ranks of a
// communicator must issue its collectives (blocking or not) in the same order with the same
// sizes; point-to-point messages between two ranks with one tag arrive in the order sent.
class Communicator {
 public:
  // User tags are [0, kMaxTag]; the few above it are reserved for the backends' own messages.
  static constexpr int kMaxTag = 30000;

  Communicator() = default;  // the null communicator (what split returns to color < 0)
  explicit Communicator(std::shared_ptr<CommImpl> impl) : impl_(std::move(impl)) {}

  bool is_null() const { return impl_ == nullptr; }
  // Whether two handles share one communicator (copies do; two groups of the same ranks don't).
  bool same_as(const Communicator& other) const { return impl_ == other.impl_; }
  std::string_view backend() const;
  int rank() const;
  int size() const;
  int world_rank(int rank) const;
  const std::vector<int>& world_ranks() const;
  const CommOptions& options() const;

  // MPI_Comm_split semantics: collective over all ranks of this communicator; ranks with the
  // same color form a group ordered by (key, rank); color < 0 joins none (null handle).
  Communicator split(int color, int key) const;
  // A sub-communicator over `ranks` (ranks of this communicator, ascending, containing the
  // caller). Collective over the members only: non-members do not call it. Members must create
  // overlapping groups in the same order (the runtime uses one global order).
  Communicator create_group(std::span<const int> ranks) const;

  // Point-to-point. A receive's buffer must have exactly the size of the message.
  void send_bytes(std::span<const std::byte> data, int dest, int tag) const;
  void recv_bytes(std::span<std::byte> data, int src, int tag) const;
  Request isend_bytes(std::span<const std::byte> data, int dest, int tag) const;
  Request irecv_bytes(std::span<std::byte> data, int src, int tag) const;
  template <class T>
  void send(std::span<T> data, int dest, int tag) const {
    static_assert(std::is_trivially_copyable_v<T>);
    send_bytes(std::as_bytes(data), dest, tag);
  }
  template <class T>
  void recv(std::span<T> data, int src, int tag) const {
    recv_bytes(std::as_writable_bytes(data), src, tag);
  }
  template <class T>
  Request isend(std::span<T> data, int dest, int tag) const {
    static_assert(std::is_trivially_copyable_v<T>);
    return isend_bytes(std::as_bytes(data), dest, tag);
  }
  template <class T>
  Request irecv(std::span<T> data, int src, int tag) const {
    return irecv_bytes(std::as_writable_bytes(data), src, tag);
  }

  // In-place sum over all ranks; every rank passes the same element count. The non-blocking
  // form posts every piece at once and returns one Request for all of them.
  void allreduce_sum(std::span<float> data) const;
  void allreduce_sum(std::span<double> data) const;
  Request iallreduce_sum(std::span<float> data) const;
  Request iallreduce_sum(std::span<double> data) const;
  // In-place element-wise maximum over all ranks (exact: every rank gets the same bytes).
  void allreduce_max(std::span<float> data) const;
  void allreduce_max(std::span<double> data) const;

  // Root's bytes overwrite everyone's; every rank passes the same size.
  void broadcast_bytes(std::span<std::byte> data, int root) const;
  template <class T>
  void broadcast(std::span<T> data, int root) const {
    static_assert(std::is_trivially_copyable_v<T>);
    broadcast_bytes(std::as_writable_bytes(data), root);
  }

  void barrier() const;

  // Small values (timings, counters) to rank 0: rank 0 gets size() * values.size() elements in
  // rank order, other ranks an empty vector. Every rank passes the same count.
  std::vector<double> gather(std::span<const double> values) const;
  std::vector<std::int64_t> gather(std::span<const std::int64_t> values) const;

 private:
  CommImpl& impl(std::string_view operation) const;
  template <class T>
  Request post_allreduce(std::span<T> data, DType type, ReduceOp op, bool blocking) const;

  std::shared_ptr<CommImpl> impl_;
};

}  // namespace eth
