// The MPI backend under mpirun with 4 ranks (tests/comm/CMakeLists.txt starts it twice):
// MpiComm.* repeats LocalWorld's checks over Open MPI; MpiRankExitsEarly.* lets rank 3 leave and
// requires the others to fail within the timeout with errors naming it. Every rank runs every
// test; a failure on any rank makes mpirun exit non-zero.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <numeric>

#include "comm/mpi/mpi_check.h"
#include "comm/mpi/mpi_comm.h"

namespace eth {
namespace {

using std::chrono::milliseconds;

MpiSession* g_session = nullptr;  // set by main() for the tests below

// A fresh world communicator (collective: every rank calls it at the same point of a test).
Communicator fresh_world(milliseconds timeout = milliseconds(20'000),
                         std::size_t chunk_bytes = std::size_t{16} << 20) {
  return g_session->world(CommOptions{timeout, chunk_bytes});
}

// Rank r's input. Multiples of 1/4 below 2^10: every sum of a few is exact in float, so the
// expected value does not depend on the order in which MPI adds.
template <class T>
std::vector<T> input_of(int world_rank, std::size_t n) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = static_cast<T>((world_rank + 1) * 0.5 + static_cast<double>(i % 7) * 0.25);
  }
  return v;
}

template <class T>
std::vector<T> sum_of(const std::vector<int>& world_ranks, std::size_t n) {
  std::vector<T> acc(n, T(0));
  for (int r : world_ranks) {
    const std::vector<T> x = input_of<T>(r, n);
    for (std::size_t i = 0; i < n; ++i) acc[i] += x[i];
  }
  return acc;
}

TEST(MpiComm, WorldHasFourRanks) {
  Communicator c = fresh_world();
  ASSERT_EQ(c.size(), 4);
  EXPECT_EQ(c.backend(), "mpi");
  EXPECT_EQ(c.world_ranks(), (std::vector<int>{0, 1, 2, 3}));
}

TEST(MpiComm, AllreduceOverTheWorldBlockingNonBlockingAndChunked) {
  // 64-byte pieces: 1000 floats take 63 collectives, 1001 doubles 126.
  for (std::size_t chunk : {std::size_t{64}, std::size_t{16} << 20}) {
    Communicator c = fresh_world(milliseconds(20'000), chunk);
    const std::vector<int> all{0, 1, 2, 3};
    std::vector<float> f = input_of<float>(c.rank(), 1000);
    c.allreduce_sum(std::span<float>(f));
    EXPECT_EQ(f, sum_of<float>(all, 1000)) << "chunk " << chunk;
    std::vector<double> d = input_of<double>(c.rank(), 1001);
    Request r = c.iallreduce_sum(std::span<double>(d));
    while (!r.test()) {
    }  // test() is what progresses a non-blocking collective on MPI
    EXPECT_EQ(d, sum_of<double>(all, 1001)) << "chunk " << chunk;
  }
}

TEST(MpiComm, AllreduceMaxGivesTheElementwiseMaximum) {
  Communicator c = fresh_world(milliseconds(20'000), 64);  // several pieces
  std::vector<float> f(100);
  std::vector<double> d(50);
  for (std::size_t i = 0; i < f.size(); ++i) f[i] = static_cast<float>((c.rank() * 7 + i) % 4);
  for (std::size_t i = 0; i < d.size(); ++i) d[i] = -static_cast<double>((c.rank() + i) % 4);
  c.allreduce_max(std::span<float>(f));
  c.allreduce_max(std::span<double>(d));
  for (std::size_t i = 0; i < f.size(); ++i) {
    float want = 0;
    for (int r = 0; r < 4; ++r) want = std::max(want, static_cast<float>((r * 7 + i) % 4));
    EXPECT_EQ(f[i], want) << i;
  }
  for (std::size_t i = 0; i < d.size(); ++i) {
    double want = -1e9;
    for (int r = 0; r < 4; ++r) want = std::max(want, -static_cast<double>((r + i) % 4));
    EXPECT_EQ(d[i], want) << i;
  }
}

TEST(MpiComm, OverlappingGroupsReduceOverTheirMembersOnly) {
  Communicator c = fresh_world();
  const int r = c.rank();
  const std::vector<int> a{0, 1, 2};
  const std::vector<int> b{1, 2, 3};
  Communicator ga = r <= 2 ? c.create_group(a) : Communicator();
  Communicator gb = r >= 1 ? c.create_group(b) : Communicator();
  if (!ga.is_null()) {
    std::vector<float> x = input_of<float>(r, 300);
    ga.allreduce_sum(std::span<float>(x));
    EXPECT_EQ(x, sum_of<float>(a, 300));
    EXPECT_EQ(ga.world_ranks(), a);
  }
  if (!gb.is_null()) {
    std::vector<double> x = input_of<double>(r, 300);
    gb.allreduce_sum(std::span<double>(x));
    EXPECT_EQ(x, sum_of<double>(b, 300));
    EXPECT_EQ(gb.rank(), r - 1);
    if (gb.rank() == 0 || gb.rank() == 2) {
      Communicator nested = gb.create_group(std::vector<int>{0, 2});
      EXPECT_EQ(nested.world_ranks(), (std::vector<int>{1, 3}));
      nested.barrier();
    }
  }
}

TEST(MpiComm, SplitOrdersByKeyThenRankAndNegativeColorGetsNull) {
  Communicator c = fresh_world();
  const int r = c.rank();
  Communicator sub = c.split(r == 3 ? -1 : r % 2, -r);
  if (r == 3) {
    EXPECT_TRUE(sub.is_null());
    return;
  }
  EXPECT_EQ(sub.world_ranks(), r % 2 == 0 ? (std::vector<int>{2, 0}) : (std::vector<int>{1}));
  std::vector<double> x{static_cast<double>(r)};
  sub.allreduce_sum(std::span<double>(x));
  EXPECT_EQ(x[0], r % 2 == 0 ? 0.0 + 2.0 : 1.0);
}

TEST(MpiComm, PointToPointInBothOrdersSmallAndLarge) {
  Communicator c = fresh_world();
  const int r = c.rank();
  const int next = (r + 1) % 4;
  const int prev = (r + 3) % 4;
  // Ring: even ranks post the send first, odd ranks the receive; 1 MiB exceeds the eager limit.
  for (std::size_t n : {std::size_t{3}, std::size_t{1} << 18}) {
    std::vector<float> out = input_of<float>(r, n);
    std::vector<float> in(n, -1.0f);
    Request s;
    Request q;
    if (r % 2 == 0) {
      s = c.isend(std::span<const float>(out), next, 1);
      q = c.irecv(std::span<float>(in), prev, 1);
    } else {
      q = c.irecv(std::span<float>(in), prev, 1);
      s = c.isend(std::span<const float>(out), next, 1);
    }
    q.wait();
    s.wait();
    EXPECT_EQ(in, input_of<float>(prev, n)) << n;
  }
  // Blocking pairs (0,1), (2,3), even/odd ordered.
  const int partner = r ^ 1;
  std::vector<int> msg{r};
  std::vector<int> got{-1};
  if (r % 2 == 0) {
    c.send(std::span<const int>(msg), partner, 2);
    c.recv(std::span<int>(got), partner, 2);
  } else {
    c.recv(std::span<int>(got), partner, 2);
    c.send(std::span<const int>(msg), partner, 2);
  }
  EXPECT_EQ(got[0], partner);
}

TEST(MpiComm, ReceiveOfTheWrongSizeFails) {
  Communicator c = fresh_world();
  std::vector<double> two(2, 1.0);
  std::vector<double> one(1);
  std::vector<double> four(4);
  if (c.rank() == 0) {
    c.send(std::span<const double>(two), 1, 0);
    c.send(std::span<const double>(two), 1, 1);
  }
  if (c.rank() == 1) {
    EXPECT_THROW(c.recv(std::span<double>(one), 0, 0), CommError);   // truncated
    EXPECT_THROW(c.recv(std::span<double>(four), 0, 1), CommError);  // shorter than expected
  }
  c.barrier();
}

TEST(MpiComm, BroadcastGatherAndBarrier) {
  Communicator c = fresh_world(milliseconds(20'000), 64);
  std::vector<int> data(100, c.rank() == 2 ? 42 : -1);  // 400 bytes: 7 pieces
  c.broadcast(std::span<int>(data), 2);
  EXPECT_EQ(data, std::vector<int>(100, 42));
  const std::vector<double> mine{static_cast<double>(c.rank()), 0.5 * c.rank()};
  const std::vector<double> all = c.gather(std::span<const double>(mine));
  const std::vector<std::int64_t> ids = c.gather(std::vector<std::int64_t>{c.rank() * 10});
  if (c.rank() == 0) {
    EXPECT_EQ(all, (std::vector<double>{0, 0, 1, 0.5, 2, 1, 3, 1.5}));
    EXPECT_EQ(ids, (std::vector<std::int64_t>{0, 10, 20, 30}));
  } else {
    EXPECT_TRUE(all.empty());
  }
  c.barrier();
}

TEST(MpiComm, EthMpiCheckReportsCallLocationAndMpiErrorString) {
  ASSERT_EQ(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN), MPI_SUCCESS);
  char buf[4] = {};
  const int rc = MPI_Send(buf, -1, MPI_BYTE, 0, 0, MPI_COMM_SELF);
  ASSERT_NE(rc, MPI_SUCCESS);
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  try {
    ETH_MPI_CHECK(MPI_Send(buf, -1, MPI_BYTE, 0, 0, MPI_COMM_SELF));
    ADD_FAILURE() << "ETH_MPI_CHECK did not throw";
  } catch (const CommError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("MPI_Send(buf, -1, MPI_BYTE, 0, 0, MPI_COMM_SELF)"), std::string::npos)
        << what;
    EXPECT_NE(what.find("mpi_comm_test.cpp:"), std::string::npos) << what;
    EXPECT_NE(what.find(std::string(text, static_cast<std::size_t>(len))), std::string::npos)
        << what;
  }
}

TEST(MpiRankExitsEarly, OthersFailWithinTheTimeoutNamingIt) {
  const milliseconds timeout(1000);
  Communicator coll = fresh_world(timeout);
  Communicator p2p = fresh_world(timeout);
  coll.barrier();
  if (coll.rank() == 3) return;  // leaves: main() finalizes MPI and the process exits

  auto start = std::chrono::steady_clock::now();
  std::vector<float> g(1000, 1.0f);
  try {
    coll.allreduce_sum(std::span<float>(g));
    ADD_FAILURE() << "allreduce without rank 3 completed";
  } catch (const CommTimeout& e) {
    EXPECT_EQ(e.peer_world_ranks(), std::vector<int>{3}) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 3 (world rank 3)"), std::string::npos) << e.what();
  }
  auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_GE(elapsed, timeout);
  EXPECT_LT(elapsed, 4 * timeout);  // timeout + a quarter for naming, with room for a busy host

  start = std::chrono::steady_clock::now();
  std::vector<float> x(10);
  try {
    p2p.recv(std::span<float>(x), 3, 0);
    ADD_FAILURE() << "receive from rank 3 completed";
  } catch (const CommTimeout& e) {
    EXPECT_EQ(e.peers(), std::vector<int>{3});
    EXPECT_NE(std::string(e.what()).find("receive of 40 bytes from rank 3"), std::string::npos)
        << e.what();
  }
  elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_LT(elapsed, 4 * timeout);
}

}  // namespace
}  // namespace eth

int main(int argc, char** argv) {
  eth::MpiSession session;
  eth::g_session = &session;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // Rank 0 prints the full report; the others only their failures (set before the printer is).
  if (rank != 0) GTEST_FLAG_SET(brief, true);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
