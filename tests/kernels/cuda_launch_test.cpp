// The launch-shape arithmetic of the CUDA kernels (kernels/cuda/launch.h), checked on the CPU so
// that a grid missing rows or keys shows on machines without a GPU too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/launch.h"

namespace eth::cuda::launch {
namespace {

TEST(CudaLaunch, GridStrideBlocksCoverEveryElementWithinLimits) {
  for (const std::int64_t n : {std::int64_t{0}, std::int64_t{1}, std::int64_t{255},
                               std::int64_t{256}, std::int64_t{257}, std::int64_t{1} << 40}) {
    for (const int threads : {64, kThreads}) {
      const std::int64_t b = blocks_for(n, threads);
      EXPECT_GE(b, 1);
      EXPECT_LE(b, kMaxBlocks);
      // One element per thread where the cap allows, else the grid-stride loop covers the rest.
      if (n <= kMaxBlocks * threads) {
        EXPECT_GE(b * threads, n);
        EXPECT_LT((b - 1) * threads, n > 0 ? n : 1);
      }
    }
  }
}

TEST(CudaLaunch, AttentionTilesCoverRowsAndCausalRanges) {
  for (const std::int64_t T : {1, 31, 32, 33, 80, 1024, 1025}) {
    const AttnGrid g = attention_grid(3, T, 4);
    EXPECT_EQ(g.x, 12);
    // Every row in exactly one tile.
    EXPECT_GE(g.y * kAttnRows, T);
    EXPECT_LT((g.y - 1) * kAttnRows, T);
    for (std::int64_t tile = 0; tile < g.y; ++tile) {
      const std::int64_t first = tile * kAttnRows;
      const std::int64_t last = std::min(T, first + kAttnRows) - 1;
      // A query tile visits every key its last row sees (keys <= last) and none past T.
      EXPECT_EQ(attn_keys_end(tile, T), last + 1);
      // A key tile visits every query that sees its first key (queries >= first).
      EXPECT_EQ(attn_queries_begin(tile), first);
    }
  }
  EXPECT_EQ(kAttnRows, kAttnWarps * kAttnRowsPerWarp);
}

TEST(CudaLaunch, HeadSizesSplitOverLanes) {
  EXPECT_EQ(attn_chunks(0), 0);
  EXPECT_EQ(attn_chunks(kAttnMaxHead + 1), 0);
  for (std::int64_t hs = 1; hs <= kAttnMaxHead; ++hs) {
    const int c = attn_chunks(hs);
    EXPECT_GE(32 * c, hs) << hs;   // every dim has a lane
    EXPECT_LT(32 * (c - 1), hs) << hs;  // no idle chunk
  }
}

TEST(CudaLaunch, QkvGroupsAreHeadInterleavedWithoutGrouping) {
  // G = 1: head h's q, k, v at h*3hs + {0, hs, 2hs} (kernels/README.md), the rotated heads
  // every q and k; G = 3: group columns [q q q | k | v].
  const QkvGroups one{8, 1}, three{8, 3};
  for (std::int64_t h = 0; h < 5; ++h) {
    EXPECT_EQ(one.q_col(h), h * 24);
    EXPECT_EQ(one.k_col(h), h * 24 + 8);
    EXPECT_EQ(one.v_col(h), h * 24 + 16);
    EXPECT_EQ(one.rotated_col(2 * h), h * 24);
    EXPECT_EQ(one.rotated_col(2 * h + 1), h * 24 + 8);
  }
  EXPECT_EQ(three.group_width(), 40);
  EXPECT_EQ(three.q_col(4), 48);  // group 1, second query head
  EXPECT_EQ(three.k_col(1), 64);
  EXPECT_EQ(three.v_col(1), 72);
  EXPECT_EQ(three.rotated_col(7), 64);  // group 1's key head, after its three query heads
}

}  // namespace
}  // namespace eth::cuda::launch
