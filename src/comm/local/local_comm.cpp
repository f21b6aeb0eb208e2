// LocalWorld backend: ranks are threads sharing one World (one mutex, one condition variable).
// A collective is a Round every member joins; the last to arrive executes it for everyone, so
// a non-blocking collective completes without any progress calls. Point-to-point messages are
// matched per (source, destination, tag) in order; a send completes only when its receive is
// matched (MPI_Ssend semantics), so code that works here never relies on MPI eager buffering.
#include "comm/local/local_comm.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

#include "core/error.h"

namespace eth {

namespace {

using Clock = std::chrono::steady_clock;

struct World {
  std::mutex mu;
  std::condition_variable cv;
  CommOptions options;
  // Set: every message, all-reduce and broadcast buffer is this device's memory.
  const DeviceMemoryOps* device = nullptr;
};

// Completion of one posted operation; guarded by World::mu.
struct OpState {
  bool done = false;
  std::string error;  // set together with done when the operation failed
};

struct Group;

// One member's part in a collective.
struct Contribution {
  bool present = false;
  std::string signature;  // "allreduce_sum f32 x100": all members must agree
  void* data = nullptr;
  const void* in = nullptr;
  int color = 0;
  int key = 0;
};

struct Round {
  explicit Round(std::size_t n) : parts(n) {}
  std::vector<Contribution> parts;  // by index in the round (group rank, or position in a
                                    // create_group member list)
  std::size_t arrived = 0;
  OpState state;
  std::string abandoned;  // a member timed out here: late arrivals fail with this reason
  std::vector<std::shared_ptr<Group>> new_groups;  // split / create_group results, by index
  std::vector<int> new_ranks;
};

struct P2pOp {
  const std::byte* send_data = nullptr;
  std::byte* recv_data = nullptr;
  std::size_t size = 0;
  OpState state;
};

using P2pKey = std::tuple<int, int, int>;  // (source, destination, tag) as group ranks
using P2pQueues = std::map<P2pKey, std::deque<std::shared_ptr<P2pOp>>>;
using CreateKey = std::pair<std::vector<int>, std::uint64_t>;  // (members, n-th creation)

struct Group {
  std::vector<int> members;  // world rank of each group rank
  std::map<std::uint64_t, std::shared_ptr<Round>> rounds;
  std::map<CreateKey, std::shared_ptr<Round>> creations;
  P2pQueues sends;  // posted sends not yet matched
  P2pQueues recvs;  // posted receives not yet matched
};

void deliver(const World& world, P2pOp& send, P2pOp& recv, const P2pKey& key) {
  if (send.size != recv.size) {
    recv.state.error = "[comm] rank " + std::to_string(std::get<1>(key)) + ": receive of " +
                       std::to_string(recv.size) + " bytes from rank " +
                       std::to_string(std::get<0>(key)) + " (tag " +
                       std::to_string(std::get<2>(key)) + ") matched a message of " +
                       std::to_string(send.size) + " bytes";
  } else if (send.size > 0 && world.device != nullptr) {
    world.device->copy(recv.recv_data, send.send_data, send.size);
  } else if (send.size > 0) {
    std::memcpy(recv.recv_data, send.send_data, send.size);
  }
  send.state.done = true;
  recv.state.done = true;
}

template <class T>
void reduce_in_rank_order(Round& round, std::size_t count, ReduceOp op) {
  // acc = x_0 + x_1 + ... + x_{n-1}, left to right, in T: the documented summation order.
  const T* first = static_cast<const T*>(round.parts[0].data);
  std::vector<T> acc(first, first + count);
  for (std::size_t p = 1; p < round.parts.size(); ++p) {
    const T* x = static_cast<const T*>(round.parts[p].data);
    if (op == ReduceOp::Sum) {
      for (std::size_t i = 0; i < count; ++i) acc[i] += x[i];
    } else {
      for (std::size_t i = 0; i < count; ++i) acc[i] = std::max(acc[i], x[i]);
    }
  }
  for (Contribution& c : round.parts) std::copy(acc.begin(), acc.end(), static_cast<T*>(c.data));
}

// The same on device buffers: rank 0's buffer becomes the sum (rank 0's value, plus rank 1's,
// ... in the element type, the host form's order), then every other rank's gets its bytes.
void reduce_on_device(const DeviceMemoryOps& device, Round& round, std::size_t count, DType type,
                      ReduceOp op) {
  if (count == 0) return;
  void* acc = round.parts[0].data;
  for (std::size_t p = 1; p < round.parts.size(); ++p) {
    device.reduce(acc, round.parts[p].data, count, type, op);
  }
  for (std::size_t p = 1; p < round.parts.size(); ++p) {
    if (round.parts[p].data != acc) device.copy(round.parts[p].data, acc, count * dtype_size(type));
  }
}

class LocalImpl;

// Waits for a Round; on timeout names the members that never arrived.
class RoundRequest : public RequestImpl {
 public:
  RoundRequest(std::shared_ptr<LocalImpl> owner, std::shared_ptr<Round> round,
               std::vector<int> ranks, std::string what)
      : owner_(std::move(owner)),
        round_(std::move(round)),
        ranks_(std::move(ranks)),
        what_(std::move(what)) {}
  bool test() override;
  void wait() override;

