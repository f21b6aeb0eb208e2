// MPI backend (Open MPI). Every operation is posted non-blocking and completed by polling
// MPI_Test with short sleeps, so each wait is bounded by CommOptions::timeout. When a
// collective times out, the ranks stuck in it exchange tokens on a reserved tag for a short
// grace period; whoever stays silent is named as the rank that never arrived. Not thread-safe
// beyond MPI_THREAD_SERIALIZED (calls from several threads, one at a time).
#include <malloc.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <thread>

#include "comm/mpi/mpi_check.h"
#include "comm/mpi/mpi_comm.h"
#include "core/error.h"

namespace eth {

void throw_mpi_error(const char* call, const char* file, int line, int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) len = 0;
  throw CommError("[comm] MPI call failed at " + std::string(file) + ":" + std::to_string(line) +
                  ": " + call + ": " + std::string(text, static_cast<std::size_t>(len)) +
                  " (code " + std::to_string(code) + ")");
}

namespace {

using Clock = std::chrono::steady_clock;

// Tags above Communicator::kMaxTag: the backend's own messages never match a user's.
constexpr int kTagDiagnose = Communicator::kMaxTag + 1;
constexpr int kTagHandshake = Communicator::kMaxTag + 2;
constexpr int kTagCreate = Communicator::kMaxTag + 3;

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::F32: return MPI_FLOAT;
    case DType::F64: return MPI_DOUBLE;
    case DType::I64: return MPI_INT64_T;
  }
  return MPI_DATATYPE_NULL;
}

int mpi_count(std::size_t n) {
  ETH_CHECK(n <= static_cast<std::size_t>(INT_MAX),
            "MPI message of " + std::to_string(n) + " elements exceeds INT_MAX");
  return static_cast<int>(n);
}

