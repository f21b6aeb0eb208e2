// Keyed Philox streams: dropout masks and normal fills. See rng.h for the key layout.
#include "kernels/rng.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "kernels/cpu/vec_math.h"

namespace eth {
namespace {

constexpr std::int64_t kMaxSample = std::int64_t{1} << 32;
constexpr std::int64_t kMaxElem = std::int64_t{1} << 34;
constexpr std::int64_t kBlocksPerTask = 256;  // Philox blocks one thread draws at a time
// normal_fill draws whole chunks of 256 Philox blocks (1024 normals), always all of a chunk,
// so every element comes out of the same fully vectorized code whatever slice is asked for.
constexpr std::int64_t kNormalBlocks = 256;
constexpr std::int64_t kNormalChunk = 4 * kNormalBlocks;

void check_stream(const RngStream& s) {
  ETH_CHECK(s.step >= 0 && s.step < (std::int64_t{1} << 32), "rng: step must be in [0, 2^32)");
  ETH_CHECK(s.unit >= 0 && s.unit < (std::int64_t{1} << 16), "rng: unit must be in [0, 2^16)");
}

// The counter of Philox block `block` of sample `sample` (philox.h's layout: indices verbatim).
Philox4x32 counter(const RngStream& s, std::int64_t sample, std::int64_t block) {
  const philox::Block c =
      philox::counter(s.step, s.unit, static_cast<std::uint16_t>(s.op), sample, block);
  return {c.w[0], c.w[1], c.w[2], c.w[3]};
}

std::array<std::uint32_t, 2> key_of(const RngStream& s) {
  return {philox::key0(s.seed), philox::key1(s.seed)};
}

// words[4j .. 4j+3] = Philox of counter `base` with word 0 advanced by j, for j < blocks. A
// function of its own (not inlined into the OpenMP region) so that GCC vectorizes the loop,
// 16 blocks per AVX-512 pass.
[[gnu::noinline]] void philox_blocks(std::uint32_t* words, Philox4x32 base,
                                     std::array<std::uint32_t, 2> key, std::int64_t blocks) {
#pragma omp simd
  for (std::int64_t j = 0; j < blocks; ++j) {
    const Philox4x32 w =
        philox4x32_10({base[0] + static_cast<std::uint32_t>(j), base[1], base[2], base[3]}, key);
    words[4 * j] = w[0];
    words[4 * j + 1] = w[1];
    words[4 * j + 2] = w[2];
    words[4 * j + 3] = w[3];
  }
}

// The 1024 normals (stddev 1) of chunk `chunk` of a sample: element 4b + l comes from Philox
// block b; words 2p and 2p + 1 (p = element / 2) are one Box-Muller pair, the even element
// takes the cosine, the odd one the sine.
[[gnu::noinline]] void normal_chunk(float* out, const RngStream& s, std::int64_t sample,
                                    std::int64_t chunk, float stddev) {
  alignas(64) std::uint32_t words[kNormalChunk];
  philox_blocks(words, counter(s, sample, chunk * kNormalBlocks), key_of(s), kNormalBlocks);
  constexpr float k2m24 = 1.0f / 16777216.0f;
#pragma omp simd
  for (std::int64_t p = 0; p < kNormalChunk / 2; ++p) {
    const float u1 = static_cast<float>((words[2 * p] >> 8) + 1) * k2m24;  // (0, 1]
    const float u2 = static_cast<float>(words[2 * p + 1] >> 8) * k2m24;    // [0, 1)
    const float r = std::sqrt(-2.0f * cpu::log_approx(u1)) * stddev;
    float c = 0, sn = 0;
    cpu::sincos_2pi_approx(u2, &c, &sn);
    out[2 * p] = r * c;
    out[2 * p + 1] = r * sn;
  }
}

}  // namespace

std::uint32_t rng_word(const RngStream& s, std::int64_t sample, std::int64_t elem) {
  const Philox4x32 w = philox4x32_10(counter(s, sample, elem >> 2), key_of(s));
  return w[static_cast<std::size_t>(elem & 3)];
}

void dropout_mask_fill(std::uint8_t* mask, const RngStream& s, float p, std::int64_t sample0,
                       std::int64_t elem0, std::int64_t B, std::int64_t n) {
  check_stream(s);
  ETH_CHECK(p >= 0.0f && p < 1.0f, "dropout probability must be in [0, 1)");
  ETH_CHECK(B >= 0 && n >= 0 && sample0 >= 0 && elem0 >= 0, "dropout mask: negative size");
  ETH_CHECK(sample0 + B <= kMaxSample, "dropout mask: sample index must be < 2^32");
  ETH_CHECK(elem0 + n <= kMaxElem, "dropout mask: element index must be < 2^34");
  if (B == 0 || n == 0) return;
  // Keep iff word >= p * 2^32: an exact integer comparison, identical for every caller (and
  // for the CUDA kernels, which use the same philox.h rule).
  const std::uint32_t threshold = philox::dropout_threshold(p);
  const auto key = key_of(s);
  const std::int64_t first = elem0 >> 2, last = (elem0 + n - 1) >> 2;
  const std::int64_t chunks = (last - first + kBlocksPerTask) / kBlocksPerTask;
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < B * chunks; ++i) {
    const std::int64_t b = i / chunks, block0 = first + (i % chunks) * kBlocksPerTask;
    const std::int64_t blocks = std::min(kBlocksPerTask, last + 1 - block0);
    std::uint32_t words[4 * kBlocksPerTask];
    philox_blocks(words, counter(s, sample0 + b, block0), key, blocks);
    const std::int64_t lo = std::max(elem0, block0 * 4);
    const std::int64_t hi = std::min(elem0 + n, (block0 + blocks) * 4);
    std::uint8_t* row = mask + b * n;
    for (std::int64_t e = lo; e < hi; ++e) {
      row[e - elem0] = philox::dropout_keep(words[e - block0 * 4], threshold) ? 1 : 0;
    }
  }
}

void normal_fill(float* out, const RngStream& s, float stddev, std::int64_t sample,
                 std::int64_t elem0, std::int64_t n) {
  check_stream(s);
  ETH_CHECK(sample >= 0 && sample < kMaxSample, "normal_fill: sample index must be < 2^32");
  ETH_CHECK(elem0 >= 0 && n >= 0 && elem0 + n <= kMaxElem, "normal_fill: bad element range");
  if (n == 0) return;
  const std::int64_t first = elem0 / kNormalChunk, last = (elem0 + n - 1) / kNormalChunk;
#pragma omp parallel for schedule(dynamic, 4) if (last > first)
  for (std::int64_t ch = first; ch <= last; ++ch) {
    alignas(64) float z[kNormalChunk];
    normal_chunk(z, s, sample, ch, stddev);
    const std::int64_t lo = std::max(elem0, ch * kNormalChunk);
    const std::int64_t hi = std::min(elem0 + n, (ch + 1) * kNormalChunk);
    std::copy(z + (lo - ch * kNormalChunk), z + (hi - ch * kNormalChunk), out + (lo - elem0));
  }
}

}  // namespace eth