 private:
  bool finish();  // called with the lock held once done: throws the round's error

  std::shared_ptr<LocalImpl> owner_;
  std::shared_ptr<Round> round_;
  std::vector<int> ranks_;  // group rank of each index of the round
  std::string what_;
};

// Waits for one send or receive; on timeout withdraws it (so no one touches its buffer later).
class P2pRequest : public RequestImpl {
 public:
  P2pRequest(std::shared_ptr<LocalImpl> owner, std::shared_ptr<P2pOp> op, P2pQueues* queue,
             P2pKey key, int peer, std::string what)
      : owner_(std::move(owner)),
        op_(std::move(op)),
        queue_(queue),
        key_(key),
        peer_(peer),
        what_(std::move(what)) {}
  bool test() override;
  void wait() override;

 private:
  std::shared_ptr<LocalImpl> owner_;
  std::shared_ptr<P2pOp> op_;
  P2pQueues* queue_;  // the queue op_ waits in while unmatched (owned by the group)
  P2pKey key_;
  int peer_;
  std::string what_;
};

class LocalImpl : public CommImpl, public std::enable_shared_from_this<LocalImpl> {
 public:
  LocalImpl(std::shared_ptr<World> world, std::shared_ptr<Group> group, int rank)
      : world_(std::move(world)), group_(std::move(group)), rank_(rank) {}

  std::string_view backend() const override { return "local"; }
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(group_->members.size()); }
  const std::vector<int>& world_ranks() const override { return group_->members; }
  const CommOptions& options() const override { return world_->options; }
  World& world() { return *world_; }
  Group& group() { return *group_; }

  std::shared_ptr<CommImpl> split(int color, int key) override {
    Contribution c;
    c.signature = "split";
    c.color = color;
    c.key = key;
    auto round = join_round(std::move(c), [this](Round& r) { execute_split(r); });
    RoundRequest(shared_from_this(), round, {}, "split").wait();
    const auto me = static_cast<std::size_t>(rank_);
    if (!round->new_groups[me]) return nullptr;
    return std::make_shared<LocalImpl>(world_, round->new_groups[me], round->new_ranks[me]);
  }

  std::shared_ptr<CommImpl> create_group(const std::vector<int>& ranks) override {
    std::unique_lock lk(world_->mu);
    const CreateKey key{ranks, creations_[ranks]++};
    std::shared_ptr<Round>& slot = group_->creations[key];
    if (!slot) slot = std::make_shared<Round>(ranks.size());
    const std::shared_ptr<Round> round = slot;
    const auto me = static_cast<std::size_t>(
        std::lower_bound(ranks.begin(), ranks.end(), rank_) - ranks.begin());
    Contribution c;
    c.signature = "create_group";
    arrive(*round, me, std::move(c), "create_group");
    if (round->arrived == ranks.size()) {
      auto g = std::make_shared<Group>();
      for (int r : ranks) g->members.push_back(group_->members[static_cast<std::size_t>(r)]);
      round->new_groups.assign(ranks.size(), g);
      complete(*round);
      group_->creations.erase(key);
    }
    lk.unlock();
    RoundRequest(shared_from_this(), round, ranks, "create_group").wait();
    return std::make_shared<LocalImpl>(world_, round->new_groups[me], static_cast<int>(me));
  }

