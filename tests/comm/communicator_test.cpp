// Communicator's backend-independent half, over a recording fake backend: collectives are cut
// into contiguous pieces of at most chunk_bytes that cover the buffer exactly once.
#include <gtest/gtest.h>

#include "comm/communicator.h"
#include "one_rank_impl.h"

namespace eth {
namespace {

struct Piece {
  std::ptrdiff_t offset_bytes;
  std::size_t bytes;
};

// A one-rank backend that records the pieces it is handed and completes them at once.
class RecordingImpl : public test::OneRankImpl {
 public:
  explicit RecordingImpl(CommOptions options) : OneRankImpl("recording", options) {}
  Request iallreduce(void* data, std::size_t count, DType type, ReduceOp,
                     std::string what) override {
    record(data, count * dtype_size(type));
    whats.push_back(std::move(what));
    return {};
  }
  Request ibroadcast(std::span<std::byte> data, int, std::string) override {
    record(data.data(), data.size());
    return {};
  }

  const std::byte* base = nullptr;
  std::vector<Piece> pieces;
  std::vector<std::string> whats;

 private:
  void record(void* data, std::size_t bytes) {
    pieces.push_back({static_cast<const std::byte*>(data) - base, bytes});
  }
};

// Pieces must tile [0, total) in order, each at most `limit` bytes and a whole number of
// elements.
void expect_tiling(const std::vector<Piece>& pieces, std::size_t total, std::size_t limit,
                   std::size_t elem) {
  std::size_t next = 0;
  for (const Piece& p : pieces) {
    EXPECT_EQ(static_cast<std::size_t>(p.offset_bytes), next);
    EXPECT_LE(p.bytes, limit);
    EXPECT_GT(p.bytes, 0u);
    EXPECT_EQ(p.bytes % elem, 0u);
    next += p.bytes;
  }
  EXPECT_EQ(next, total);
}

TEST(Communicator, AllreduceIsCutIntoPiecesOfAtMostChunkBytes) {
  // 42-byte chunks hold 10 floats (40 bytes) or 5 doubles: 95 floats take ceil(95/10) = 10
  // pieces, 23 doubles ceil(23/5) = 5.
  auto impl = std::make_shared<RecordingImpl>(CommOptions{std::chrono::milliseconds(100), 42});
  Communicator c(impl);
  std::vector<float> f(95);
  impl->base = reinterpret_cast<const std::byte*>(f.data());
  c.allreduce_sum(f);
  EXPECT_EQ(impl->pieces.size(), 10u);
  expect_tiling(impl->pieces, 95 * sizeof(float), 40, sizeof(float));
  EXPECT_NE(impl->whats.back().find("piece 10 of 10"), std::string::npos) << impl->whats.back();

  impl->pieces.clear();
  std::vector<double> d(23);
  impl->base = reinterpret_cast<const std::byte*>(d.data());
  c.iallreduce_sum(d).wait();
  EXPECT_EQ(impl->pieces.size(), 5u);
  expect_tiling(impl->pieces, 23 * sizeof(double), 40, sizeof(double));
}

TEST(Communicator, OnePieceWhenTheBufferFitsAndNoneWhenEmpty) {
  auto impl = std::make_shared<RecordingImpl>(CommOptions{});
  Communicator c(impl);
  std::vector<float> f(1000);
  impl->base = reinterpret_cast<const std::byte*>(f.data());
  c.allreduce_sum(f);
  ASSERT_EQ(impl->pieces.size(), 1u);
  EXPECT_EQ(impl->whats.back().find("piece"), std::string::npos);
  impl->pieces.clear();
  c.allreduce_sum(std::span<float>());
  EXPECT_TRUE(impl->pieces.empty());
}

TEST(Communicator, BroadcastIsCutIntoPiecesToo) {
  auto impl = std::make_shared<RecordingImpl>(CommOptions{std::chrono::milliseconds(100), 40});
  Communicator c(impl);
  std::vector<std::byte> b(100);
  impl->base = b.data();
  c.broadcast(std::span<std::byte>(b), 0);
  EXPECT_EQ(impl->pieces.size(), 3u);  // 40 + 40 + 20
  expect_tiling(impl->pieces, 100, 40, 1);
}

TEST(Communicator, TimeoutMessageNamesOperationRankAndPeers) {
  const std::string m = timeout_message(0, 4, 5, "barrier", std::chrono::milliseconds(1500),
                                        {2, 3}, {7, 9}, "note");
  EXPECT_EQ(m,
            "[comm] rank 0/4 (world rank 5): barrier timed out after 1.500 s waiting for rank 2 "
            "(world rank 7) and rank 3 (world rank 9); note");
}

}  // namespace
}  // namespace eth
