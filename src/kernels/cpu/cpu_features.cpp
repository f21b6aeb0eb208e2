// cpuid / xgetbv feature detection. Compiled for the baseline x86-64 ISA (kernels CMake), never
// -march=native: it runs before anything has checked that the CPU matches the build.
#include "kernels/cpu/cpu_features.h"

#include <cpuid.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/build_isa.h"

namespace eth::cpu {
namespace {

struct Regs {
  std::uint32_t a = 0, b = 0, c = 0, d = 0;
};

Regs cpuid(std::uint32_t leaf, std::uint32_t sub) {
  Regs r;
  if (!__get_cpuid_count(leaf, sub, &r.a, &r.b, &r.c, &r.d)) return Regs{};
  return r;
}

bool bit(std::uint32_t reg, int i) { return ((reg >> i) & 1u) != 0; }

// XCR0: which register states the OS saves on a context switch (AVX needs SSE+AVX, AVX-512
// needs opmask + both ZMM halves). Only valid when cpuid says OSXSAVE.
std::uint64_t xcr0() {
  std::uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<std::uint64_t>(hi) << 32) | lo;
}

std::string brand_string() {
  if (cpuid(0x80000000u, 0).a < 0x80000004u) return "unknown x86-64";
  char s[49] = {};
  for (std::uint32_t i = 0; i < 3; ++i) {
    const Regs r = cpuid(0x80000002u + i, 0);
    std::memcpy(s + 16 * i, &r, 16);
  }
  std::string out(s);
  const auto first = out.find_first_not_of(' ');
  const auto last = out.find_last_not_of(' ');
  return first == std::string::npos ? "unknown x86-64" : out.substr(first, last - first + 1);
}

}  // namespace

CpuFeatures detect_cpu_features() {
  CpuFeatures f;
  f.model = brand_string();
  const std::uint32_t max_leaf = cpuid(0, 0).a;
  const Regs l1 = cpuid(1, 0);
  if (!bit(l1.c, 27)) return f;  // no OSXSAVE: the OS saves no AVX state, nothing below is usable
  const std::uint64_t x = xcr0();
  const bool os_avx = (x & 0x6u) == 0x6u;      // SSE and AVX state
  const bool os_avx512 = (x & 0xE0u) == 0xE0u;  // opmask, ZMM0-15 upper halves, ZMM16-31
  const bool os_amx = (x & 0x60000u) == 0x60000u;  // tile config and tile data
  const bool avx = os_avx && bit(l1.c, 28);
  f.fma = avx && bit(l1.c, 12);
  if (max_leaf < 7) return f;
  const Regs l7 = cpuid(7, 0);
  f.avx2 = avx && bit(l7.b, 5);
  f.avx512f = os_avx512 && bit(l7.b, 16);
  f.avx512dq = f.avx512f && bit(l7.b, 17);
  f.avx512bw = f.avx512f && bit(l7.b, 30);
  f.avx512vl = f.avx512f && bit(l7.b, 31);
  f.amx_bf16 = os_amx && bit(l7.d, 22);
  if (l7.a >= 1) f.avx512_bf16 = f.avx512f && bit(cpuid(7, 1).a, 5);
  return f;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect_cpu_features();
  return f;
}

std::string CpuFeatures::extensions() const {
  std::string s;
  const std::pair<bool, const char*> all[] = {
      {avx2, "avx2"},         {fma, "fma"},           {avx512f, "avx512f"},
      {avx512dq, "avx512dq"}, {avx512bw, "avx512bw"}, {avx512vl, "avx512vl"},
      {avx512_bf16, "avx512_bf16"}, {amx_bf16, "amx_bf16"}};
  for (const auto& [has, name] : all) {
    if (!has) continue;
    if (!s.empty()) s += ' ';
    s += name;
  }
  return s.empty() ? "none beyond x86-64" : s;
}

Precision default_precision(const CpuFeatures& f) {
  return f.has_bf16_matmul() ? Precision::Bf16 : Precision::Fp32;
}

std::vector<std::string> missing_build_extensions(const CpuFeatures& f) {
  using namespace detail;
  const std::uint32_t built = build_isa_bits();
  const std::pair<std::uint32_t, std::pair<bool, const char*>> all[] = {
      {kIsaAvx2, {f.avx2, "avx2"}},
      {kIsaFma, {f.fma, "fma"}},
      {kIsaAvx512f, {f.avx512f, "avx512f"}},
      {kIsaAvx512dq, {f.avx512dq, "avx512dq"}},
      {kIsaAvx512bw, {f.avx512bw, "avx512bw"}},
      {kIsaAvx512vl, {f.avx512vl, "avx512vl"}},
      {kIsaAvx512Bf16, {f.avx512_bf16, "avx512_bf16"}}};
  std::vector<std::string> missing;
  for (const auto& [isa_bit, has_name] : all) {
    if ((built & isa_bit) != 0 && !has_name.first) missing.emplace_back(has_name.second);
  }
  return missing;
}

}  // namespace eth::cpu
