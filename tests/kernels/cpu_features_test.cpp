// CPU feature detection and what depends on it alone (cpu/cpu_features.cpp): cpuid's features
// against /proc/cpuinfo's flags, the default precision and the extension list for each CPU kind
// this project meets, and the build's extensions a CPU lacks.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "cpu_kinds.h"
#include "kernels/cpu/cpu_features.h"

namespace eth::test::cpu_features_test {
namespace {

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

TEST(CpuFeatures, DefaultPrecisionByCpuKind) {
  using cpu::Precision;
  EXPECT_EQ(cpu::default_precision(zen3()), Precision::Fp32);
  EXPECT_EQ(cpu::default_precision(skylake_x()), Precision::Fp32);
  EXPECT_EQ(cpu::default_precision(zen5()), Precision::Bf16);
  EXPECT_EQ(cpu::precision_name(Precision::Bf16), "bf16");
  EXPECT_EQ(cpu::precision_name(Precision::Fp32), "fp32");
  EXPECT_EQ(zen5().extensions(), "avx2 fma avx512f avx512dq avx512bw avx512vl avx512_bf16");
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
}  // namespace eth::test::cpu_features_test
