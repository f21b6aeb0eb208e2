// Launch shapes of the CUDA kernels: plain constexpr arithmetic, compiled by nvcc for the
// launches and by the host compiler for tests/kernels/cuda_launch_test.cpp, which checks it on
// machines without a GPU (a grid that misses rows would otherwise only show on a GPU).
#pragma once

#include <cstdint>

#include "kernels/host_device.h"

namespace eth::cuda::launch {

// Threads per block of the element-wise and row kernels (a multiple of 32).
inline constexpr int kThreads = 256;
// At most this many blocks for a grid-stride loop: grid.x may be 2^31 - 1 on sm_90, but beyond
// a few waves of 132 SMs more blocks add nothing; the loop covers the rest.
inline constexpr std::int64_t kMaxBlocks = 65535 * 8;

// Blocks of `threads` for n elements of a grid-stride loop: enough for one element per thread,
// at least 1, at most kMaxBlocks.
constexpr unsigned blocks_for(std::int64_t n, int threads = kThreads) {
  const std::int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : b > kMaxBlocks ? kMaxBlocks : b);
}

// The fused attention kernels: a block of kAttnWarps warps owns kAttnRows consecutive rows of
// one (batch, head) (query rows forward and for dQ, key rows for dK and dV); each warp owns
// kAttnRowsPerWarp of them, its lanes splitting the head dimension (lane l holds dims l, l+32,
// ...). The other side streams through shared memory kAttnKeys rows at a time.
inline constexpr int kAttnWarps = 8;
inline constexpr int kAttnRowsPerWarp = 4;
inline constexpr int kAttnRows = kAttnWarps * kAttnRowsPerWarp;
inline constexpr int kAttnKeys = 32;
inline constexpr int kAttnMaxHead = 128;  // shared tiles hold kAttnKeys x 128 floats

// Head dims per lane (1..4); 0 for an unsupported head size.
constexpr int attn_chunks(std::int64_t hs) {
  return hs >= 1 && hs <= kAttnMaxHead ? static_cast<int>((hs + 31) / 32) : 0;
}

struct AttnGrid {
  std::int64_t x = 0;  // B * NH: one (batch, head) per x
  std::int64_t y = 0;  // row tiles of kAttnRows
};
constexpr AttnGrid attention_grid(std::int64_t B, std::int64_t T, std::int64_t NH) {
  return {B * NH, (T + kAttnRows - 1) / kAttnRows};
}
// Keys a query tile must see (causal): [0, keys_end).
ETH_HOST_DEVICE constexpr std::int64_t attn_keys_end(std::int64_t tile, std::int64_t T) {
  return (tile + 1) * kAttnRows < T ? (tile + 1) * kAttnRows : T;
}
// The queries a key tile must see (causal): [queries_begin, T).
ETH_HOST_DEVICE constexpr std::int64_t attn_queries_begin(std::int64_t tile) {
  return tile * kAttnRows;
}

// Where the heads sit in a token's row of qkv under grouped-query attention (device_kernels.inc):
// NKV key/value heads, each shared by G = NH / NKV query heads, laid out group by group as
// [q of the group's G heads | k | v], hs columns each, so a tp rank's kv heads (and their query
// heads) are one contiguous column range. G = 1 (NKV = NH) is the head-interleaved layout of
// multi-head attention, [q_h | k_h | v_h] per head.
struct QkvGroups {
  std::int64_t hs = 0;  // head size
  std::int64_t G = 1;   // query heads per kv head

  ETH_HOST_DEVICE constexpr std::int64_t group_width() const { return (G + 2) * hs; }
  // First column of query head h, and of kv head `kv`'s key and value.
  ETH_HOST_DEVICE constexpr std::int64_t q_col(std::int64_t h) const {
    return (h / G) * group_width() + (h % G) * hs;
  }
  ETH_HOST_DEVICE constexpr std::int64_t k_col(std::int64_t kv) const {
    return kv * group_width() + G * hs;
  }
  ETH_HOST_DEVICE constexpr std::int64_t v_col(std::int64_t kv) const {
    return kv * group_width() + (G + 1) * hs;
  }
  // The r-th head that rotary positions turn, r in [0, NKV (G + 1)): each group's G query heads
  // and its key head, in column order (the value heads are skipped).
  ETH_HOST_DEVICE constexpr std::int64_t rotated_col(std::int64_t r) const {
    return (r / (G + 1)) * group_width() + (r % (G + 1)) * hs;
  }
};

}  // namespace eth::cuda::launch
