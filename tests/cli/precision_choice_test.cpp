// --precision (cli/precision_choice.h): the two names a run takes and the refusal of others
// naming the flag; the default follows the CPU's bf16 matrix instructions (read from the CPU
// feature detection, not from the code under test), and the line says which ran and why.
#include "cli/precision_choice.h"

#include <gtest/gtest.h>

#include "kernels/cpu/cpu_features.h"
#include "test_util.h"

namespace eth::precision_choice_test {
namespace {

TEST(PrecisionChoice, AskedPrecisionIsTakenAndSaidSo) {
  cli::PrecisionChoice c = cli::choose_precision("fp32", "--precision");
  EXPECT_EQ(c.precision, Precision::Fp32);
  EXPECT_EQ(c.line.rfind("precision fp32 (requested with --precision fp32", 0), 0u) << c.line;
  c = cli::choose_precision("bf16", "--precision");
  EXPECT_EQ(c.precision, Precision::Bf16);
  EXPECT_NE(c.line.find("GEMMs"), std::string::npos) << c.line;
  EXPECT_NE(c.line.find(cpu::cpu_features().model), std::string::npos) << c.line;
}

TEST(PrecisionChoice, DefaultFollowsTheCpusBf16Instructions) {
  const cpu::CpuFeatures& f = cpu::cpu_features();
  const cli::PrecisionChoice c = cli::choose_precision("", "--precision");
  EXPECT_EQ(c.precision, f.has_bf16_matmul() ? Precision::Bf16 : Precision::Fp32);
  EXPECT_NE(c.line.find(f.has_bf16_matmul() ? "default: this CPU has bf16"
                                            : "default: this CPU has no bf16"),
            std::string::npos)
      << c.line;
}

TEST(PrecisionChoice, OtherNamesAreRefusedNamingTheFlag) {
  for (const std::string bad : {"fp16", "mixed16", "BF16", "float"}) {
    const std::string e = test::error_of([&] { cli::choose_precision(bad, "--prec"); });
    EXPECT_NE(e.find("--prec"), std::string::npos) << bad << ": " << e;
    EXPECT_NE(e.find("expected fp32 or bf16, got \"" + bad + "\""), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace eth::precision_choice_test