// How long a timed-out rank listens for the others stuck in the same collective: they time out
// within the skew of their arrival, which is far below this.
std::chrono::milliseconds diagnose_grace(std::chrono::milliseconds timeout) {
  return std::clamp(timeout / 4, std::chrono::milliseconds(100), std::chrono::milliseconds(10'000));
}

// Polls `req` until complete or `deadline`. A large message moves in many fragments, each
// needing both sides to poll, so the first 5 ms poll without sleeping (sleeping there made an
// 8 MiB transfer 100x slower on a loaded host). When the machine's ranks fill its cores they
// yield between polls: a rank spinning on the core its peer needs (the scheduler put them
// together, or another job holds the other core) made every fragment wait for a time slice; 2
// ranks on 2 cores at load 3 moved 8 MiB in 32 ms spinning, 0.93 ms yielding, and 128 KiB between
// two namespace hosts in 12 ms against 0.11 ms. A yield costs nothing when no one else wants
// the core. A longer wait with more ranks than cores is a real wait (a pipeline bubble, a slow
// peer): it then polls for 50 us out of every 250 us, leaving most of the core to the other
// ranks. With a core per rank it keeps polling: sleeping there stalls a long collective whose
// peer came late (a 14 MB all-reduce of 2 ranks on 2 cores took 25-70 ms sleeping, 14 ms not;
// eth train --trace). Each MPI_Test also progresses non-blocking collectives.
constexpr std::chrono::milliseconds kSpinBurst{5};

bool poll(MPI_Request& req, MPI_Status& status, Clock::time_point deadline, bool oversubscribed,
          bool crowded, Clock::duration waited = Clock::duration::zero()) {
  using std::chrono::microseconds;
  Clock::time_point burst_end =
      Clock::now() + kSpinBurst - std::min<Clock::duration>(waited, kSpinBurst);
  for (;;) {
    int flag = 0;
    ETH_MPI_CHECK(MPI_Test(&req, &flag, &status));
    if (flag) return true;
    const Clock::time_point now = Clock::now();
    if (now >= deadline) return false;
    if (now >= burst_end && crowded) {
      std::this_thread::sleep_for(microseconds(200));
      burst_end = Clock::now() + microseconds(50);
    } else if (oversubscribed) {
      std::this_thread::yield();
    }
  }
}

// Host name of each world rank (MPI_Get_processor_name), shared by every communicator of the
// session; empty when the job runs on one host, where naming it would say nothing.
using HostNames = std::shared_ptr<const std::vector<std::string>>;

class MpiImpl : public CommImpl, public std::enable_shared_from_this<MpiImpl> {
 public:
  MpiImpl(MPI_Comm comm, CommOptions options, bool oversubscribed, bool crowded, HostNames hosts)
      : comm_(comm),
        options_(options),
        oversubscribed_(oversubscribed),
        crowded_(crowded),
        hosts_(std::move(hosts)) {
    ETH_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    ETH_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
    ETH_MPI_CHECK(MPI_Comm_size(comm_, &size_));
    MPI_Group mine = MPI_GROUP_NULL;
    MPI_Group world = MPI_GROUP_NULL;
    ETH_MPI_CHECK(MPI_Comm_group(comm_, &mine));
    ETH_MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    std::vector<int> ranks(static_cast<std::size_t>(size_));
    std::iota(ranks.begin(), ranks.end(), 0);
    world_.resize(ranks.size());
    ETH_MPI_CHECK(MPI_Group_translate_ranks(mine, size_, ranks.data(), world, world_.data()));
    ETH_MPI_CHECK(MPI_Group_free(&mine));
    ETH_MPI_CHECK(MPI_Group_free(&world));
  }

  ~MpiImpl() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    // A destructor cannot report; a failed free only leaks a handle at exit.
    if (!finalized) MPI_Comm_free(&comm_);
  }

  MpiImpl(const MpiImpl&) = delete;
  MpiImpl& operator=(const MpiImpl&) = delete;

  std::string_view backend() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::vector<int>& world_ranks() const override { return world_; }
  const CommOptions& options() const override { return options_; }
  bool oversubscribed() const { return oversubscribed_; }
  bool crowded() const { return crowded_; }

  std::shared_ptr<CommImpl> split(int color, int key) override;
  std::shared_ptr<CommImpl> create_group(const std::vector<int>& ranks) override;
  Request isend(std::span<const std::byte> data, int dest, int tag) override;
  Request irecv(std::span<std::byte> data, int src, int tag) override;
  Request iallreduce(void* data, std::size_t count, DType type, ReduceOp op,
                     std::string what) override;
  Request ibroadcast(std::span<std::byte> data, int root, std::string what) override;
  Request ibarrier() override;
  Request igather(const void* in, void* out, std::size_t count, DType type) override;

  // Sends a token to each of `peers` and listens for theirs until `deadline`; returns the peers
  // not heard from. `values` receives each heard peer's token.
  std::vector<int> exchange_tokens(const std::vector<int>& peers, int tag, long long token,
                                   Clock::time_point deadline, std::vector<long long>& values);
  // After a collective timed out: the ranks that did not time out in it too.
  std::vector<int> absent_peers(std::string& note);
  [[noreturn]] void throw_timeout(const std::string& what, const std::vector<int>& peers,
                                  const std::string& note);

 private:
  Request collective(MPI_Request req, std::string what);

  MPI_Comm comm_;
  CommOptions options_;
  bool oversubscribed_;  // at least as many ranks on this machine as cores
  bool crowded_;         // more ranks on this machine than cores
  HostNames hosts_;
  int rank_ = 0;
  int size_ = 0;
  std::vector<int> world_;
  // Token buffers of sends freed while pending (after a timeout): MPI may still read them.
  std::vector<std::unique_ptr<long long[]>> orphans_;
};

enum class Kind : std::uint8_t { Send, Recv, Collective };

class MpiRequest : public RequestImpl {
 public:
  MpiRequest(std::shared_ptr<MpiImpl> owner, MPI_Request req, Kind kind, int peer,
             std::size_t bytes, std::string what)
      : owner_(std::move(owner)), req_(req), kind_(kind), peer_(peer), bytes_(bytes),
        what_(std::move(what)) {}

  bool test() override {
    if (!failed_.empty()) throw CommError(failed_);
    if (done_) return true;
    int flag = 0;
    MPI_Status status;
    ETH_MPI_CHECK(MPI_Test(&req_, &flag, &status));
    if (flag) finish(status);
    return done_;
  }

  void wait() override {
    if (!failed_.empty()) throw CommError(failed_);
    if (done_) return;
    MPI_Status status;
    if (poll(req_, status, Clock::now() + owner_->options().timeout, owner_->oversubscribed(),
             owner_->crowded())) {
      finish(status);
      return;
    }
    on_timeout();
  }

  // The same polling as wait(), for at most `slice`, the spin burst shortened by what the
  // caller has waited already.
  bool wait_for(std::chrono::microseconds slice, std::chrono::microseconds waited) override {
    if (!failed_.empty()) throw CommError(failed_);
    if (done_) return true;
    MPI_Status status;
    if (poll(req_, status, Clock::now() + slice, owner_->oversubscribed(), owner_->crowded(),
             waited)) {
      finish(status);
    }
    return done_;
  }

 private:
  void finish(const MPI_Status& status) {
    done_ = true;
    if (kind_ != Kind::Recv) return;
    int got = 0;
    ETH_MPI_CHECK(MPI_Get_count(&status, MPI_BYTE, &got));
    if (static_cast<std::size_t>(got) != bytes_) {
      failed_ = "[comm] rank " + std::to_string(owner_->rank()) + ": " + what_ +
                " matched a message of " + std::to_string(got) + " bytes";
      throw CommError(failed_);
    }
  }

  [[noreturn]] void on_timeout() {
    std::vector<int> peers{peer_};
    std::string note;
    switch (kind_) {
      case Kind::Recv:
        // Cancelled so MPI never writes into the buffer after the caller has moved on.
        MPI_Cancel(&req_);
        MPI_Wait(&req_, MPI_STATUS_IGNORE);
        note = "no matching send arrived";
        break;
      case Kind::Send:
        MPI_Request_free(&req_);
        note = "the receiver did not post a matching receive";
        break;
      case Kind::Collective:
        // MPI cannot cancel or free a pending collective: the request is abandoned.
        peers = owner_->absent_peers(note);
        break;
    }
    failed_ = "[comm] " + what_ + " timed out earlier";
    owner_->throw_timeout(what_, peers, note);
  }

  std::shared_ptr<MpiImpl> owner_;
  MPI_Request req_;
  Kind kind_;
  int peer_;           // Send/Recv: the other rank
  std::size_t bytes_;  // Recv: the size the message must have
  std::string what_;
  bool done_ = false;
  std::string failed_;
};

Request MpiImpl::collective(MPI_Request req, std::string what) {
  return Request(std::make_shared<MpiRequest>(shared_from_this(), req, Kind::Collective, -1, 0,
                                              std::move(what)));
}

std::shared_ptr<CommImpl> MpiImpl::split(int color, int key) {
  // MPI_Comm_split has no non-blocking form: a bounded barrier first makes sure every rank has
  // arrived (or names those that have not), then the split itself cannot wait on a missing one.
  MPI_Request req = MPI_REQUEST_NULL;
  ETH_MPI_CHECK(MPI_Ibarrier(comm_, &req));
  collective(req, "split").wait();
  MPI_Comm out = MPI_COMM_NULL;
  ETH_MPI_CHECK(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &out));
  if (out == MPI_COMM_NULL) return nullptr;
  return std::make_shared<MpiImpl>(out, options_, oversubscribed_, crowded_, hosts_);
}

