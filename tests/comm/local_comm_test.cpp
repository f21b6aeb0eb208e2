// LocalWorld: collectives over the world and over overlapping groups equal the sums computed
// directly here, point-to-point in both posting orders, chunked reductions, and bounded waits
// that name the rank that never came.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <numeric>
#include <random>
#include <thread>

#include "comm/local/local_comm.h"
#include "core/error.h"
#include "test_util.h"

namespace eth {
namespace {

using std::chrono::milliseconds;

using test::expect_no_errors;

// Rank r's input: a fixed-seed random vector, so sums are not exact and order matters.
template <class T>
std::vector<T> input_of(int rank, std::size_t n) {
  std::mt19937 gen(1234u + static_cast<unsigned>(rank));
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(dist(gen));
  return v;
}

// The documented LocalWorld order: ((x_{r0} + x_{r1}) + x_{r2}) + ... over `ranks` ascending.
template <class T>
std::vector<T> sum_in_order(const std::vector<int>& ranks, std::size_t n) {
  std::vector<T> acc = input_of<T>(ranks.front(), n);
  for (std::size_t k = 1; k < ranks.size(); ++k) {
    const std::vector<T> x = input_of<T>(ranks[k], n);
    for (std::size_t i = 0; i < n; ++i) acc[i] += x[i];
  }
  return acc;
}

template <class T>
void check_world_allreduce(int num_ranks, std::size_t n) {
  LocalWorld world(num_ranks);
  std::vector<int> all(static_cast<std::size_t>(num_ranks));
  std::iota(all.begin(), all.end(), 0);
  const std::vector<T> want = sum_in_order<T>(all, n);
  std::vector<std::vector<T>> got(static_cast<std::size_t>(num_ranks));
  expect_no_errors(run_on_threads(world, [&](Communicator c) {
    std::vector<T> x = input_of<T>(c.rank(), n);
    c.allreduce_sum(std::span<T>(x));
    got[static_cast<std::size_t>(c.rank())] = x;
  }));
  // Bitwise: same order of additions, and every rank receives the same bytes.
  for (int r = 0; r < num_ranks; ++r) EXPECT_EQ(got[static_cast<std::size_t>(r)], want) << r;
}

TEST(LocalComm, AllreduceOverTheWorldEqualsTheDirectSumBitwise) {
  for (int n = 1; n <= 4; ++n) {
    check_world_allreduce<float>(n, 1000);
    check_world_allreduce<double>(n, 333);
  }
}

TEST(LocalComm, AllreduceMaxGivesTheElementwiseMaximumOnEveryRank) {
  for (int n = 1; n <= 4; ++n) {
    LocalWorld world(n);
    std::vector<float> want = input_of<float>(0, 500);
    std::vector<double> want_d = input_of<double>(0, 77);
    for (int r = 1; r < n; ++r) {
      const auto x = input_of<float>(r, 500);
      const auto y = input_of<double>(r, 77);
      for (std::size_t i = 0; i < x.size(); ++i) want[i] = std::max(want[i], x[i]);
      for (std::size_t i = 0; i < y.size(); ++i) want_d[i] = std::max(want_d[i], y[i]);
    }
    expect_no_errors(run_on_threads(world, [&](Communicator c) {
      std::vector<float> x = input_of<float>(c.rank(), 500);
      std::vector<double> y = input_of<double>(c.rank(), 77);
      c.allreduce_max(std::span<float>(x));
      c.allreduce_max(std::span<double>(y));
      EXPECT_EQ(x, want) << "rank " << c.rank() << " of " << n;
      EXPECT_EQ(y, want_d) << "rank " << c.rank() << " of " << n;
    }));
  }
}

TEST(LocalComm, OverlappingGroupsReduceOverTheirMembersOnly) {
  constexpr std::size_t kN = 257;
  const std::vector<int> a{0, 1, 2};
  const std::vector<int> b{1, 2, 3};
  LocalWorld world(4);
  std::vector<std::vector<float>> got_a(4);
  std::vector<std::vector<float>> got_b(4);
  std::vector<std::vector<int>> b_world(4);
  std::vector<std::vector<int>> nested_world(4);
  expect_no_errors(run_on_threads(world, [&](Communicator c) {
    const int r = c.rank();
    const auto ur = static_cast<std::size_t>(r);
    // One global order (a, then b) on every member, as the runtime creates its groups.
    Communicator ga = r <= 2 ? c.create_group(a) : Communicator();
    Communicator gb = r >= 1 ? c.create_group(b) : Communicator();
    if (!ga.is_null()) {
      got_a[ur] = input_of<float>(r, kN);
      ga.allreduce_sum(std::span<float>(got_a[ur]));
    }
    if (!gb.is_null()) {
      got_b[ur] = input_of<float>(r, kN);
      gb.allreduce_sum(std::span<float>(got_b[ur]));
      b_world[ur] = gb.world_ranks();
      EXPECT_EQ(gb.rank(), r - 1);
      EXPECT_EQ(gb.size(), 3);
      // A group of a group: ranks 0 and 2 of b are world ranks 1 and 3.
      if (gb.rank() == 0 || gb.rank() == 2) {
        Communicator nested = gb.create_group(std::vector<int>{0, 2});
        nested_world[ur] = nested.world_ranks();
        nested.barrier();
      }
    }
  }));
  const std::vector<float> want_a = sum_in_order<float>(a, kN);
  const std::vector<float> want_b = sum_in_order<float>(b, kN);
  for (int r : a) EXPECT_EQ(got_a[static_cast<std::size_t>(r)], want_a) << r;
  for (int r : b) EXPECT_EQ(got_b[static_cast<std::size_t>(r)], want_b) << r;
  EXPECT_EQ(b_world[3], b);
  EXPECT_EQ(nested_world[1], (std::vector<int>{1, 3}));
  EXPECT_EQ(nested_world[3], (std::vector<int>{1, 3}));
}

TEST(LocalComm, SplitOrdersByKeyThenRankAndNegativeColorGetsNull) {
  LocalWorld world(5);
  std::vector<std::vector<int>> members(5);
  std::vector<double> sums(5, 0.0);
  expect_no_errors(run_on_threads(world, [&](Communicator c) {
    const int r = c.rank();
    // Rank 4 joins no group; the others split by parity with key -r (reverse rank order).
    Communicator sub = c.split(r == 4 ? -1 : r % 2, -r);
    if (r == 4) {
      EXPECT_TRUE(sub.is_null());
      return;
    }
    members[static_cast<std::size_t>(r)] = sub.world_ranks();
    std::vector<double> x{static_cast<double>(r)};
    sub.allreduce_sum(std::span<double>(x));
    sums[static_cast<std::size_t>(r)] = x[0];
  }));
  EXPECT_EQ(members[0], (std::vector<int>{2, 0}));
  EXPECT_EQ(members[2], (std::vector<int>{2, 0}));
  EXPECT_EQ(members[1], (std::vector<int>{3, 1}));
  EXPECT_EQ(sums[0], 0.0 + 2.0);
  EXPECT_EQ(sums[3], 1.0 + 3.0);
}

TEST(LocalComm, PointToPointWorksWithSendOrReceivePostedFirst) {
  LocalWorld world(2);
  expect_no_errors(run_on_threads(world, [&](Communicator c) {
    const int me = c.rank();
    const int other = 1 - me;
    std::vector<int> out(100);
    std::iota(out.begin(), out.end(), 1000 * me);
    std::vector<int> in(100, -1);
    std::vector<int> want(100);
    std::iota(want.begin(), want.end(), 1000 * other);

    // Send posted before the matching receive: rank 0 sends, then both pass a barrier, then
    // rank 1 posts its receive.
    Request r1;
    if (me == 0) r1 = c.isend(std::span<const int>(out), 1, 7);
    c.barrier();
    if (me == 1) r1 = c.irecv(std::span<int>(in), 0, 7);
    r1.wait();
    if (me == 1) {
      EXPECT_EQ(in, want);
    }

    // Receive posted first: rank 0 posts the receive, the barrier, then rank 1 sends.
    std::fill(in.begin(), in.end(), -1);
    Request r2;
    if (me == 0) r2 = c.irecv(std::span<int>(in), 1, 8);
    c.barrier();
    if (me == 1) r2 = c.isend(std::span<const int>(out), 0, 8);
    while (!r2.test()) std::this_thread::yield();
    if (me == 0) {
      EXPECT_EQ(in, want);
    }

    // Blocking, even/odd ordered; three messages on one tag arrive in the order sent.
    for (int k = 0; k < 3; ++k) {
      std::vector<int> msg{me, k};
      std::vector<int> got(2, -1);
      if (me == 0) {
        c.send(std::span<const int>(msg), other, 9);
        c.recv(std::span<int>(got), other, 9);
      } else {
        c.recv(std::span<int>(got), other, 9);
        c.send(std::span<const int>(msg), other, 9);
      }
      EXPECT_EQ(got, (std::vector<int>{other, k}));
    }
  }));
}

TEST(LocalComm, ReceiveOfTheWrongSizeFailsAndNamesBothSizes) {
  LocalWorld world(2, CommOptions{milliseconds(2000), 1 << 20});
  auto errors = run_on_threads(world, [&](Communicator c) {
    std::vector<double> buf(c.rank() == 0 ? 2 : 1);
    if (c.rank() == 0) c.send(std::span<const double>(buf), 1, 0);
    if (c.rank() == 1) c.recv(std::span<double>(buf), 0, 0);
  });
  EXPECT_FALSE(errors[0]);
  ASSERT_TRUE(errors[1]);
  try {
    std::rethrow_exception(errors[1]);
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("receive of 8 bytes"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("message of 16 bytes"), std::string::npos) << e.what();
  }
}

TEST(LocalComm, ChunkedReductionsCoverTheWholeBuffer) {
  // 64-byte pieces: 16 floats or 8 doubles. 1000 floats = 62 full pieces + one of 8.
  const CommOptions options{milliseconds(10'000), 64};
  LocalWorld world(3, options);
  const std::vector<int> all{0, 1, 2};
  const std::vector<float> want_f = sum_in_order<float>(all, 1000);
  const std::vector<double> want_d = sum_in_order<double>(all, 1001);
  expect_no_errors(run_on_threads(world, [&](Communicator c) {
    std::vector<float> f = input_of<float>(c.rank(), 1000);
    c.allreduce_sum(std::span<float>(f));
    EXPECT_EQ(f, want_f);
    std::vector<double> d = input_of<double>(c.rank(), 1001);
    Request r = c.iallreduce_sum(std::span<double>(d));
    r.wait();
    EXPECT_EQ(d, want_d);
  }));
}

TEST(LocalComm, NonBlockingAllreduceProgressesWhilePointToPointRuns) {
  LocalWorld world(2);
  expect_no_errors(run_on_threads(world, [&](Communicator c) {
    std::vector<float> g(64, static_cast<float>(c.rank() + 1));
    Request reduce = c.iallreduce_sum(std::span<float>(g));
    std::vector<int> token{c.rank()};
    std::vector<int> got{-1};
    Request s = c.isend(std::span<const int>(token), 1 - c.rank(), 3);
    c.recv(std::span<int>(got), 1 - c.rank(), 3);
    s.wait();
    reduce.wait();
    EXPECT_EQ(got[0], 1 - c.rank());
    EXPECT_EQ(g, std::vector<float>(64, 1.0f + 2.0f));
  }));
}

TEST(LocalComm, BroadcastGatherAndBarrier) {
  LocalWorld world(3);
  expect_no_errors(run_on_threads(world, [&](Communicator c) {
    std::vector<int> data(50, c.rank() == 1 ? 42 : -1);
    c.broadcast(std::span<int>(data), 1);
    EXPECT_EQ(data, std::vector<int>(50, 42));
    const std::vector<double> mine{static_cast<double>(c.rank()), 0.5 * c.rank()};
    const std::vector<double> all = c.gather(std::span<const double>(mine));
    const std::vector<std::int64_t> ids = c.gather(std::vector<std::int64_t>{c.rank() * 10});
    if (c.rank() == 0) {
      EXPECT_EQ(all, (std::vector<double>{0.0, 0.0, 1.0, 0.5, 2.0, 1.0}));
      EXPECT_EQ(ids, (std::vector<std::int64_t>{0, 10, 20}));
    } else {
      EXPECT_TRUE(all.empty());
      EXPECT_TRUE(ids.empty());
    }
    c.barrier();
  }));
}

// The exception rank r threw, as CommTimeout (fails the test otherwise).
CommTimeout timeout_of(const std::vector<std::exception_ptr>& errors, std::size_t r) {
  EXPECT_TRUE(errors[r]) << "rank " << r << " did not throw";
  if (!errors[r]) return CommTimeout("", "", {}, {});
  try {
    std::rethrow_exception(errors[r]);
  } catch (const CommTimeout& e) {
    return e;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "rank " << r << " threw something else: " << e.what();
  }
  return CommTimeout("", "", {}, {});
}

TEST(LocalComm, AllreduceTimeoutNamesTheRankThatNeverCame) {
  const CommOptions options{milliseconds(200), 1 << 20};
  LocalWorld world(4, options);
  const auto start = std::chrono::steady_clock::now();
  auto errors = run_on_threads(world, [&](Communicator c) {
    if (c.rank() == 3) return;  // leaves early
    std::vector<float> g(10, 1.0f);
    c.allreduce_sum(std::span<float>(g));
  });
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_GE(elapsed, options.timeout);
  EXPECT_LT(elapsed, milliseconds(5000));
  EXPECT_FALSE(errors[3]);
  for (std::size_t r = 0; r < 3; ++r) {
    const CommTimeout e = timeout_of(errors, r);
    EXPECT_EQ(e.peers(), std::vector<int>{3});
    EXPECT_EQ(e.peer_world_ranks(), std::vector<int>{3});
    EXPECT_NE(std::string(e.what()).find("allreduce_sum"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 3 (world rank 3)"), std::string::npos) << e.what();
  }
}

TEST(LocalComm, TimeoutInAGroupNamesGroupAndWorldRankAndBreaksTheCommunicator) {
  const CommOptions options{milliseconds(150), 1 << 20};
  LocalWorld world(4, options);
  std::string after;
  auto errors = run_on_threads(world, [&](Communicator c) {
    if (c.rank() != 1 && c.rank() != 3) return;
    Communicator pair = c.create_group(std::vector<int>{1, 3});
    if (c.rank() == 3) return;  // world rank 3 = rank 1 of the pair leaves
    std::vector<double> x{1.0};
    std::vector<double> y{2.0};
    try {
      pair.recv(std::span<double>(x), 1, 5);
    } catch (const CommTimeout&) {
      try {
        pair.allreduce_sum(std::span<double>(y));  // refused: the pair is broken now
      } catch (const CommError& e) {
        after = e.what();
      }
      throw;
    }
  });
  const CommTimeout e = timeout_of(errors, 1);
  EXPECT_EQ(e.peers(), std::vector<int>{1});
  EXPECT_EQ(e.peer_world_ranks(), std::vector<int>{3});
  EXPECT_NE(std::string(e.what()).find("receive of 8 bytes from rank 1"), std::string::npos)
      << e.what();
  EXPECT_NE(std::string(e.what()).find("(world rank 3)"), std::string::npos) << e.what();
  EXPECT_NE(after.find("unusable"), std::string::npos) << after;
}

TEST(LocalComm, SendsAreSynchronousSoSendSendDeadlocksAreCaught) {
  // Both ranks send first: MPI would get away with it for small (eager) messages only.
  LocalWorld world(2, CommOptions{milliseconds(100), 1 << 20});
  auto errors = run_on_threads(world, [&](Communicator c) {
    std::vector<char> msg(4, 'x');
    c.send(std::span<const char>(msg), 1 - c.rank(), 0);
    c.recv(std::span<char>(msg), 1 - c.rank(), 0);
  });
  for (std::size_t r = 0; r < 2; ++r) {
    const CommTimeout e = timeout_of(errors, r);
    EXPECT_EQ(e.peers(), std::vector<int>{1 - static_cast<int>(r)});
    EXPECT_NE(e.operation().find("send of 4 bytes"), std::string::npos) << e.operation();
  }
}

TEST(LocalComm, LateArrivalFailsFastInsteadOfHanging) {
  LocalWorld world(2, CommOptions{milliseconds(100), 1 << 20});
  std::atomic<bool> gave_up{false};
  auto errors = run_on_threads(world, [&](Communicator c) {
    if (c.rank() == 0) {
      try {
        c.barrier();
      } catch (const CommTimeout&) {
        gave_up = true;
        throw;
      }
      return;
    }
    // Rank 1 arrives only after rank 0 has given up (bounded, in case it never does).
    const auto limit = std::chrono::steady_clock::now() + milliseconds(10'000);
    while (!gave_up && std::chrono::steady_clock::now() < limit) {
      std::this_thread::sleep_for(milliseconds(1));
    }
    const auto start = std::chrono::steady_clock::now();
    try {
      c.barrier();
    } catch (const CommTimeout&) {
      throw;
    } catch (const CommError&) {
      // The late rank learns at once that its peer gave up, well before its own timeout.
      EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(100));
      throw;
    }
  });
  EXPECT_EQ(timeout_of(errors, 0).peers(), std::vector<int>{1});
  ASSERT_TRUE(errors[1]);
  try {
    std::rethrow_exception(errors[1]);
  } catch (const CommTimeout& e) {
    ADD_FAILURE() << "the late rank should not wait for a timeout: " << e.what();
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("gave up"), std::string::npos) << e.what();
  }
}

TEST(LocalComm, MismatchedCollectivesFailOnEveryRank) {
  LocalWorld world(2, CommOptions{milliseconds(2000), 1 << 20});
  auto errors = run_on_threads(world, [&](Communicator c) {
    std::vector<float> g(10, 1.0f);
    if (c.rank() == 0) c.allreduce_sum(std::span<float>(g));
    if (c.rank() == 1) c.barrier();
  });
  for (const auto& error : errors) {
    ASSERT_TRUE(error);
    try {
      std::rethrow_exception(error);
    } catch (const CommError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("do not match"), std::string::npos) << what;
      EXPECT_NE(what.find("allreduce_sum f32 x10"), std::string::npos) << what;
      EXPECT_NE(what.find("barrier"), std::string::npos) << what;
    }
  }
}

TEST(LocalComm, InvalidOptionsAndSizesAreRejectedWithTheFieldName) {
  auto field_of = [](auto make) -> std::string {
    try {
      make();
    } catch (const InputError& e) {
      return e.path();
    }
    return "(nothing thrown)";
  };
  EXPECT_EQ(field_of([] { LocalWorld w(0); }), "num_ranks");
  EXPECT_EQ(field_of([] { LocalWorld w(2, CommOptions{milliseconds(0), 1024}); }), "timeout");
  EXPECT_EQ(field_of([] { LocalWorld w(2, CommOptions{milliseconds(10), 4}); }), "chunk_bytes");
  EXPECT_EQ(field_of([] { LocalWorld w(2, CommOptions{milliseconds(10), 1024, 4}); }),
            "window_bytes");
}

}  // namespace
}  // namespace eth
