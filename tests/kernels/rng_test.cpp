// Philox against its published known-answer vectors; the arithmetic shared with the CUDA kernels
// (philox.h) against the CPU's and against masks pinned before it was shared; and (d): a dropout mask depends only on
// its key, never on how samples are batched or how a sample's elements are sliced.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/philox.h"
#include "kernels/rng.h"

namespace eth {
namespace {

// Known-answer vectors of Philox-4x32-10 from the Random123 distribution (kat_vectors).
TEST(Philox, KnownAnswers) {
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (Philox4x32{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                          {0xffffffffu, 0xffffffffu}),
            (Philox4x32{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                          {0xa4093822u, 0x299f31d0u}),
            (Philox4x32{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

std::vector<std::uint8_t> mask_of(const RngStream& s, float p, std::int64_t sample0,
                                  std::int64_t elem0, std::int64_t B, std::int64_t n) {
  std::vector<std::uint8_t> m(static_cast<std::size_t>(B * n));
  dropout_mask_fill(m.data(), s, p, sample0, elem0, B, n);
  return m;
}

// The masks dropout_mask_fill drew before its arithmetic moved into philox.h (for the CUDA
// kernels), pinned as FNV-1a hashes of the mask bytes: the masks of every existing run, and so its
// losses, stay the same. The hashes were computed by the pre-philox.h rng.cpp (commit dfda61d).
std::uint64_t fnv1a(const std::vector<std::uint8_t>& bytes) {
  std::uint64_t h = 1469598103934665603ull;
  for (const std::uint8_t b : bytes) {
    h ^= b;
    h *= 1099511628211ull;
  }
  return h;
}

TEST(DropoutMask, SameMasksAsBeforePhiloxWasShared) {
  struct Case {
    RngStream s;
    float p;
    std::int64_t sample0, elem0, B, n;
    std::uint64_t hash;
  };
  const Case cases[] = {
      {{0, 0, 0, RngOp::AttnDropout}, 0.1f, 0, 0, 4, 1000, 0x68e2f62630a87c6cull},
      {{0x123456789abcdefull, 17, 3, RngOp::EmbedDropout}, 0.5f, 5, 3, 3, 777,
       0x3d019845dced2fcbull},
      {{42, 1000, 65535, RngOp::AttnDropout}, 0.9f, 1 << 20, 12345, 2, 4099,
       0xe18e3e3bda5336a2ull},
      {{7, 2, 1, RngOp::AttnDropout}, 0.0f, 0, 0, 1, 64, 0x1f84144b88b64ec3ull},
  };
  for (const Case& c : cases) {
    std::vector<std::uint8_t> m(static_cast<std::size_t>(c.B * c.n));
    dropout_mask_fill(m.data(), c.s, c.p, c.sample0, c.elem0, c.B, c.n);
    EXPECT_EQ(fnv1a(m), c.hash) << "seed " << c.s.seed << " p " << c.p;
  }
}

// What the CUDA kernels compute per element (philox::word and the keep rule) is the CPU's word
// and mask, for keys at the edges of every field.
TEST(PhiloxShared, WordAndKeepRuleEqualTheCpus) {
  const RngStream streams[] = {{0, 0, 0, RngOp::AttnDropout},
                               {~0ull, 0xFFFFFFFF, 65535, RngOp::EmbedDropout},
                               {0x9E3779B97F4A7C15ull, 123, 7, RngOp::AttnDropout}};
  for (const RngStream& s : streams) {
    for (const std::int64_t sample : {std::int64_t{0}, std::int64_t{5}, std::int64_t{0xFFFFFFFF}}) {
      for (std::int64_t e = 0; e < 37; ++e) {
        const std::int64_t elem = e * 1009 + (e % 4);
        EXPECT_EQ(philox::word(s.seed, s.step, s.unit, static_cast<std::uint16_t>(s.op), sample,
                               elem),
                  rng_word(s, sample, elem));
      }
    }
  }
  // Keep iff word >= floor(p 2^32), the threshold computed independently here in long double.
  for (const float p : {0.0f, 0.1f, 0.25f, 0.5f, 0.9f, 0.99999994f, 1e-10f}) {
    const auto want = static_cast<std::uint32_t>(
        std::floor(static_cast<long double>(p) * 4294967296.0L));
    EXPECT_EQ(philox::dropout_threshold(p), want) << p;
  }
  const RngStream s{3, 1, 2, RngOp::AttnDropout};
  std::vector<std::uint8_t> m(4 * 301);
  dropout_mask_fill(m.data(), s, 0.3f, 9, 2, 4, 301);
  const std::uint32_t th = philox::dropout_threshold(0.3f);
  for (std::int64_t b = 0; b < 4; ++b) {
    for (std::int64_t e = 0; e < 301; ++e) {
      const bool keep = philox::dropout_keep(
          philox::word(s.seed, s.step, s.unit, static_cast<std::uint16_t>(s.op), 9 + b, 2 + e), th);
      ASSERT_EQ(m[static_cast<std::size_t>(b * 301 + e)], keep ? 1 : 0);
    }
  }
}

TEST(DropoutMask, SampleAloneEqualsItsRowInABatch) {
  const RngStream s{42, 7, 3, RngOp::AttnDropout};
  const std::int64_t B = 5, n = 257, sample0 = 100;  // n not a multiple of 4 on purpose
  const auto batch = mask_of(s, 0.3f, sample0, 0, B, n);
  for (std::int64_t b = 0; b < B; ++b) {
    const auto alone = mask_of(s, 0.3f, sample0 + b, 0, 1, n);
    const std::vector<std::uint8_t> row(batch.begin() + b * n, batch.begin() + (b + 1) * n);
    EXPECT_EQ(alone, row) << "sample " << sample0 + b;
  }
  // Another split of the same global batch: micro-batches {100, 101} and {102, 103, 104}.
  auto first = mask_of(s, 0.3f, sample0, 0, 2, n), second = mask_of(s, 0.3f, sample0 + 2, 0, 3, n);
  first.insert(first.end(), second.begin(), second.end());
  EXPECT_EQ(first, batch);
}

TEST(DropoutMask, ElementSliceEqualsSliceOfWholeSample) {
  // A tensor-parallel rank holding heads [1, 3) of 4 draws elements [1/4, 3/4) of each sample.
  const RngStream s{1, 2, 5, RngOp::AttnDropout};
  const std::int64_t B = 3, n = 4 * 49, lo = n / 4 + 1, hi = 3 * n / 4;  // unaligned start
  const auto whole = mask_of(s, 0.5f, 0, 0, B, n);
  const auto part = mask_of(s, 0.5f, 0, lo, B, hi - lo);
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t e = lo; e < hi; ++e) {
      ASSERT_EQ(part[static_cast<std::size_t>(b * (hi - lo) + e - lo)],
                whole[static_cast<std::size_t>(b * n + e)]);
    }
  }
}

TEST(DropoutMask, MatchesSingleWordLookup) {
  // mask element e of sample i keeps iff rng_word(stream, i, e) >= p * 2^32.
  const RngStream s{11, 4, 2, RngOp::AttnDropout};
  const float p = 0.25f;
  const auto m = mask_of(s, p, 6, 3, 2, 50);
  for (std::int64_t b = 0; b < 2; ++b) {
    for (std::int64_t j = 0; j < 50; ++j) {
      const bool keep = rng_word(s, 6 + b, 3 + j) >= 0x40000000u;  // 0.25 * 2^32
      EXPECT_EQ(m[static_cast<std::size_t>(b * 50 + j)], keep ? 1 : 0);
    }
  }
}

TEST(DropoutMask, EveryKeyFieldChangesTheMask) {
  const RngStream base{42, 7, 3, RngOp::AttnDropout};
  const auto m = mask_of(base, 0.5f, 0, 0, 1, 512);
  auto differs = [&](RngStream s, std::int64_t sample) {
    return mask_of(s, 0.5f, sample, 0, 1, 512) != m;
  };
  EXPECT_TRUE(differs({43, 7, 3, RngOp::AttnDropout}, 0));
  EXPECT_TRUE(differs({42, 8, 3, RngOp::AttnDropout}, 0));
  EXPECT_TRUE(differs({42, 7, 4, RngOp::AttnDropout}, 0));
  EXPECT_TRUE(differs({42, 7, 3, RngOp::MlpResidDropout}, 0));
  EXPECT_TRUE(differs(base, 1));
  EXPECT_FALSE(differs(base, 0));
}

TEST(DropoutMask, KeepRateIsOneMinusP) {
  // Binomial(n, 1 - p): the kept fraction is within 5 standard deviations of 1 - p.
  const std::int64_t n = 200000;
  for (float p : {0.0f, 0.1f, 0.5f, 0.9f}) {
    const auto m = mask_of({5, 1, 1, RngOp::EmbedDropout}, p, 0, 0, 1, n);
    double kept = 0;
    for (auto x : m) kept += x;
    const double q = 1.0 - static_cast<double>(p);
    const double sd = std::sqrt(static_cast<double>(n) * q * (1 - q));
    EXPECT_NEAR(kept, static_cast<double>(n) * q, 5 * sd + 1e-9) << "p = " << p;
  }
}

TEST(NormalFill, MomentsAndSliceIndependence) {
  const std::int64_t n = 100000;
  std::vector<float> z(static_cast<std::size_t>(n));
  const RngStream s{9, 0, 4, RngOp::Init};
  normal_fill(z.data(), s, 2.0f, 3, 0, n);
  double mean = 0, var = 0;
  for (float x : z) mean += x;
  mean /= static_cast<double>(n);
  for (float x : z) var += (x - mean) * (x - mean);
  var /= static_cast<double>(n);
  // Standard errors: sd / sqrt(n) = 0.0063 for the mean, ~ var * sqrt(2 / n) = 0.018 for var.
  EXPECT_NEAR(mean, 0.0, 5 * 0.0064);
  EXPECT_NEAR(var, 4.0, 5 * 0.018);
  std::vector<float> part(101);
  normal_fill(part.data(), s, 2.0f, 3, 777, 101);  // odd start: splits a Box-Muller pair
  for (std::size_t j = 0; j < part.size(); ++j) EXPECT_EQ(part[j], z[777 + j]);
}

}  // namespace
}  // namespace eth
