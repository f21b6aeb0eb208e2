// The host-staged communicator (comm/staged_comm.h) over the threads backend, against the plain
// communicator's results on the same inputs. Its "device" here keeps every byte XOR-masked, so a
// buffer the host operation read or wrote without the explicit download and upload would come
// out wrong: all-reduces (sum and max, float and double, in pieces) equal the plain ones
// bitwise, messages and broadcasts arrive whole, a receive's result reaches the device only once
// it completes, gathers pass through as host memory, and split groups are staged too.
#include "comm/staged_comm.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "comm/local/local_comm.h"
#include "test_util.h"

namespace eth::staged_comm_test {
namespace {

constexpr unsigned char kMask = 0xA5;
std::atomic<int> g_downloads{0}, g_uploads{0};

void masked_download(void* host, const void* device, std::size_t bytes) {
  const auto* d = static_cast<const unsigned char*>(device);
  auto* h = static_cast<unsigned char*>(host);
  for (std::size_t i = 0; i < bytes; ++i) h[i] = static_cast<unsigned char>(d[i] ^ kMask);
  ++g_downloads;
}
void masked_upload(void* device, const void* host, std::size_t bytes) {
  const auto* h = static_cast<const unsigned char*>(host);
  auto* d = static_cast<unsigned char*>(device);
  for (std::size_t i = 0; i < bytes; ++i) d[i] = static_cast<unsigned char>(h[i] ^ kMask);
  ++g_uploads;
}

// Only download and upload: the staged communicator must not need the device's copy or reduce.
const DeviceMemoryOps kMasked{"masked", nullptr, nullptr, masked_download, masked_upload, nullptr};

// A device buffer of `values`, and its values read back.
template <class T>
std::vector<unsigned char> to_device(const std::vector<T>& values) {
  std::vector<unsigned char> d(values.size() * sizeof(T));
  if (!d.empty()) std::memcpy(d.data(), values.data(), d.size());
  for (unsigned char& b : d) b ^= kMask;
  return d;
}
template <class T>
std::vector<T> from_device(const std::vector<unsigned char>& d) {
  std::vector<unsigned char> h(d);
  for (unsigned char& b : h) b ^= kMask;
  std::vector<T> v(h.size() / sizeof(T));
  if (!h.empty()) std::memcpy(v.data(), h.data(), h.size());
  return v;
}
template <class T>
std::span<T> as_span(std::vector<unsigned char>& d) {
  return {reinterpret_cast<T*>(d.data()), d.size() / sizeof(T)};
}

template <class T>
std::vector<T> input_of(int rank, std::size_t n) {
  std::mt19937 gen(77u + static_cast<unsigned>(rank));
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(dist(gen));
  return v;
}

// Small pieces, so a reduction is several host collectives.
CommOptions small_pieces() {
  CommOptions o;
  o.chunk_bytes = 1024;
  return o;
}

// What rank r holds after `op` on the plain threads communicator, and after the same `op` on the
// staged one over device buffers.
template <class T, class Op>
void expect_same_as_plain(int ranks, std::size_t n, const Op& op) {
  std::vector<std::vector<T>> plain(static_cast<std::size_t>(ranks)), staged(plain.size());
  const LocalWorld a(ranks, small_pieces());
  test::expect_no_errors(run_on_threads(a, [&](Communicator c) {
    std::vector<T> x = input_of<T>(c.rank(), n);
    op(c, std::span<T>(x));
    plain[static_cast<std::size_t>(c.rank())] = x;
  }));
  const LocalWorld b(ranks, small_pieces());
  test::expect_no_errors(run_on_threads(b, [&](Communicator c) {
    const Communicator s = make_host_staged_communicator(c, kMasked);
    std::vector<unsigned char> d = to_device(input_of<T>(c.rank(), n));
    op(s, as_span<T>(d));
    staged[static_cast<std::size_t>(c.rank())] = from_device<T>(d);
  }));
  for (int r = 0; r < ranks; ++r) {
    EXPECT_EQ(staged[static_cast<std::size_t>(r)], plain[static_cast<std::size_t>(r)]) << "rank " << r;
  }
}

TEST(StagedComm, AllReducesEqualThePlainCommunicatorsBitwise) {
  const auto sum = [](const Communicator& c, auto x) { c.allreduce_sum(x); };
  const auto isum = [](const Communicator& c, auto x) { c.iallreduce_sum(x).wait(); };
  const auto max = [](const Communicator& c, auto x) { c.allreduce_max(x); };
  expect_same_as_plain<float>(3, 1000, sum);
  expect_same_as_plain<double>(3, 700, sum);
  expect_same_as_plain<float>(4, 513, isum);
  expect_same_as_plain<double>(2, 300, isum);
  expect_same_as_plain<float>(3, 257, max);
  expect_same_as_plain<double>(3, 64, max);
  expect_same_as_plain<float>(2, 0, sum);  // nothing to move
}

TEST(StagedComm, BroadcastEqualsThePlainCommunicators) {
  const auto bcast = [](const Communicator& c, auto x) { c.broadcast(x, 2); };
  expect_same_as_plain<double>(3, 500, bcast);
}

TEST(StagedComm, AReceiveReachesTheDeviceOnlyOnceItCompletes) {
  const std::vector<float> message = input_of<float>(9, 333);
  const std::vector<float> untouched(333, 7.0f);
  const LocalWorld world(2);
  g_uploads = 0;
  test::expect_no_errors(run_on_threads(world, [&](Communicator c) {
    const Communicator s = make_host_staged_communicator(c, kMasked);
    if (c.rank() == 0) {
      std::vector<unsigned char> d = to_device(message);
      s.barrier();  // rank 1 has posted its receive
      s.isend(as_span<float>(d), 1, 5).wait();
    } else {
      std::vector<unsigned char> d = to_device(untouched);
      Request r = s.irecv(as_span<float>(d), 0, 5);
      EXPECT_EQ(from_device<float>(d), untouched);  // nothing sent yet, nothing uploaded
      EXPECT_EQ(g_uploads.load(), 0);
      s.barrier();
      r.wait();
      EXPECT_TRUE(r.test());  // completed once; asking again uploads nothing more
      r.wait();
      EXPECT_EQ(g_uploads.load(), 1);
      EXPECT_EQ(from_device<float>(d), message);
    }
  }));
}

TEST(StagedComm, GathersAreHostMemoryAndSplitGroupsAreStaged) {
  const LocalWorld world(4);
  std::vector<double> gathered;
  std::vector<std::vector<float>> group_sum(4);
  test::expect_no_errors(run_on_threads(world, [&](Communicator c) {
    const Communicator s = make_host_staged_communicator(c, kMasked);
    const std::vector<double> mine{c.rank() + 0.5, -1.0 * c.rank()};
    const std::vector<double> all = s.gather(std::span<const double>(mine));
    if (c.rank() == 0) gathered = all;
    // Groups {0, 2} and {1, 3}: each rank's input plus its partner's.
    const Communicator g = s.split(c.rank() % 2, c.rank());
    EXPECT_EQ(g.size(), 2);
    std::vector<unsigned char> d = to_device(input_of<float>(c.rank(), 50));
    g.allreduce_sum(as_span<float>(d));
    group_sum[static_cast<std::size_t>(c.rank())] = from_device<float>(d);
  }));
  EXPECT_EQ(gathered, (std::vector<double>{0.5, -0.0, 1.5, -1.0, 2.5, -2.0, 3.5, -3.0}));
  for (int r = 0; r < 4; ++r) {
    const int lo = r % 2, hi = lo + 2;  // ascending rank order, as the threads backend adds
    std::vector<float> want = input_of<float>(lo, 50);
    const std::vector<float> other = input_of<float>(hi, 50);
    for (std::size_t i = 0; i < want.size(); ++i) want[i] += other[i];
    EXPECT_EQ(group_sum[static_cast<std::size_t>(r)], want) << "rank " << r;
  }
}

}  // namespace
}  // namespace eth::staged_comm_test
