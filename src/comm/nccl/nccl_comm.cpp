// The NCCL backend (nccl_comm.h). Plain C++ against NCCL's and the CUDA runtime's C APIs (no
// nvcc). Each communicator owns an NCCL communicator, a non-blocking stream and a one-float
// device scratch for barriers; requests are CUDA events recorded on that stream after the
// operation, polled with a deadline. Never run on a GPU yet (docs/gpu.md).
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "comm/nccl/nccl_comm.h"

namespace eth {
namespace {

void check_nccl(ncclResult_t r, const char* call, const char* file, int line) {
  if (r == ncclSuccess) return;
  throw CommError(std::string("[comm] ") + call + " at " + file + ":" + std::to_string(line) +
                  ": " + ncclGetErrorString(r));
}
void check_cuda(cudaError_t e, const char* call, const char* file, int line) {
  if (e == cudaSuccess) return;
  throw CommError(std::string("[comm] ") + call + " at " + file + ":" + std::to_string(line) +
                  ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}
#define ETH_NCCL_CHECK(call) check_nccl((call), #call, __FILE__, __LINE__)
#define ETH_NCCL_CUDA_CHECK(call) check_cuda((call), #call, __FILE__, __LINE__)

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::F32: return ncclFloat32;
    case DType::F64: return ncclFloat64;
    case DType::I64: return ncclInt64;
  }
  throw CommError("[comm] nccl: unknown element type");
}

ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::Sum ? ncclSum : ncclMax; }

// What a communicator and its requests share. Destroyed with the last of them.
struct NcclState {
  ncclComm_t comm = nullptr;  // null once aborted
  cudaStream_t stream = nullptr;
  float* scratch = nullptr;  // one float on the device: the barrier's all-reduce
  int device = 0;

  NcclState() = default;
  NcclState(const NcclState&) = delete;
  NcclState& operator=(const NcclState&) = delete;
  ~NcclState() {
    if (comm != nullptr) (void)ncclCommDestroy(comm);
    if (scratch != nullptr) (void)cudaFree(scratch);
    if (stream != nullptr) (void)cudaStreamDestroy(stream);
  }
  void abort() {
    if (comm != nullptr) (void)ncclCommAbort(comm);
    comm = nullptr;
  }
};

// The stream and scratch of a fresh NCCL communicator on `device`.
std::shared_ptr<NcclState> make_state(ncclComm_t comm, int device) {
  auto s = std::make_shared<NcclState>();
  s->comm = comm;
  s->device = device;
  ETH_NCCL_CUDA_CHECK(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
  ETH_NCCL_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&s->scratch), sizeof(float)));
  return s;
}

// A new NCCL communicator over the ranks of `host`: rank 0's unique id broadcast over it.
std::shared_ptr<NcclState> bootstrap(const Communicator& host, int device) {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess || n == 0) {
    (void)cudaGetLastError();
    throw CommError(std::string("[comm] nccl: no GPU on this machine (") +
                    (err != cudaSuccess ? cudaGetErrorString(err) : "0 devices") + ")");
  }
  if (device < 0 || device >= n) {
    throw CommError("[comm] nccl: GPU " + std::to_string(device) + " does not exist (" +
                    std::to_string(n) + " here)");
  }
  ETH_NCCL_CUDA_CHECK(cudaSetDevice(device));
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (host.rank() == 0) ETH_NCCL_CHECK(ncclGetUniqueId(&id));
  host.broadcast_bytes(std::as_writable_bytes(std::span<ncclUniqueId>(&id, 1)), 0);
  ncclComm_t comm = nullptr;
  ETH_NCCL_CHECK(ncclCommInitRank(&comm, host.size(), id, host.rank()));
  return make_state(comm, device);
}

class NcclImpl;

class NcclRequest : public RequestImpl {
 public:
  NcclRequest(std::shared_ptr<NcclImpl> owner, cudaEvent_t done, std::string what,
              std::vector<int> peers)
      : owner_(std::move(owner)), done_(done), what_(std::move(what)), peers_(std::move(peers)) {}
  ~NcclRequest() override { (void)cudaEventDestroy(done_); }
  NcclRequest(const NcclRequest&) = delete;
  NcclRequest& operator=(const NcclRequest&) = delete;

  bool test() override;
  void wait() override;

 private:
  std::shared_ptr<NcclImpl> owner_;
  cudaEvent_t done_;
  std::string what_;
  std::vector<int> peers_;
  bool complete_ = false;
};

class NcclImpl : public CommImpl, public std::enable_shared_from_this<NcclImpl> {
 public:
  NcclImpl(Communicator host, std::shared_ptr<NcclState> state)
      : host_(std::move(host)), state_(std::move(state)) {}

  std::string_view backend() const override { return "nccl"; }
  int rank() const override { return host_.rank(); }
  int size() const override { return host_.size(); }
  const std::vector<int>& world_ranks() const override { return host_.world_ranks(); }
  const CommOptions& options() const override { return host_.options(); }
  NcclState& state() { return *state_; }

  std::shared_ptr<CommImpl> split(int color, int key) override {
    Communicator sub = host_.split(color, key);  // collective over every rank, as NCCL's
    ncclComm_t comm = nullptr;
    ETH_NCCL_CHECK(
        ncclCommSplit(live("split"), color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &comm, nullptr));
    if (color < 0) return nullptr;
    return std::make_shared<NcclImpl>(sub, make_state(comm, state_->device));
  }

  // NCCL's split is collective over the parent, create_group over the members only: a new
  // communicator bootstrapped over the host group instead.
  std::shared_ptr<CommImpl> create_group(const std::vector<int>& ranks) override {
    Communicator sub = host_.create_group(ranks);
    return std::make_shared<NcclImpl>(sub, bootstrap(sub, state_->device));
  }