  Request isend(std::span<const std::byte> data, int dest, int tag) override {
    hand_over();
    auto op = std::make_shared<P2pOp>();
    op->send_data = data.data();
    op->size = data.size();
    const P2pKey key{rank_, dest, tag};
    post_p2p(op, key, group_->recvs, group_->sends, /*is_send=*/true);
    return Request(std::make_shared<P2pRequest>(
        shared_from_this(), op, &group_->sends, key, dest,
        "send of " + std::to_string(data.size()) + " bytes to rank " + std::to_string(dest) +
            " (tag " + std::to_string(tag) + ")"));
  }

  Request irecv(std::span<std::byte> data, int src, int tag) override {
    hand_over();
    auto op = std::make_shared<P2pOp>();
    op->recv_data = data.data();
    op->size = data.size();
    const P2pKey key{src, rank_, tag};
    post_p2p(op, key, group_->sends, group_->recvs, /*is_send=*/false);
    return Request(std::make_shared<P2pRequest>(
        shared_from_this(), op, &group_->recvs, key, src,
        "receive of " + std::to_string(data.size()) + " bytes from rank " + std::to_string(src) +
            " (tag " + std::to_string(tag) + ")"));
  }

  Request iallreduce(void* data, std::size_t count, DType type, ReduceOp op,
                     std::string what) override {
    Contribution c;
    c.signature = "allreduce_" + std::string(reduce_op_name(op)) + " " +
                  std::string(dtype_name(type)) + " x" + std::to_string(count);
    c.data = data;
    hand_over();
    const DeviceMemoryOps* device = world_->device;
    ETH_CHECK(device == nullptr || type != DType::I64, "an i64 all-reduce on device memory");
    auto round = join_round(std::move(c), [count, type, op, device](Round& r) {
      if (device != nullptr) return reduce_on_device(*device, r, count, type, op);
      if (type == DType::F32) reduce_in_rank_order<float>(r, count, op);
      if (type == DType::F64) reduce_in_rank_order<double>(r, count, op);
      if (type == DType::I64) reduce_in_rank_order<std::int64_t>(r, count, op);
    });
    return Request(std::make_shared<RoundRequest>(shared_from_this(), round, std::vector<int>{},
                                                  std::move(what)));
  }

  Request ibroadcast(std::span<std::byte> data, int root, std::string what) override {
    Contribution c;
    c.signature = "broadcast of " + std::to_string(data.size()) + " bytes from rank " +
                  std::to_string(root);
    c.data = data.data();
    const std::size_t n = data.size();
    hand_over();
    const DeviceMemoryOps* device = world_->device;
    auto round = join_round(std::move(c), [n, root, device](Round& r) {
      const void* src = r.parts[static_cast<std::size_t>(root)].data;
      for (Contribution& part : r.parts) {
        if (part.data == src || n == 0) continue;
        if (device != nullptr) {
          device->copy(part.data, src, n);
        } else {
          std::memcpy(part.data, src, n);
        }
      }
    });
    return Request(std::make_shared<RoundRequest>(shared_from_this(), round, std::vector<int>{},
                                                  std::move(what)));
  }

  Request ibarrier() override {
    Contribution c;
    c.signature = "barrier";
    auto round = join_round(std::move(c), [](Round&) {});
    return Request(
        std::make_shared<RoundRequest>(shared_from_this(), round, std::vector<int>{}, "barrier"));
  }

  Request igather(const void* in, void* out, std::size_t count, DType type) override {
    Contribution c;
    c.signature = "gather " + std::string(dtype_name(type)) + " x" + std::to_string(count);
    c.in = in;
    c.data = out;
    const std::size_t bytes = count * dtype_size(type);
    auto round = join_round(std::move(c), [bytes](Round& r) {
      auto* dst = static_cast<std::byte*>(r.parts[0].data);
      for (std::size_t p = 0; p < r.parts.size() && bytes > 0; ++p) {
        std::memcpy(dst + p * bytes, r.parts[p].in, bytes);
      }
    });
    return Request(std::make_shared<RoundRequest>(shared_from_this(), round, std::vector<int>{},
                                                  "gather of " + std::to_string(count) + " " +
                                                      std::string(dtype_name(type))));
  }

