// The global sampler: every epoch is a permutation of the windows, batches depend only on the
// sampler's inputs, and plans take contiguous chunks that tile the batch.
#include "data/sampler.h"

#include <gtest/gtest.h>

#include <set>

#include "core/error.h"

namespace eth {
namespace {

TEST(Sampler, WindowsTileTheData) {
  // N = 101 tokens, T = 10: windows start at 0, 10, ..., 90 and need offset + 11 <= 101,
  // so W = (101 - 1) / 10 = 10.
  GlobalSampler s({101, 10, 3, 5, false});
  EXPECT_EQ(s.num_windows(), 10);
  const auto b = s.batch(3);  // global samples 9, 10, 11 -> windows 9, 0, 1
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].global_index, 9);
  EXPECT_EQ(b[0].offset, 90);
  EXPECT_EQ(b[1].offset, 0);
  EXPECT_EQ(b[2].offset, 10);
}

TEST(Sampler, EachEpochVisitsEveryWindowOnce) {
  const std::int64_t N = 1000, T = 7, W = (N - 1) / T;
  GlobalSampler s({N, T, 4, 42, true});
  ASSERT_EQ(s.num_windows(), W);
  for (std::int64_t epoch = 0; epoch < 3; ++epoch) {
    std::set<std::int64_t> seen;
    for (std::int64_t i = 0; i < W; ++i) {
      const std::int64_t off = s.offset(epoch * W + i);
      EXPECT_EQ(off % T, 0);
      EXPECT_LE(off + T + 1, N);
      seen.insert(off);
    }
    EXPECT_EQ(static_cast<std::int64_t>(seen.size()), W) << "epoch " << epoch;
  }
}

TEST(Sampler, BatchesAreAPureFunctionOfTheInputs) {
  GlobalSampler a({5000, 16, 8, 9, true});
  GlobalSampler b({5000, 16, 8, 9, true});
  // Query in different orders (different cache histories): same answers.
  const auto late = a.batch(100);
  const auto early = a.batch(0);
  EXPECT_EQ(b.batch(0)[5].offset, early[5].offset);
  EXPECT_EQ(b.batch(100)[7].offset, late[7].offset);
  GlobalSampler c({5000, 16, 8, 10, true});
  int same = 0;
  for (std::int64_t i = 0; i < 8; ++i)
    same +=
        c.batch(0)[static_cast<std::size_t>(i)].offset == early[static_cast<std::size_t>(i)].offset;
  EXPECT_LT(same, 8) << "another seed gave the same batch";
}

TEST(Sampler, SplitContiguousTilesTheBatch) {
  const std::vector<std::int64_t> local = {3, 0, 5};
  const auto r = split_contiguous(8, local);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].begin, 0);
  EXPECT_EQ(r[1].begin, 3);
  EXPECT_EQ(r[2].begin, 3);
  EXPECT_EQ(r[2].size, 5);
  EXPECT_THROW(split_contiguous(9, local), InputError);
}

TEST(Sampler, TooFewTokensIsAnInputError) {
  EXPECT_THROW(GlobalSampler({10, 10, 1, 0, true}), InputError);
  EXPECT_NO_THROW(GlobalSampler({11, 10, 1, 0, true}));
}

TEST(Sampler, GatherShiftsTargetsByOne) {
  std::vector<std::uint16_t> tokens(50);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::uint16_t>(i);
  std::vector<std::int32_t> in(4), tg(4);
  gather_sample(in.data(), tg.data(), tokens, {0, 20}, 4);
  EXPECT_EQ(in, (std::vector<std::int32_t>{20, 21, 22, 23}));
  EXPECT_EQ(tg, (std::vector<std::int32_t>{21, 22, 23, 24}));
}

}  // namespace
}  // namespace eth
