// Backend-independent half of the communicator: argument checks, cutting collectives into
// pieces of at most chunk_bytes, blocking forms as post-then-wait, and the shared timeout
// message. The backends only ever see one piece at a time.
#include "comm/communicator.h"

#include <algorithm>
#include <cstdio>
#include <thread>

#include "core/error.h"

namespace eth {

namespace {

constexpr std::size_t kMaxChunkBytes = std::size_t{1} << 30;
constexpr std::size_t kMaxWindowBytes = std::size_t{1} << 40;

// One Request over the pieces of a chunked collective.
class MultiRequest : public RequestImpl {
 public:
  explicit MultiRequest(std::vector<Request> parts) : parts_(std::move(parts)) {}

  bool test() override {
    // Test every piece, not just the first pending one: on MPI each test progresses its piece.
    bool all = true;
    for (Request& r : parts_) all = r.test() && all;
    return all;
  }
  void wait() override { wait_all(parts_); }

 private:
  std::vector<Request> parts_;
};

std::string join_ranks(const std::vector<int>& peers, const std::vector<int>& world) {
  std::string out;
  for (std::size_t i = 0; i < peers.size(); ++i) {
    if (i) out += i + 1 == peers.size() ? " and " : ", ";
    out += "rank " + std::to_string(peers[i]);
    if (i < world.size()) out += " (world rank " + std::to_string(world[i]) + ")";
  }
  return out;
}

template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::F32;
  if constexpr (std::is_same_v<T, double>) return DType::F64;
  return DType::I64;
}

}  // namespace

void validate(const CommOptions& options) {
  if (options.timeout.count() <= 0) {
    throw InputError("comm", "", "timeout",
                     "must be > 0 ms, got " + std::to_string(options.timeout.count()));
  }
  if (options.chunk_bytes < sizeof(double) || options.chunk_bytes > kMaxChunkBytes) {
    throw InputError("comm", "", "chunk_bytes",
                     "must be in [8, 1073741824], got " + std::to_string(options.chunk_bytes));
  }
  if (options.window_bytes < sizeof(double) || options.window_bytes > kMaxWindowBytes) {
    throw InputError("comm", "", "window_bytes",
                     "must be in [8, 1099511627776], got " + std::to_string(options.window_bytes));
  }
}

std::string timeout_message(int rank, int size, int world_rank, std::string_view operation,
                            std::chrono::milliseconds timeout, const std::vector<int>& peers,
                            const std::vector<int>& peer_world_ranks, std::string_view note) {
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.3f", static_cast<double>(timeout.count()) / 1000.0);
  std::string out = "[comm] rank " + std::to_string(rank) + "/" + std::to_string(size) +
                    " (world rank " + std::to_string(world_rank) + "): " + std::string(operation) +
                    " timed out after " + seconds + " s waiting for " +
                    (peers.empty() ? std::string("its peers")
                                   : join_ranks(peers, peer_world_ranks));
  if (!note.empty()) out += "; " + std::string(note);
  return out;
}

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return sizeof(float);
    case DType::F64: return sizeof(double);
    case DType::I64: return sizeof(std::int64_t);
  }
  return 0;
}

std::string_view reduce_op_name(ReduceOp op) { return op == ReduceOp::Sum ? "sum" : "max"; }

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F64: return "f64";
    case DType::I64: return "i64";
  }
  return "?";
}

bool Request::test() {
  if (!impl_) return true;
  return impl_->test();
}

void Request::wait() {
  if (impl_) impl_->wait();
}

bool Request::wait_for(std::chrono::microseconds slice, std::chrono::microseconds waited) {
  return impl_ ? impl_->wait_for(slice, waited) : true;
}

