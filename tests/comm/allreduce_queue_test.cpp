// AllreduceQueue: each communicator's window bounds its bytes in flight (a fake backend whose
// pieces complete only when the test says), pieces are posted in queue order and refill freed
// room, two communicators each get a window, and over LocalWorld overlapping groups sum
// correctly with a one-piece window, in one global order and in orders that differ by rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "comm/allreduce_queue.h"
#include "comm/local/local_comm.h"
#include "one_rank_impl.h"

namespace eth {
namespace {

// A piece that completes when the test sets `done` (test()) or when waited on (wait()).
struct ManualRequest : RequestImpl {
  bool done = false;
  bool test() override { return done; }
  void wait() override { done = true; }
  bool wait_for(std::chrono::microseconds, std::chrono::microseconds) override {
    done = true;  // as if it finished within the slice
    return true;
  }
};

// One rank; records each posted piece (its offset in floats from `base`) and its request.
class ManualImpl : public test::OneRankImpl {
 public:
  explicit ManualImpl(CommOptions options) : OneRankImpl("manual", options) {}
  Request iallreduce(void* data, std::size_t count, DType, ReduceOp, std::string) override {
    offsets.push_back(static_cast<float*>(data) - base);
    counts.push_back(count);
    requests.push_back(std::make_shared<ManualRequest>());
    return Request(requests.back());
  }

  float* base = nullptr;
  std::vector<std::ptrdiff_t> offsets;
  std::vector<std::size_t> counts;
  std::vector<std::shared_ptr<ManualRequest>> requests;
};

std::size_t in_flight(const ManualImpl& impl) {
  std::size_t n = 0;
  for (const auto& r : impl.requests) n += r->done ? 0 : 1;
  return n;
}

TEST(AllreduceQueue, PostsInQueueOrderWithinTheWindowAndRefillsFreedRoom) {
  CommOptions o;
  o.chunk_bytes = 64;  // 16 floats a piece
  auto impl = std::make_shared<ManualImpl>(o);
  const Communicator c(impl);
  std::vector<float> a(160), b(40);  // 10 pieces, then 3 (16, 16, 8 floats)
  impl->base = a.data();
  AllreduceQueue q(3 * 64);
  const std::size_t ia = q.push(c, a);
  EXPECT_TRUE(impl->offsets.empty()) << "push posts nothing";
  q.progress();
  EXPECT_EQ(impl->offsets.size(), 3u);
  q.progress();
  EXPECT_EQ(impl->offsets.size(), 3u) << "nothing completed, so nothing more is posted";
  impl->requests[1]->done = true;  // finished behind the oldest: noticed once the oldest is
  q.progress();
  EXPECT_EQ(impl->offsets.size(), 3u);
  impl->requests[0]->done = true;  // now two pieces' room frees
  q.progress();
  ASSERT_EQ(impl->offsets.size(), 5u);
  EXPECT_EQ(in_flight(*impl), 3u);
  for (std::size_t i = 0; i < impl->offsets.size(); ++i) {
    EXPECT_EQ(impl->offsets[i], static_cast<std::ptrdiff_t>(16 * i)) << "queue order";
  }
  q.wait(ia);
  EXPECT_TRUE(q.done(ia));
  EXPECT_EQ(impl->offsets.size(), 10u);
  EXPECT_LE(q.peak_bytes_in_flight(), 3u * 64u);
  const std::size_t ib = q.push(c, b);
  EXPECT_FALSE(q.done(ib));
  q.wait_all();
  EXPECT_TRUE(q.done(ib));
  ASSERT_EQ(impl->counts.size(), 13u);
  EXPECT_EQ(impl->counts.back(), 8u);
  EXPECT_EQ(in_flight(*impl), 0u);
  q.clear();
  EXPECT_TRUE(q.progress()) << "an empty queue is complete";
}

TEST(AllreduceQueue, EachCommunicatorHasAWindowOfItsOwn) {
  CommOptions o;
  o.chunk_bytes = 64;
  auto x = std::make_shared<ManualImpl>(o);
  auto y = std::make_shared<ManualImpl>(o);
  std::vector<float> a(160), b(160);
  x->base = a.data();
  y->base = b.data();
  AllreduceQueue q(2 * 64);
  q.push(Communicator(x), a);
  q.push(Communicator(y), b);
  q.push(Communicator(x), std::span<float>(a).subspan(0, 16));  // a second one on x: same window
  q.progress();
  // y's pieces need not wait for x's ten: each communicator has two in flight.
  EXPECT_EQ(x->offsets.size(), 2u);
  EXPECT_EQ(y->offsets.size(), 2u);
  EXPECT_EQ(q.communicators(), 2u);
  EXPECT_EQ(q.peak_bytes_in_flight(), 4u * 64u);
  q.wait_all();
  EXPECT_EQ(x->offsets.size(), 11u);
  EXPECT_EQ(y->offsets.size(), 10u);
  EXPECT_LE(q.peak_bytes_in_flight(), q.communicators() * 2 * 64);
}

TEST(AllreduceQueue, APieceLargerThanTheWindowGoesAlone) {
  CommOptions o;
  o.chunk_bytes = 64;
  auto impl = std::make_shared<ManualImpl>(o);
  const Communicator c(impl);
  std::vector<float> a(64);
  impl->base = a.data();
  AllreduceQueue q(8);  // smaller than one piece
  q.push(c, a);
  q.progress();
  EXPECT_EQ(impl->offsets.size(), 1u);
  impl->requests[0]->done = true;
  q.progress();
  EXPECT_EQ(impl->offsets.size(), 2u);
  q.wait_all();
  EXPECT_EQ(q.peak_bytes_in_flight(), 64u);
}

// Rank r's input: multiples of 1/4, so every sum below is exact in any order.
std::vector<float> input_of(int rank, std::size_t n, int salt) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = static_cast<float>((rank + 1) * 0.5 + static_cast<double>((i + salt) % 5) * 0.25);
  }
  return v;
}