  Request isend(std::span<const std::byte> data, int dest, int /*tag*/) override {
    before();
    ETH_NCCL_CHECK(ncclSend(data.data(), data.size(), ncclUint8, dest, live("send"),
                            state_->stream));
    return after("send of " + std::to_string(data.size()) + " bytes", {dest});
  }

  Request irecv(std::span<std::byte> data, int src, int /*tag*/) override {
    before();
    ETH_NCCL_CHECK(ncclRecv(data.data(), data.size(), ncclUint8, src, live("recv"),
                            state_->stream));
    return after("recv of " + std::to_string(data.size()) + " bytes", {src});
  }

  Request iallreduce(void* data, std::size_t count, DType type, ReduceOp op,
                     std::string what) override {
    before();
    ETH_NCCL_CHECK(ncclAllReduce(data, data, count, nccl_type(type), nccl_op(op),
                                 live("allreduce"), state_->stream));
    return after(std::move(what), others());
  }

  Request ibroadcast(std::span<std::byte> data, int root, std::string what) override {
    before();
    ETH_NCCL_CHECK(ncclBroadcast(data.data(), data.data(), data.size(), ncclUint8, root,
                                 live("broadcast"), state_->stream));
    return after(std::move(what), others());
  }

  Request ibarrier() override {
    before();
    ETH_NCCL_CHECK(ncclAllReduce(state_->scratch, state_->scratch, 1, ncclFloat32, ncclSum,
                                 live("barrier"), state_->stream));
    return after("barrier", others());
  }

  // Host values (timings, counters): over the host communicator, complete on return.
  Request igather(const void* in, void* out, std::size_t count, DType type) override {
    if (type == DType::F64) {
      const std::vector<double> all =
          host_.gather(std::span<const double>(static_cast<const double*>(in), count));
      if (!all.empty()) std::memcpy(out, all.data(), all.size() * sizeof(double));
    } else if (type == DType::I64) {
      const std::vector<std::int64_t> all = host_.gather(
          std::span<const std::int64_t>(static_cast<const std::int64_t*>(in), count));
      if (!all.empty()) std::memcpy(out, all.data(), all.size() * sizeof(std::int64_t));
    } else {
      throw CommError("[comm] nccl: gather takes f64 or i64 host values");
    }
    return Request();
  }

  // Every rank but this one (what a collective waits for).
  std::vector<int> others() const {
    std::vector<int> r;
    for (int i = 0; i < size(); ++i) {
      if (i != rank()) r.push_back(i);
    }
    return r;
  }

 private:
  ncclComm_t live(const char* operation) const {
    if (state_->comm == nullptr) {
      throw CommError(std::string("[comm] nccl: ") + operation + " on an aborted communicator");
    }
    return state_->comm;
  }

  // The operation starts after what the calling thread queued on its stream (its data).
  void before() {
    cudaEvent_t ready = nullptr;
    ETH_NCCL_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    ETH_NCCL_CUDA_CHECK(cudaEventRecord(ready, cudaStreamPerThread));
    ETH_NCCL_CUDA_CHECK(cudaStreamWaitEvent(state_->stream, ready, 0));
    (void)cudaEventDestroy(ready);  // released once it has fired
  }

  Request after(std::string what, std::vector<int> peers) {
    cudaEvent_t done = nullptr;
    ETH_NCCL_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    ETH_NCCL_CUDA_CHECK(cudaEventRecord(done, state_->stream));
    return Request(std::make_shared<NcclRequest>(shared_from_this(), done, std::move(what),
                                                 std::move(peers)));
  }

  Communicator host_;
  std::shared_ptr<NcclState> state_;
};

bool NcclRequest::test() {
  if (complete_) return true;
  const cudaError_t e = cudaEventQuery(done_);
  if (e == cudaSuccess) return complete_ = true;
  if (e != cudaErrorNotReady) {
    owner_->state().abort();
    owner_->mark_broken("[comm] nccl " + what_ + ": " + cudaGetErrorString(e));
    throw CommError("[comm] nccl " + what_ + " failed: " + cudaGetErrorString(e));
  }
  ncclResult_t async = ncclSuccess;
  if (owner_->state().comm != nullptr) {
    ETH_NCCL_CHECK(ncclCommGetAsyncError(owner_->state().comm, &async));
  }
  if (async != ncclSuccess && async != ncclInProgress) {
    owner_->state().abort();
    const std::string why = "[comm] nccl " + what_ + " failed: " + ncclGetErrorString(async);
    owner_->mark_broken(why);
    throw CommError(why);
  }
  return false;
}

void NcclRequest::wait() {
  const auto deadline = std::chrono::steady_clock::now() + owner_->options().timeout;
  while (!test()) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::vector<int> world;
      for (const int p : peers_) {
        world.push_back(owner_->world_ranks()[static_cast<std::size_t>(p)]);
      }
      const int me = owner_->rank();
      const std::string message = timeout_message(
          me, owner_->size(), owner_->world_ranks()[static_cast<std::size_t>(me)], what_,
          owner_->options().timeout, peers_, world, "the NCCL communicator was aborted");
      owner_->state().abort();
      owner_->mark_broken(message);
      throw CommTimeout(message, what_, peers_, world);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace

bool nccl_compiled() { return true; }

Communicator make_nccl_communicator(const Communicator& host, int device) {
  if (host.is_null()) throw CommError("[comm] nccl: the host communicator is null");
  return Communicator(std::make_shared<NcclImpl>(host, bootstrap(host, device)));
}

}  // namespace eth