std::shared_ptr<CommImpl> MpiImpl::create_group(const std::vector<int>& ranks) {
  // MPI_Comm_create_group is collective over the members only and blocking. A bounded
  // handshake among the members comes first; its token (a hash of the member list) also
  // catches members that disagree on the group.
  unsigned long long hash = ranks.size();
  for (int r : ranks) hash = hash * 1'000'003u + static_cast<unsigned>(r);
  const auto token = static_cast<long long>(hash);
  std::vector<int> peers;
  for (int r : ranks) {
    if (r != rank_) peers.push_back(r);
  }
  std::vector<long long> values;
  const std::vector<int> silent = exchange_tokens(peers, kTagHandshake, token,
                                                  Clock::now() + options_.timeout, values);
  if (!silent.empty()) throw_timeout("create_group", silent, "they never called create_group");
  for (std::size_t i = 0; i < peers.size(); ++i) {
    if (values[i] != token) {
      const std::string why = "[comm] create_group: rank " + std::to_string(peers[i]) +
                              " is creating a different group at the same time (members must "
                              "create overlapping groups in one order)";
      mark_broken(why);
      throw CommError(why);
    }
  }
  MPI_Group all = MPI_GROUP_NULL;
  MPI_Group sub = MPI_GROUP_NULL;
  ETH_MPI_CHECK(MPI_Comm_group(comm_, &all));
  ETH_MPI_CHECK(MPI_Group_incl(all, mpi_count(ranks.size()), ranks.data(), &sub));
  MPI_Comm out = MPI_COMM_NULL;
  ETH_MPI_CHECK(MPI_Comm_create_group(comm_, sub, kTagCreate, &out));
  ETH_MPI_CHECK(MPI_Group_free(&sub));
  ETH_MPI_CHECK(MPI_Group_free(&all));
  return std::make_shared<MpiImpl>(out, options_, oversubscribed_, crowded_, hosts_);
}

