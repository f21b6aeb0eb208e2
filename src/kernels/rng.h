// Counter-based randomness for training: Philox-4x32-10 (Salmon et al., SC'11), keyed so that a
// random number depends only on (seed, step, global sample, unit, operator, element) and never on
// rank, micro-batch split, recompute choice or thread count. Dropout masks and parameter
// initialization draw from here. Not a general-purpose RNG (core/ has none on purpose).
#pragma once

#include <array>
#include <cstdint>

#include "kernels/philox.h"

namespace eth {

// Which operator a stream belongs to; part of the counter, so every operator of every unit gets
// its own independent numbers. Values are persisted implicitly (they decide the masks), so
// append new ones, never renumber.
enum class RngOp : std::uint16_t {
  Init = 0,              // parameter initialization (step 0, "sample" = tensor index)
  EmbedDropout = 1,      // dropout after token + position embedding
  AttnDropout = 2,       // dropout of the attention probabilities P
  AttnResidDropout = 3,  // dropout of the attention branch before the residual add
  MlpResidDropout = 4,   // dropout of the MLP branch before the residual add
};

// One stream of random numbers: everything of the key except the sample and element indices.
struct RngStream {
  std::uint64_t seed = 0;
  std::int64_t step = 0;  // optimizer step, < 2^32
  std::int64_t unit = 0;  // model unit (0 = embedding, 1..L blocks, L+1 head), < 2^16
  RngOp op = RngOp::Init;
};

using Philox4x32 = std::array<std::uint32_t, 4>;

// The Philox-4x32 bijection with 10 rounds: counter -> 4 random words, under a 64-bit key.
// The arithmetic is philox.h's, shared with the CUDA kernels.
constexpr Philox4x32 philox4x32_10(Philox4x32 ctr, std::array<std::uint32_t, 2> key) {
  const philox::Block b = philox::rounds10(philox::Block{{ctr[0], ctr[1], ctr[2], ctr[3]}},
                                           key[0], key[1]);
  return {b.w[0], b.w[1], b.w[2], b.w[3]};
}

// The 32-bit random word for element `elem` of global sample `sample` in stream `s`. Elements
// come four to a Philox block: block elem/4, lane elem%4. The counter holds the indices
// verbatim (no hashing), so distinct keys can never collide.
// Ranges (checked by the callers that take user-sized inputs): sample < 2^32, elem < 2^34.
std::uint32_t rng_word(const RngStream& s, std::int64_t sample, std::int64_t elem);

// Word -> uniform float in [0, 1) with 24 random bits.
constexpr float rng_uniform(std::uint32_t word) {
  return static_cast<float>(word >> 8) * (1.0f / 16777216.0f);
}

// Dropout keep-mask: mask[b, j] = 1 (keep) or 0 (drop) for element elem0 + j of global sample
// sample0 + b. Keep probability is 1 - p (exactly, up to p's 2^-32 quantization). elem0 lets a
// tensor-parallel rank that holds a slice of each sample (a range of heads) draw just its slice.
// Thread count never changes the result (each element is a pure function of its key).
//   mask (B, n) bytes
void dropout_mask_fill(std::uint8_t* mask, const RngStream& s, float p, std::int64_t sample0,
                       std::int64_t elem0, std::int64_t B, std::int64_t n);

// Fills out[j] with N(0, stddev^2) numbers for elements elem0 + j of "sample" `sample` of the
// stream (Box-Muller on pairs of words, in float with the vectorized log and sin/cos of
// kernels/cpu/vec_math.h; element 2i and 2i+1 share a pair, a Philox block feeds two pairs).
// Each element is a pure function of (stream, sample, element): any slice, any thread count.
// Used for parameter initialization, where `sample` is the tensor's index within its unit.
//   out (n)
void normal_fill(float* out, const RngStream& s, float stddev, std::int64_t sample,
                 std::int64_t elem0, std::int64_t n);

}  // namespace eth
