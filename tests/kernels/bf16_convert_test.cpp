// bf16 <-> fp32 conversion (cpu/bf16/convert.cpp): known answers (ties to even, overflow, NaN,
// infinities, subnormals), every conversion path against them bit for bit, and the conversion
// path chosen for each CPU kind this project meets.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>

#include "kernels/bf16.h"
#include "kernels/cpu/bf16/convert.h"
#include "kernels/cpu/bf16/gemm.h"
#include "cpu_kinds.h"
#include "kernels/cpu/cpu_features.h"

namespace eth::bf16_convert_test {
namespace {

using cpu::bf16::ConvertIsa;

struct KnownAnswer {
  std::uint32_t in;    // float bits
  std::uint16_t want;  // bf16 bits
  const char* what;
};

// Worked out by hand from IEEE binary32 and the rounding contract of kernels/bf16.h.
constexpr KnownAnswer kKnown[] = {
    {0x3F800000u, 0x3F80, "1.0"},
    {0xBF800000u, 0xBF80, "-1.0"},
    {0x3F808000u, 0x3F80, "1 + 2^-8: tie, lower neighbour 0x3F80 is even, stays"},
    {0x3F818000u, 0x3F82, "tie above the odd 0x3F81: rounds up to even 0x3F82"},
    {0x3F808001u, 0x3F81, "just above a tie: rounds up"},
    {0x3F807FFFu, 0x3F80, "just below a tie: rounds down"},
    {0x40490FDBu, 0x4049, "pi: 0x0FDB below half of 0x10000"},
    {0x7F7F7FFFu, 0x7F7F, "below the tie under the largest bf16: stays finite"},
    {0x7F7FFFFFu, 0x7F80, "largest float: rounds to +inf"},
    {0xFF7FFFFFu, 0xFF80, "most negative float: rounds to -inf"},
    {0x7F800000u, 0x7F80, "+inf"},
    {0xFF800000u, 0xFF80, "-inf"},
    {0x7FC00000u, 0x7FC0, "quiet NaN"},
    {0x7F800001u, 0x7FC0, "signalling NaN with a low payload: stays NaN, quieted"},
    {0xFFC12345u, 0xFFC1, "negative NaN: sign and top payload kept"},
    {0x00000000u, 0x0000, "+0"},
    {0x80000000u, 0x8000, "-0"},
    {0x00000001u, 0x0000, "smallest subnormal: flushed to +0"},
    {0x007FFFFFu, 0x0000, "largest subnormal: flushed (not rounded up to the smallest normal)"},
    {0x807FFFFFu, 0x8000, "negative subnormal: flushed to -0"},
    {0x00800000u, 0x0080, "smallest normal: kept"},
    {0x00808000u, 0x0080, "tie at the smallest normals: to even"},
};

std::vector<ConvertIsa> supported_isas() {
  std::vector<ConvertIsa> out;
  for (ConvertIsa isa : {ConvertIsa::Scalar, ConvertIsa::Avx2, ConvertIsa::Avx512Bf16}) {
    if (cpu::bf16::convert_isa_supported(isa)) out.push_back(isa);
  }
  return out;
}

TEST(Bf16Convert, ScalarKnownAnswers) {
  for (const auto& k : kKnown) {
    EXPECT_EQ(bf16_from_float(std::bit_cast<float>(k.in)).bits, k.want) << k.what;
  }
  // bf16 -> float is a shift, so exact; bf16 subnormals stay subnormal floats.
  EXPECT_EQ(std::bit_cast<std::uint32_t>(float_from_bf16(Bf16{0x0001})), 0x00010000u);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(float_from_bf16(Bf16{0x8001})), 0x80010000u);
  EXPECT_EQ(float_from_bf16(Bf16{0x3F80}), 1.0f);
  EXPECT_EQ(float_from_bf16(Bf16{0x7F80}), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(float_from_bf16(Bf16{0xFFC1})));
  // Rounding is to the nearest representable value: within half an ulp, 2^-8 relative.
  std::mt19937_64 gen(1);
  std::uniform_real_distribution<float> d(-1e3f, 1e3f);
  for (int i = 0; i < 10000; ++i) {
    const float x = d(gen);
    EXPECT_LE(std::abs(round_to_bf16(x) - x), std::abs(x) / 256.0f) << x;
  }
}

TEST(Bf16Convert, EveryPathGivesTheScalarBits) {
  // The known answers, then random bit patterns (every class: NaNs, subnormals, huge values),
  // at lengths that leave every vector tail size.
  std::vector<float> in;
  for (const auto& k : kKnown) in.push_back(std::bit_cast<float>(k.in));
  std::mt19937 gen(7);
  for (int i = 0; i < 100000; ++i) in.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(gen())));
  std::vector<Bf16> want(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) want[i] = bf16_from_float(in[i]);
  const auto isas = supported_isas();
  ASSERT_FALSE(isas.empty());
  for (ConvertIsa isa : isas) {
    SCOPED_TRACE(std::string(cpu::bf16::convert_isa_name(isa)));
    for (std::int64_t n : {std::int64_t{1}, std::int64_t{7}, std::int64_t{15}, std::int64_t{16},
                           std::int64_t{17}, std::int64_t{33},
                           static_cast<std::int64_t>(in.size())}) {
      std::vector<Bf16> got(static_cast<std::size_t>(n), Bf16{0x1234});
      cpu::bf16::convert_to_bf16(got.data(), in.data(), n, isa);
      std::size_t bad = 0;
      for (std::size_t i = 0; i < got.size(); ++i) {
        if (got[i] != want[i] && ++bad <= 3) {
          ADD_FAILURE() << "n=" << n << " [" << i << "] in 0x" << std::hex
                        << std::bit_cast<std::uint32_t>(in[i]) << ": got 0x" << got[i].bits
                        << ", want 0x" << want[i].bits;
        }
      }
      std::vector<float> back(static_cast<std::size_t>(n));
      cpu::bf16::convert_to_float(back.data(), want.data(), n, isa);
      for (std::size_t i = 0; i < back.size(); ++i) {
        ASSERT_EQ(std::bit_cast<std::uint32_t>(back[i]),
                  static_cast<std::uint32_t>(want[i].bits) << 16)
            << "n=" << n << " [" << i << "]";
      }
    }
  }
  // The dispatching overloads take the fastest path this CPU has; above 4 M elements they split
  // the buffer between threads in chunks (the tail chunk partial).
  const std::size_t big = (std::size_t{1} << 22) + 17;
  std::vector<float> large(big);
  for (auto& x : large) x = std::bit_cast<float>(static_cast<std::uint32_t>(gen()));
  std::vector<Bf16> got(big);
  cpu::bf16::convert_to_bf16(got.data(), large.data(), static_cast<std::int64_t>(big));
  std::size_t bad = 0;
  for (std::size_t i = 0; i < big; ++i) bad += got[i] != bf16_from_float(large[i]);
  EXPECT_EQ(bad, 0u) << "bulk conversion";
  std::vector<float> back(big);
  cpu::bf16::convert_to_float(back.data(), got.data(), static_cast<std::int64_t>(big));
  bad = 0;
  for (std::size_t i = 0; i < big; ++i) {
    bad += std::bit_cast<std::uint32_t>(back[i]) != static_cast<std::uint32_t>(got[i].bits) << 16;
  }
  EXPECT_EQ(bad, 0u) << "bulk widening";
}

TEST(Bf16Dispatch, ConvertIsaByCpuKind) {
  using test::skylake_x;
  using test::zen3;
  using test::zen5;
  EXPECT_EQ(cpu::bf16::convert_isa_for(cpu::CpuFeatures{}), ConvertIsa::Scalar);
  EXPECT_EQ(cpu::bf16::convert_isa_for(zen3()), ConvertIsa::Avx2);
  EXPECT_EQ(cpu::bf16::convert_isa_for(skylake_x()), ConvertIsa::Avx2);
  EXPECT_EQ(cpu::bf16::convert_isa_for(zen5()), ConvertIsa::Avx512Bf16);
}

}  // namespace
}  // namespace eth::bf16_convert_test