Request MpiImpl::isend(std::span<const std::byte> data, int dest, int tag) {
  MPI_Request req = MPI_REQUEST_NULL;
  ETH_MPI_CHECK(MPI_Isend(data.data(), mpi_count(data.size()), MPI_BYTE, dest, tag, comm_, &req));
  return Request(std::make_shared<MpiRequest>(
      shared_from_this(), req, Kind::Send, dest, data.size(),
      "send of " + std::to_string(data.size()) + " bytes to rank " + std::to_string(dest) +
          " (tag " + std::to_string(tag) + ")"));
}

Request MpiImpl::irecv(std::span<std::byte> data, int src, int tag) {
  MPI_Request req = MPI_REQUEST_NULL;
  ETH_MPI_CHECK(MPI_Irecv(data.data(), mpi_count(data.size()), MPI_BYTE, src, tag, comm_, &req));
  return Request(std::make_shared<MpiRequest>(
      shared_from_this(), req, Kind::Recv, src, data.size(),
      "receive of " + std::to_string(data.size()) + " bytes from rank " + std::to_string(src) +
          " (tag " + std::to_string(tag) + ")"));
}

Request MpiImpl::iallreduce(void* data, std::size_t count, DType type, ReduceOp op,
                           std::string what) {
  MPI_Request req = MPI_REQUEST_NULL;
  ETH_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data, mpi_count(count), mpi_type(type),
                               op == ReduceOp::Sum ? MPI_SUM : MPI_MAX, comm_, &req));
  return collective(req, std::move(what));
}

Request MpiImpl::ibroadcast(std::span<std::byte> data, int root, std::string what) {
  MPI_Request req = MPI_REQUEST_NULL;
  ETH_MPI_CHECK(MPI_Ibcast(data.data(), mpi_count(data.size()), MPI_BYTE, root, comm_, &req));
  return collective(req, std::move(what));
}

Request MpiImpl::ibarrier() {
  MPI_Request req = MPI_REQUEST_NULL;
  ETH_MPI_CHECK(MPI_Ibarrier(comm_, &req));
  return collective(req, "barrier");
}

Request MpiImpl::igather(const void* in, void* out, std::size_t count, DType type) {
  MPI_Request req = MPI_REQUEST_NULL;
  const int n = mpi_count(count);
  ETH_MPI_CHECK(MPI_Igather(in, n, mpi_type(type), out, n, mpi_type(type), 0, comm_, &req));
  return collective(req, "gather of " + std::to_string(count) + " " +
                             std::string(dtype_name(type)));
}