bool RequestImpl::wait_for(std::chrono::microseconds slice, std::chrono::microseconds) {
  const auto deadline = std::chrono::steady_clock::now() + slice;
  while (!test()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

void wait_all(std::span<Request> requests) {
  for (Request& r : requests) r.wait();
}

void CommImpl::mark_broken(const std::string& why) {
  if (broken_.empty()) broken_ = why;
}

void CommImpl::check_usable(std::string_view operation) const {
  if (!broken_.empty()) {
    throw CommError("[comm] " + std::string(operation) +
                    ": this communicator is unusable after an earlier failure: " + broken_);
  }
}

CommImpl& Communicator::impl(std::string_view operation) const {
  ETH_CHECK(impl_ != nullptr, std::string(operation) + " on a null communicator");
  impl_->check_usable(operation);
  return *impl_;
}

std::string_view Communicator::backend() const {
  ETH_CHECK(impl_ != nullptr, "backend() of a null communicator");
  return impl_->backend();
}

int Communicator::rank() const {
  ETH_CHECK(impl_ != nullptr, "rank() of a null communicator");
  return impl_->rank();
}

int Communicator::size() const {
  ETH_CHECK(impl_ != nullptr, "size() of a null communicator");
  return impl_->size();
}

int Communicator::world_rank(int r) const {
  const std::vector<int>& w = world_ranks();
  ETH_CHECK(r >= 0 && r < static_cast<int>(w.size()), "world_rank: no rank " + std::to_string(r));
  return w[static_cast<std::size_t>(r)];
}

const std::vector<int>& Communicator::world_ranks() const {
  ETH_CHECK(impl_ != nullptr, "world_ranks() of a null communicator");
  return impl_->world_ranks();
}

const CommOptions& Communicator::options() const {
  ETH_CHECK(impl_ != nullptr, "options() of a null communicator");
  return impl_->options();
}

Communicator Communicator::split(int color, int key) const {
  return Communicator(impl("split").split(color, key));
}

Communicator Communicator::create_group(std::span<const int> ranks) const {
  CommImpl& c = impl("create_group");
  const std::vector<int> members(ranks.begin(), ranks.end());
  bool ascending = !members.empty();
  for (std::size_t i = 0; i < members.size(); ++i) {
    ascending = ascending && members[i] >= 0 && members[i] < c.size() &&
                (i == 0 || members[i - 1] < members[i]);
  }
  ETH_CHECK(ascending, "create_group: ranks must be ascending, distinct ranks of the communicator");
  ETH_CHECK(std::binary_search(members.begin(), members.end(), c.rank()),
            "create_group: rank " + std::to_string(c.rank()) + " is not among the members");
  return Communicator(c.create_group(members));
}

Request Communicator::isend_bytes(std::span<const std::byte> data, int dest, int tag) const {
  CommImpl& c = impl("isend");
  ETH_CHECK(dest >= 0 && dest < c.size(), "isend: no rank " + std::to_string(dest));
  ETH_CHECK(tag >= 0 && tag <= kMaxTag, "isend: tag " + std::to_string(tag) + " out of range");
  return c.isend(data, dest, tag);
}

Request Communicator::irecv_bytes(std::span<std::byte> data, int src, int tag) const {
  CommImpl& c = impl("irecv");
  ETH_CHECK(src >= 0 && src < c.size(), "irecv: no rank " + std::to_string(src));
  ETH_CHECK(tag >= 0 && tag <= kMaxTag, "irecv: tag " + std::to_string(tag) + " out of range");
  return c.irecv(data, src, tag);
}

void Communicator::send_bytes(std::span<const std::byte> data, int dest, int tag) const {
  isend_bytes(data, dest, tag).wait();
}

void Communicator::recv_bytes(std::span<std::byte> data, int src, int tag) const {
  irecv_bytes(data, src, tag).wait();
}

template <class T>
Request Communicator::post_allreduce(std::span<T> data, DType type, ReduceOp op,
                                     bool blocking) const {
  const std::string name = "allreduce_" + std::string(reduce_op_name(op));
  CommImpl& c = impl(name);
  const std::size_t per_piece = std::max<std::size_t>(1, c.options().chunk_bytes / sizeof(T));
  const std::size_t num_pieces = (data.size() + per_piece - 1) / per_piece;
  std::vector<Request> parts;
  for (std::size_t p = 0; p < num_pieces; ++p) {
    const std::size_t begin = p * per_piece;
    const std::size_t count = std::min(per_piece, data.size() - begin);
    std::string what = name + " of " + std::to_string(data.size()) + " " +
                       std::string(dtype_name(type));
    if (num_pieces > 1) {
      what += " (piece " + std::to_string(p + 1) + " of " + std::to_string(num_pieces) + ")";
    }
    Request r = c.iallreduce(data.data() + begin, count, type, op, std::move(what));
    // Blocking: one piece at a time, so at most one chunk's temporaries exist at once.
    if (blocking) {
      r.wait();
    } else {
      parts.push_back(std::move(r));
    }
  }
  if (parts.size() == 1) return parts.front();
  if (parts.empty()) return Request();
  return Request(std::make_shared<MultiRequest>(std::move(parts)));
}

void Communicator::allreduce_sum(std::span<float> data) const {
  post_allreduce(data, dtype_of<float>(), ReduceOp::Sum, true);
}
void Communicator::allreduce_sum(std::span<double> data) const {
  post_allreduce(data, dtype_of<double>(), ReduceOp::Sum, true);
}
Request Communicator::iallreduce_sum(std::span<float> data) const {
  return post_allreduce(data, dtype_of<float>(), ReduceOp::Sum, false);
}
Request Communicator::iallreduce_sum(std::span<double> data) const {
  return post_allreduce(data, dtype_of<double>(), ReduceOp::Sum, false);
}
void Communicator::allreduce_max(std::span<float> data) const {
  post_allreduce(data, dtype_of<float>(), ReduceOp::Max, true);
}
void Communicator::allreduce_max(std::span<double> data) const {
  post_allreduce(data, dtype_of<double>(), ReduceOp::Max, true);
}

void Communicator::broadcast_bytes(std::span<std::byte> data, int root) const {
  CommImpl& c = impl("broadcast");
  ETH_CHECK(root >= 0 && root < c.size(), "broadcast: no rank " + std::to_string(root));
  const std::size_t per_piece = c.options().chunk_bytes;
  for (std::size_t begin = 0; begin < data.size(); begin += per_piece) {
    const std::size_t count = std::min(per_piece, data.size() - begin);
    std::string what = "broadcast of " + std::to_string(data.size()) + " bytes from rank " +
                       std::to_string(root);
    c.ibroadcast(data.subspan(begin, count), root, std::move(what)).wait();
  }
}

void Communicator::barrier() const { impl("barrier").ibarrier().wait(); }

std::vector<double> Communicator::gather(std::span<const double> values) const {
  CommImpl& c = impl("gather");
  std::vector<double> out(c.rank() == 0 ? values.size() * static_cast<std::size_t>(c.size()) : 0);
  c.igather(values.data(), c.rank() == 0 ? out.data() : nullptr, values.size(), DType::F64).wait();
  return out;
}

std::vector<std::int64_t> Communicator::gather(std::span<const std::int64_t> values) const {
  CommImpl& c = impl("gather");
  std::vector<std::int64_t> out(c.rank() == 0 ? values.size() * static_cast<std::size_t>(c.size())
                                              : 0);
  c.igather(values.data(), c.rank() == 0 ? out.data() : nullptr, values.size(), DType::I64).wait();
  return out;
}

}  // namespace eth
