// bf16 <-> fp32 conversion known answers (ties to even, overflow, NaN, infinities, subnormals),
// every conversion path against them bit for bit, CPU feature detection against
// /proc/cpuinfo, and the dispatch decisions (conversion path, GEMM path, default precision,
// missing build extensions) for the CPU kinds this project meets.
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
#include "kernels/cpu/cpu_features.h"

namespace eth {
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

// /proc/cpuinfo's flag names for the features we read with cpuid (the kernel reads the same
// cpuid bits, and also checks that the OS enabled the register state).
TEST(CpuFeatures, AgreeWithProcCpuinfo) {
  std::ifstream f("/proc/cpuinfo");
  if (!f) GTEST_SKIP() << "no /proc/cpuinfo";
  std::string line;
  std::set<std::string> flags;
  while (std::getline(f, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string w; words >> w;) flags.insert(w);
    break;
  }
  ASSERT_FALSE(flags.empty());
  const cpu::CpuFeatures c = cpu::detect_cpu_features();
  EXPECT_EQ(c.avx2, flags.count("avx2") == 1);
  EXPECT_EQ(c.fma, flags.count("fma") == 1);
  EXPECT_EQ(c.avx512f, flags.count("avx512f") == 1);
  EXPECT_EQ(c.avx512dq, flags.count("avx512dq") == 1);
  EXPECT_EQ(c.avx512bw, flags.count("avx512bw") == 1);
  EXPECT_EQ(c.avx512vl, flags.count("avx512vl") == 1);
  EXPECT_EQ(c.avx512_bf16, flags.count("avx512_bf16") == 1);
  EXPECT_EQ(c.amx_bf16, flags.count("amx_bf16") == 1);
  EXPECT_FALSE(c.model.empty());
  EXPECT_EQ(cpu::cpu_features().extensions(), c.extensions());
}

// The CPU kinds of shared/notes/machine-figures.md, plus the two other x86 cases the dispatch
// must get right: AVX-512 without bf16 (Skylake-X) and AMX (Sapphire Rapids).
cpu::CpuFeatures zen3() {
  cpu::CpuFeatures f;
  f.avx2 = f.fma = true;
  return f;
}
cpu::CpuFeatures skylake_x() {
  cpu::CpuFeatures f = zen3();
  f.avx512f = f.avx512dq = f.avx512bw = f.avx512vl = true;
  return f;
}
cpu::CpuFeatures zen5() {
  cpu::CpuFeatures f = skylake_x();
  f.avx512_bf16 = true;
  return f;
}
cpu::CpuFeatures sapphire_rapids() {
  cpu::CpuFeatures f = zen5();
  f.amx_bf16 = true;
  return f;
}

TEST(Bf16Dispatch, ChoosesByCpuKind) {
  using cpu::Precision;
  using cpu::bf16::GemmPath;
  EXPECT_EQ(cpu::bf16::convert_isa_for(cpu::CpuFeatures{}), ConvertIsa::Scalar);
  EXPECT_EQ(cpu::bf16::convert_isa_for(zen3()), ConvertIsa::Avx2);
  EXPECT_EQ(cpu::bf16::convert_isa_for(skylake_x()), ConvertIsa::Avx2);
  EXPECT_EQ(cpu::bf16::convert_isa_for(zen5()), ConvertIsa::Avx512Bf16);

  EXPECT_EQ(cpu::bf16::gemm_path_for(zen3()), GemmPath::Fp32Compute);
  EXPECT_EQ(cpu::bf16::gemm_path_for(skylake_x()), GemmPath::Fp32Compute);
  EXPECT_EQ(cpu::bf16::gemm_path_for(zen5()), GemmPath::OneDnn);
  EXPECT_EQ(cpu::bf16::gemm_path_for(sapphire_rapids()), GemmPath::OneDnn);

  EXPECT_EQ(cpu::default_precision(zen3()), Precision::Fp32);
  EXPECT_EQ(cpu::default_precision(skylake_x()), Precision::Fp32);
  EXPECT_EQ(cpu::default_precision(zen5()), Precision::Bf16);
  EXPECT_EQ(cpu::precision_name(Precision::Bf16), "bf16");
  EXPECT_EQ(cpu::precision_name(Precision::Fp32), "fp32");
  EXPECT_EQ(zen5().extensions(), "avx2 fma avx512f avx512dq avx512bw avx512vl avx512_bf16");

  // This CPU: the process-wide GEMM path starts at what it has (when the build can run it).
  const GemmPath mine = cpu::bf16::gemm_path_for(cpu::cpu_features());
  if (cpu::bf16::gemm_path_available(mine)) {
    EXPECT_EQ(cpu::bf16::gemm_path(), mine);
  }
  EXPECT_TRUE(cpu::bf16::gemm_path_available(GemmPath::Fp32Compute));
  // oneDNN 2.6 creates bf16 matmuls only with AVX-512 (native or emulated).
  if (!cpu::cpu_features().avx512f) {
    EXPECT_FALSE(cpu::bf16::gemm_path_available(GemmPath::OneDnn));
  }
}

TEST(Bf16Dispatch, FallbackCanBeForcedAndRestored) {
  using cpu::bf16::GemmPath;
  const GemmPath saved = cpu::bf16::gemm_path();
  cpu::bf16::set_gemm_path(GemmPath::Fp32Compute);
  EXPECT_EQ(cpu::bf16::gemm_path(), GemmPath::Fp32Compute);
  if (!cpu::bf16::gemm_path_available(GemmPath::OneDnn)) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");  // OpenMP threads may be running
    EXPECT_DEATH(cpu::bf16::set_gemm_path(GemmPath::OneDnn), "not available");
  }
  cpu::bf16::set_gemm_path(saved);
  EXPECT_EQ(cpu::bf16::gemm_path(), saved);
}

TEST(CpuFeatures, MissingBuildExtensions) {
  // This binary was built on this machine (or for the baseline), so it runs here.
  EXPECT_TRUE(cpu::missing_build_extensions(cpu::cpu_features()).empty());
  // A CPU with everything loses nothing.
  EXPECT_TRUE(cpu::missing_build_extensions(sapphire_rapids()).empty());
#if ETH_TEST_KERNELS_NATIVE
  // A native build on an AVX-512 machine cannot run on a Zen 3: it must say which extension.
  if (cpu::cpu_features().avx512f) {
    const auto missing = cpu::missing_build_extensions(zen3());
    EXPECT_NE(std::find(missing.begin(), missing.end(), "avx512f"), missing.end());
  }
#else
  // A portable build (-DETH_KERNELS_NATIVE=OFF) runs on anything.
  EXPECT_TRUE(cpu::missing_build_extensions(cpu::CpuFeatures{}).empty());
#endif
}

}  // namespace
}  // namespace eth