std::vector<int> MpiImpl::exchange_tokens(const std::vector<int>& peers, int tag, long long token,
                                          Clock::time_point deadline,
                                          std::vector<long long>& values) {
  const std::size_t n = peers.size();
  auto payload = std::make_unique<long long[]>(1);
  payload[0] = token;
  values.assign(n, 0);
  std::vector<MPI_Request> sends(n, MPI_REQUEST_NULL);
  std::vector<MPI_Request> recvs(n, MPI_REQUEST_NULL);
  for (std::size_t i = 0; i < n; ++i) {
    ETH_MPI_CHECK(MPI_Irecv(&values[i], 1, MPI_LONG_LONG, peers[i], tag, comm_, &recvs[i]));
    ETH_MPI_CHECK(MPI_Isend(payload.get(), 1, MPI_LONG_LONG, peers[i], tag, comm_, &sends[i]));
  }
  std::vector<bool> heard(n, false);
  for (;;) {
    std::size_t num_heard = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (!heard[i]) {
        int flag = 0;
        ETH_MPI_CHECK(MPI_Test(&recvs[i], &flag, MPI_STATUS_IGNORE));
        heard[i] = flag != 0;
      }
      num_heard += heard[i] ? 1 : 0;
    }
    if (num_heard == n || Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  std::vector<int> silent;
  for (std::size_t i = 0; i < n; ++i) {
    if (heard[i]) continue;
    ETH_MPI_CHECK(MPI_Cancel(&recvs[i]));
    MPI_Status status;
    ETH_MPI_CHECK(MPI_Wait(&recvs[i], &status));
    int cancelled = 0;
    ETH_MPI_CHECK(MPI_Test_cancelled(&status, &cancelled));
    if (cancelled) silent.push_back(peers[i]);  // else the token arrived during the cancel
  }
  bool orphaned = false;
  for (MPI_Request& s : sends) {
    int flag = 0;
    ETH_MPI_CHECK(MPI_Test(&s, &flag, MPI_STATUS_IGNORE));
    if (!flag) {
      ETH_MPI_CHECK(MPI_Request_free(&s));
      orphaned = true;
    }
  }
  if (orphaned) orphans_.push_back(std::move(payload));
  return silent;
}

std::vector<int> MpiImpl::absent_peers(std::string& note) {
  std::vector<int> peers;
  for (int r = 0; r < size_; ++r) {
    if (r != rank_) peers.push_back(r);
  }
  std::vector<long long> values;
  std::vector<int> silent;
  try {
    silent = exchange_tokens(peers, kTagDiagnose, rank_,
                             Clock::now() + diagnose_grace(options_.timeout), values);
  } catch (const CommError& e) {
    note = std::string("finding the missing ranks failed (") + e.what() + ")";
    return peers;
  }
  if (silent.empty()) {
    note = "every rank timed out in a collective: they are waiting in different ones";
    return peers;
  }
  note = "they did not reach this collective (a rank that died or stopped calling the same "
         "collectives) or had already left it";
  return silent;
}

void MpiImpl::throw_timeout(const std::string& what, const std::vector<int>& peers,
                            const std::string& note) {
  std::vector<int> world;
  for (int p : peers) world.push_back(world_[static_cast<std::size_t>(p)]);
  std::string where = note;
  if (!hosts_->empty()) {
    // Over several hosts, the host is what an operator looks at first.
    for (std::size_t i = 0; i < peers.size(); ++i) {
      where += std::string(where.empty() ? "" : "; ") + "rank " + std::to_string(peers[i]) +
               " runs on host " + (*hosts_)[static_cast<std::size_t>(world[i])];
    }
  }
  const std::string message = timeout_message(rank_, size_, world_[static_cast<std::size_t>(rank_)],
                                              what, options_.timeout, peers, world, where);
  mark_broken(message);
  throw CommTimeout(message, what, peers, world);
}

}  // namespace

namespace {

// Every rank's host name, or none when all ranks share this host (one allgather at start-up).
HostNames host_names(MPI_Comm world, int ranks_on_host) {
  int size = 0;
  ETH_MPI_CHECK(MPI_Comm_size(world, &size));
  int one_host = ranks_on_host == size ? 1 : 0;
  ETH_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &one_host, 1, MPI_INT, MPI_MIN, world));
  if (one_host) return std::make_shared<const std::vector<std::string>>();
  std::vector<char> mine(MPI_MAX_PROCESSOR_NAME, '\0');
  int len = 0;
  ETH_MPI_CHECK(MPI_Get_processor_name(mine.data(), &len));
  std::vector<char> all(mine.size() * static_cast<std::size_t>(size));
  ETH_MPI_CHECK(MPI_Allgather(mine.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(),
                              MPI_MAX_PROCESSOR_NAME, MPI_CHAR, world));
  std::vector<std::string> names;
  for (int r = 0; r < size; ++r) names.emplace_back(all.data() + r * MPI_MAX_PROCESSOR_NAME);
  return std::make_shared<const std::vector<std::string>>(std::move(names));
}

