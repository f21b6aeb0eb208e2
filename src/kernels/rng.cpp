// Keyed Philox streams: dropout masks and normal fills. See rng.h for the key layout.
#include "kernels/rng.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace eth {
namespace {

constexpr std::int64_t kMaxSample = std::int64_t{1} << 32;
constexpr std::int64_t kMaxElem = std::int64_t{1} << 34;
constexpr std::int64_t kBlocksPerTask = 256;  // Philox blocks one thread draws at a time

void check_stream(const RngStream& s) {
  ETH_CHECK(s.step >= 0 && s.step < (std::int64_t{1} << 32), "rng: step must be in [0, 2^32)");
  ETH_CHECK(s.unit >= 0 && s.unit < (std::int64_t{1} << 16), "rng: unit must be in [0, 2^16)");
}

// The counter of Philox block `block` of sample `sample`: indices verbatim, so it is injective.
Philox4x32 counter(const RngStream& s, std::int64_t sample, std::int64_t block) {
  return {static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(sample),
          static_cast<std::uint32_t>(s.step),
          (static_cast<std::uint32_t>(s.unit) << 16) | static_cast<std::uint32_t>(s.op)};
}

std::array<std::uint32_t, 2> key_of(const RngStream& s) {
  return {static_cast<std::uint32_t>(s.seed), static_cast<std::uint32_t>(s.seed >> 32)};
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
  // Keep iff word >= p * 2^32: an exact integer comparison, identical for every caller.
  const auto threshold = static_cast<std::uint32_t>(
      std::floor(static_cast<double>(p) * 4294967296.0));
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
      row[e - elem0] = words[e - block0 * 4] >= threshold ? 1 : 0;
    }
  }
}

void normal_fill(float* out, const RngStream& s, float stddev, std::int64_t sample,
                 std::int64_t elem0, std::int64_t n) {
  check_stream(s);
  ETH_CHECK(sample >= 0 && sample < kMaxSample, "normal_fill: sample index must be < 2^32");
  ETH_CHECK(elem0 >= 0 && n >= 0 && elem0 + n <= kMaxElem, "normal_fill: bad element range");
  const auto key = key_of(s);
  constexpr double kTwoPi = 6.283185307179586476925286766559;
#pragma omp parallel for schedule(static)
  for (std::int64_t j = 0; j < n; ++j) {
    // Element e uses the first two words of Philox block e/2: one Box-Muller pair per block.
    const std::int64_t e = elem0 + j;
    const Philox4x32 w = philox4x32_10(counter(s, sample, e >> 1), key);
    const double u1 = (static_cast<double>(w[0] >> 8) + 1.0) * (1.0 / 16777216.0);  // (0, 1]
    const double u2 = static_cast<double>(w[1] >> 8) * (1.0 / 16777216.0);
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double z = (e & 1) ? r * std::sin(kTwoPi * u2) : r * std::cos(kTwoPi * u2);
    out[j] = static_cast<float>(z * static_cast<double>(stddev));
  }
}

}  // namespace eth
