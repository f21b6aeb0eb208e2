// One GEMM path per test instance for the bf16 GEMM-based kernel tests: the fixture sets the
// process-wide path and restores it afterwards, and skips with the reason where the path is
// not available on this CPU. Test-only.
#pragma once

#include <gtest/gtest.h>

#include <ostream>
#include <string>

#include "kernels/cpu/bf16/gemm.h"

namespace eth::cpu::bf16 {
// gtest prints a failing test's parameter with this (found by argument-dependent lookup).
inline void PrintTo(GemmPath p, std::ostream* os) { *os << gemm_path_name(p); }
}  // namespace eth::cpu::bf16

namespace eth::test {

class GemmPathTest : public ::testing::TestWithParam<cpu::bf16::GemmPath> {
 protected:
  void SetUp() override {
    if (!cpu::bf16::gemm_path_available(GetParam())) {
      GTEST_SKIP() << cpu::bf16::gemm_path_name(GetParam()) << " is not available here";
    }
    saved_ = cpu::bf16::gemm_path();
    cpu::bf16::set_gemm_path(GetParam());
  }
  void TearDown() override {
    if (cpu::bf16::gemm_path_available(GetParam())) cpu::bf16::set_gemm_path(saved_);
  }

 private:
  cpu::bf16::GemmPath saved_ = cpu::bf16::GemmPath::Fp32Compute;
};

// Both paths, whichever the CPU picks by default.
inline auto all_gemm_paths() {
  return ::testing::Values(cpu::bf16::GemmPath::OneDnn, cpu::bf16::GemmPath::Fp32Compute);
}

inline std::string gemm_path_test_name(
    const ::testing::TestParamInfo<cpu::bf16::GemmPath>& p) {
  return p.param == cpu::bf16::GemmPath::OneDnn ? "OneDnn" : "Fp32Compute";
}

}  // namespace eth::test