TEST(AllreduceQueue, OverlappingGroupsSumWithAOnePieceWindowInAnyOrder) {
  // Three ranks, every pair a group. With one piece in flight per group, a rank that blocked
  // on one group's piece without refilling the others would deadlock the cycle 0-1-2 when the
  // ranks queue their groups in different orders (`rotate`); in one order it must work too.
  const std::vector<std::vector<int>> groups{{0, 1}, {1, 2}, {0, 2}};
  constexpr std::size_t kN = 301;
  for (const bool rotate : {false, true})
  for (std::size_t window : {std::size_t{8}, std::size_t{64}, std::size_t{1} << 20}) {
    LocalWorld world(3, CommOptions{std::chrono::milliseconds(20'000), 64});
    std::vector<std::vector<std::vector<float>>> got(3);
    const auto errors = run_on_threads(world, [&](Communicator c) {
      const int r = c.rank();
      std::vector<Communicator> mine;
      std::vector<std::size_t> which;
      for (std::size_t g = 0; g < groups.size(); ++g) {
        if (std::find(groups[g].begin(), groups[g].end(), r) == groups[g].end()) continue;
        mine.push_back(c.create_group(groups[g]));
        which.push_back(g);
      }
      auto& data = got[static_cast<std::size_t>(r)];
      for (std::size_t g : which) data.push_back(input_of(r, kN, static_cast<int>(g)));
      AllreduceQueue q(window);
      for (std::size_t i = 0; i < mine.size(); ++i) {
        const std::size_t k = rotate ? (i + static_cast<std::size_t>(r)) % mine.size() : i;
        q.push(mine[k], data[k]);
      }
      q.wait_all();
      // The documented bound: communicators x max(window, chunk).
      EXPECT_EQ(q.communicators(), 2u);
      EXPECT_LE(q.peak_bytes_in_flight(), 2 * std::max<std::size_t>(window, 64));
    });
    for (const auto& e : errors) EXPECT_EQ(e, nullptr);
    for (int r = 0; r < 3; ++r) {
      std::size_t k = 0;
      for (std::size_t g = 0; g < groups.size(); ++g) {
        const auto& members = groups[g];
        if (std::find(members.begin(), members.end(), r) == members.end()) continue;
        std::vector<float> want(kN, 0.0f);
        for (int m : members) {
          const auto x = input_of(m, kN, static_cast<int>(g));
          for (std::size_t i = 0; i < kN; ++i) want[i] += x[i];
        }
        EXPECT_EQ(got[static_cast<std::size_t>(r)][k++], want)
            << "rank " << r << " group " << g << " window " << window << " rotate " << rotate;
      }
    }
  }
}

}  // namespace
}  // namespace eth
