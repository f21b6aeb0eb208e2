// The keyed Philox-4x32-10 arithmetic that both the CPU (rng.cpp) and the CUDA kernels
// (cuda/pointwise.cu, cuda/attention.cu) compile: the bijection, the counter layout of a stream
// and the dropout keep rule. One definition for both, so a mask drawn on the GPU is the CPU's bit
// for bit (tests/kernels/rng_test.cpp checks the CPU side against this header; the GPU check
// compares the device masks with dropout_mask_fill). Plain integer code, no library calls.
#pragma once

#include <cstdint>

#include "kernels/host_device.h"

namespace eth::philox {

struct Block {
  std::uint32_t w[4];
};

// The Philox-4x32 bijection with 10 rounds: counter -> 4 random words, under the 64-bit key
// (k0, k1) (Salmon et al., SC'11).
ETH_HOST_DEVICE constexpr Block rounds10(Block c, std::uint32_t k0, std::uint32_t k1) {
  constexpr std::uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr std::uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  ETH_UNROLL_10
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = static_cast<std::uint64_t>(kMul0) * c.w[0];
    const std::uint64_t p1 = static_cast<std::uint64_t>(kMul1) * c.w[2];
    const auto hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
    const auto hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
    c = Block{{hi1 ^ c.w[1] ^ k0, lo1, hi0 ^ c.w[3] ^ k1, lo0}};
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return c;
}

// The counter of Philox block `block` of global sample `sample` in the stream (step, unit, op):
// the indices verbatim, (element / 4, sample, step, unit << 16 | op), so distinct keys never
// collide (kernels/README.md, "Randomness").
ETH_HOST_DEVICE constexpr Block counter(std::int64_t step, std::int64_t unit, std::uint16_t op,
                                        std::int64_t sample, std::int64_t block) {
  return Block{{static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(sample),
                static_cast<std::uint32_t>(step),
                (static_cast<std::uint32_t>(unit) << 16) | static_cast<std::uint32_t>(op)}};
}

ETH_HOST_DEVICE constexpr std::uint32_t key0(std::uint64_t seed) {
  return static_cast<std::uint32_t>(seed);
}
ETH_HOST_DEVICE constexpr std::uint32_t key1(std::uint64_t seed) {
  return static_cast<std::uint32_t>(seed >> 32);
}

// The 32-bit word of element `elem` of `sample`: block elem / 4, lane elem % 4.
ETH_HOST_DEVICE constexpr std::uint32_t word(std::uint64_t seed, std::int64_t step,
                                             std::int64_t unit, std::uint16_t op,
                                             std::int64_t sample, std::int64_t elem) {
  const Block b = rounds10(counter(step, unit, op, sample, elem >> 2), key0(seed), key1(seed));
  return b.w[elem & 3];
}

// Dropout keeps an element iff its word >= floor(p 2^32): an exact integer comparison, the
// same on every device. p in [0, 1), so the product is below 2^32 and truncation is floor.
ETH_HOST_DEVICE inline std::uint32_t dropout_threshold(float p) {
  return static_cast<std::uint32_t>(static_cast<double>(p) * 4294967296.0);
}
ETH_HOST_DEVICE constexpr bool dropout_keep(std::uint32_t word, std::uint32_t threshold) {
  return word >= threshold;
}

}  // namespace eth::philox