// Ranks running on this machine's kernel (same boot id), whatever MPI thinks a host is: hosts
// made of network namespaces or containers on one machine share its cores, but Open MPI sees
// each as a node of its own, and its ranks would spin as if each had the cores to itself.
// 0 when the boot id cannot be read (MPI's count stands).
int ranks_on_this_machine(MPI_Comm world) {
  constexpr int kLen = 40;  // a boot id is 36 characters
  std::array<char, kLen> mine{};
  if (std::FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
    if (std::fgets(mine.data(), kLen, f) == nullptr) mine.fill('\0');
    std::fclose(f);
  }
  int size = 0;
  ETH_MPI_CHECK(MPI_Comm_size(world, &size));
  std::vector<char> all(static_cast<std::size_t>(kLen) * static_cast<std::size_t>(size));
  ETH_MPI_CHECK(MPI_Allgather(mine.data(), kLen, MPI_CHAR, all.data(), kLen, MPI_CHAR, world));
  if (mine[0] == '\0') return 0;
  int same = 0;
  for (int r = 0; r < size; ++r) {
    same += std::equal(mine.begin(), mine.end(), all.begin() + r * kLen) ? 1 : 0;
  }
  return same;
}

}  // namespace

bool mpi_compiled() { return true; }

MpiSession::MpiSession() {
  // MPI's non-blocking collectives allocate a temporary per piece (chunk_bytes) when
  // posted and free it on completion. glibc serves such blocks by mmap, or returns the heap top
  // to the system once they are freed, so every step page-faulted (and the kernel zeroed) the
  // whole gradient's size again: that cost block-wise aggregation, whose collectives are pieces
  // of full size, ~30 ms a step on 4 ranks (bench/runtime_bench, docs/runtime.md). Freed memory
  // stays in the process instead: blocks up to 32 MiB (glibc's ceiling) come from the heap and
  // the heap is never trimmed, so later steps reuse the same resident pages. Peak memory is
  // unchanged (the temporaries of one step were resident at its peak anyway).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
  int initialized = 0;
  ETH_MPI_CHECK(MPI_Initialized(&initialized));
  if (!initialized) {
    int provided = 0;
    // Serialized: an emulated rank's second thread drives transfers while an op computes, never
    // at the same time as the rank's own thread (runtime/emulation.h).
    ETH_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided));
    ETH_CHECK(provided >= MPI_THREAD_SERIALIZED,
              "this MPI library does not take calls from a second thread one at a time "
              "(MPI_THREAD_SERIALIZED)");
    initialized_here_ = true;
  }
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (initialized_here_ && !finalized) MPI_Finalize();
}

Communicator MpiSession::world(CommOptions options) const {
  validate(options);
  MPI_Comm dup = MPI_COMM_NULL;
  ETH_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
  // Ranks sharing this host, to decide whether waits may spin without yielding.
  MPI_Comm host = MPI_COMM_NULL;
  ETH_MPI_CHECK(MPI_Comm_split_type(dup, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host));
  int ranks_on_host = 1;
  ETH_MPI_CHECK(MPI_Comm_size(host, &ranks_on_host));
  ETH_MPI_CHECK(MPI_Comm_free(&host));
  const unsigned cores = std::thread::hardware_concurrency();
  const int ranks_here = std::max(ranks_on_host, ranks_on_this_machine(dup));
  const bool oversubscribed = cores > 0 && static_cast<unsigned>(ranks_here) >= cores;
  const bool crowded = cores > 0 && static_cast<unsigned>(ranks_here) > cores;
  return Communicator(std::make_shared<MpiImpl>(dup, options, oversubscribed, crowded,
                                                host_names(dup, ranks_on_host)));
}

void MpiSession::abort_job(int exit_code) {
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::abort();  // MPI_Abort does not return; this keeps [[noreturn]] honest if it did
}

}  // namespace eth