  // Marks that this rank has arrived at `round`; throws if the round was abandoned. Lock held.
  void arrive(Round& round, std::size_t index, Contribution c, std::string_view what) {
    if (!round.abandoned.empty()) {
      const std::string why = "[comm] rank " + std::to_string(rank_) + ": " + std::string(what) +
                              " arrived after its peers gave up: " + round.abandoned;
      mark_broken(why);
      throw CommError(why);
    }
    ETH_CHECK(!round.parts[index].present, "a rank joined one collective round twice");
    c.present = true;
    round.parts[index] = std::move(c);
    ++round.arrived;
  }

  // Marks a round complete (or failed on mismatched signatures) and wakes the waiters. Lock held.
  void complete(Round& round) {
    round.state.done = true;
    world_->cv.notify_all();
  }

 private:
  // On a device world, the work this thread queued on its stream (the buffer it hands over, or
  // the one it will read after a receive) is done before another thread's copy touches it.
  void hand_over() const {
    if (world_->device != nullptr) world_->device->synchronize();
  }

  // Joins the next collective round of this group; the last arrival runs `execute`.
  template <class Execute>
  std::shared_ptr<Round> join_round(Contribution c, Execute execute) {
    std::lock_guard lk(world_->mu);
    const std::uint64_t seq = next_round_++;
    std::shared_ptr<Round>& slot = group_->rounds[seq];
    if (!slot) slot = std::make_shared<Round>(group_->members.size());
    const std::shared_ptr<Round> round = slot;
    const std::string what = c.signature;
    arrive(*round, static_cast<std::size_t>(rank_), std::move(c), what);
    if (round->arrived == round->parts.size()) {
      const std::string mismatch = find_mismatch(*round);
      if (mismatch.empty()) {
        execute(*round);
      } else {
        round->state.error = "[comm] collectives do not match on round " + std::to_string(seq) +
                             ": " + mismatch;
      }
      complete(*round);
      group_->rounds.erase(seq);
    }
    return round;
  }

  static std::string find_mismatch(const Round& round) {
    for (std::size_t p = 1; p < round.parts.size(); ++p) {
      if (round.parts[p].signature != round.parts[0].signature) {
        return "rank 0 called " + round.parts[0].signature + ", rank " + std::to_string(p) +
               " called " + round.parts[p].signature;
      }
    }
    return "";
  }

  void execute_split(Round& round) {
    std::map<int, std::vector<std::pair<int, int>>> by_color;  // color -> (key, rank)
    for (std::size_t r = 0; r < round.parts.size(); ++r) {
      if (round.parts[r].color >= 0) {
        by_color[round.parts[r].color].emplace_back(round.parts[r].key, static_cast<int>(r));
      }
    }
    round.new_groups.assign(round.parts.size(), nullptr);
    round.new_ranks.assign(round.parts.size(), -1);
    for (auto& [color, members] : by_color) {
      std::sort(members.begin(), members.end());
      auto g = std::make_shared<Group>();
      for (std::size_t i = 0; i < members.size(); ++i) {
        const auto r = static_cast<std::size_t>(members[i].second);
        g->members.push_back(group_->members[r]);
        round.new_groups[r] = g;
        round.new_ranks[r] = static_cast<int>(i);
      }
    }
  }

  // Matches `op` against the first waiting counterpart, or queues it. `is_send` says which.
  void post_p2p(const std::shared_ptr<P2pOp>& op, const P2pKey& key, P2pQueues& counterparts,
                P2pQueues& own, bool is_send) {
    std::lock_guard lk(world_->mu);
    auto it = counterparts.find(key);
    if (it == counterparts.end()) {
      own[key].push_back(op);
      return;
    }
    const std::shared_ptr<P2pOp> other = it->second.front();
    it->second.pop_front();
    if (it->second.empty()) counterparts.erase(it);
    if (is_send) {
      deliver(*world_, *op, *other, key);
    } else {
      deliver(*world_, *other, *op, key);
    }
    world_->cv.notify_all();
  }

  std::shared_ptr<World> world_;
  std::shared_ptr<Group> group_;
  int rank_;
  std::uint64_t next_round_ = 0;                     // collectives this rank has joined
  std::map<std::vector<int>, std::uint64_t> creations_;  // create_group calls per member list
};

bool RoundRequest::finish() {
  if (!round_->state.error.empty()) {
    owner_->mark_broken(round_->state.error);
    throw CommError(round_->state.error);
  }
  return true;
}

bool RoundRequest::test() {
  std::lock_guard lk(owner_->world().mu);
  return round_->state.done && finish();
}

void RoundRequest::wait() {
  std::unique_lock lk(owner_->world().mu);
  const auto timeout = owner_->options().timeout;
  if (owner_->world().cv.wait_until(lk, Clock::now() + timeout,
                                    [&] { return round_->state.done; })) {
    finish();
    return;
  }
  std::vector<int> peers;
  std::vector<int> world;
  for (std::size_t i = 0; i < round_->parts.size(); ++i) {
    if (round_->parts[i].present) continue;
    const int r = ranks_.empty() ? static_cast<int>(i) : ranks_[i];
    peers.push_back(r);
    world.push_back(owner_->world_ranks()[static_cast<std::size_t>(r)]);
  }
  const int me = owner_->rank();
  const std::string message = timeout_message(
      me, owner_->size(), owner_->world_ranks()[static_cast<std::size_t>(me)], what_, timeout,
      peers, world,
      "they never joined it (a rank that died or stopped calling the same collectives)");
  round_->abandoned = message;
  owner_->mark_broken(message);
  throw CommTimeout(message, what_, peers, world);
}

bool P2pRequest::test() {
  std::lock_guard lk(owner_->world().mu);
  if (!op_->state.done) return false;
  if (!op_->state.error.empty()) throw CommError(op_->state.error);
  return true;
}

void P2pRequest::wait() {
  std::unique_lock lk(owner_->world().mu);
  const auto timeout = owner_->options().timeout;
  if (owner_->world().cv.wait_until(lk, Clock::now() + timeout, [&] { return op_->state.done; })) {
    if (!op_->state.error.empty()) throw CommError(op_->state.error);
    return;
  }
  // Withdraw the unmatched operation so a late peer never writes into (or reads) its buffer.
  auto it = queue_->find(key_);
  if (it != queue_->end()) {
    std::erase(it->second, op_);
    if (it->second.empty()) queue_->erase(it);
  }
  const int me = owner_->rank();
  const int peer_world = owner_->world_ranks()[static_cast<std::size_t>(peer_)];
  const std::string message =
      timeout_message(me, owner_->size(), owner_->world_ranks()[static_cast<std::size_t>(me)],
                      what_, timeout, {peer_}, {peer_world}, "no matching operation was posted");
  owner_->mark_broken(message);
  throw CommTimeout(message, what_, {peer_}, {peer_world});
}

std::vector<Communicator> make_world(int num_ranks, const CommOptions& options,
                                     const DeviceMemoryOps* device) {
  if (num_ranks < 1) {
    throw InputError("comm", "", "num_ranks", "must be >= 1, got " + std::to_string(num_ranks));
  }
  validate(options);
  auto world = std::make_shared<World>();
  world->options = options;
  world->device = device;
  auto group = std::make_shared<Group>();
  for (int r = 0; r < num_ranks; ++r) group->members.push_back(r);
  std::vector<Communicator> comms;
  for (int r = 0; r < num_ranks; ++r) {
    comms.emplace_back(std::make_shared<LocalImpl>(world, group, r));
  }
  return comms;
}

}  // namespace

LocalWorld::LocalWorld(int num_ranks, CommOptions options)
    : comms_(make_world(num_ranks, options, nullptr)) {}

LocalWorld::LocalWorld(int num_ranks, CommOptions options, const DeviceMemoryOps& device)
    : comms_(make_world(num_ranks, options, &device)) {
  ETH_CHECK(device.copy != nullptr && device.reduce != nullptr && device.synchronize != nullptr,
            "LocalWorld: incomplete device memory operations");
}

Communicator LocalWorld::comm(int rank) const {
  ETH_CHECK(rank >= 0 && rank < size(), "LocalWorld::comm: no rank " + std::to_string(rank));
  return comms_[static_cast<std::size_t>(rank)];
}

std::vector<std::exception_ptr> run_on_threads(const LocalWorld& world,
                                               const std::function<void(Communicator)>& body) {
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(world.size()));
  std::vector<std::thread> threads;
  for (int r = 0; r < world.size(); ++r) {
    threads.emplace_back([&, r] {
      try {
        body(world.comm(r));
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return errors;
}

}  // namespace eth
