// The three conversion paths of convert.h. The AVX2 and AVX-512 bodies carry their ISA in
// a target attribute and run only after cpuid said so; this file is compiled for the baseline
// ISA (kernels CMake), so nothing here assumes the build machine's CPU.
#include "kernels/cpu/bf16/convert.h"

#include <immintrin.h>

#include <algorithm>

#include "core/error.h"

namespace eth::cpu::bf16 {
namespace {

// Elements per OpenMP chunk, and the size below which one thread does it all. One thread
// converts about 10 G elements/s (measured on Zen 5), so the GEMM fallback's blocks (at most 1 M
// elements, 0.1 ms) stay serial: on a shared machine a parallel region's barrier waiting for a
// descheduled thread cost 100x that. Whole weight buffers (100 M elements) go parallel.
constexpr std::int64_t kChunk = 65536;
constexpr std::int64_t kParallelMin = std::int64_t{1} << 22;

void to_bf16_scalar(Bf16* out, const float* in, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = bf16_from_float(in[i]);
}

void to_float_scalar(float* out, const Bf16* in, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = float_from_bf16(in[i]);
}

// bf16_from_float on 8 lanes with integer ops (AVX2 has no bf16 conversion), high halves of
// the 32-bit results.
__attribute__((target("avx2"))) __m256i round_8(__m256 x) {
  const __m256i u = _mm256_castps_si256(x);
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
  const __m256i rounded = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), lsb);
  const __m256i abs = _mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF));
  // Signed compare is fine: both sides are below 2^31.
  const __m256i is_nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7F800000));
  const __m256i quiet = _mm256_or_si256(u, _mm256_set1_epi32(0x00400000));
  const __m256i is_sub = _mm256_cmpeq_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7F800000)),
                                            _mm256_setzero_si256());
  const __m256i sign = _mm256_and_si256(u, _mm256_set1_epi32(static_cast<int>(0x80000000u)));
  __m256i r = _mm256_blendv_epi8(rounded, quiet, is_nan);
  r = _mm256_blendv_epi8(r, sign, is_sub);
  return _mm256_srli_epi32(r, 16);
}

__attribute__((target("avx2"))) void to_bf16_avx2(Bf16* out, const float* in, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i lo = round_8(_mm256_loadu_ps(in + i));
    const __m256i hi = round_8(_mm256_loadu_ps(in + i + 8));
    // packus works within 128-bit lanes: [lo0-3 hi0-3 | lo4-7 hi4-7]; put the quarters in order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), packed);
  }
  to_bf16_scalar(out + i, in + i, n - i);
}

__attribute__((target("avx2"))) void to_float_avx2(float* out, const Bf16* in, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    const __m256i w = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
    _mm256_storeu_ps(out + i, _mm256_castsi256_ps(w));
  }
  to_float_scalar(out + i, in + i, n - i);
}

__attribute__((target("avx512f,avx512bf16,avx512vl"))) void to_bf16_avx512(Bf16* out,
                                                                            const float* in,
                                                                            std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256bh r = _mm512_cvtneps_pbh(_mm512_loadu_ps(in + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), reinterpret_cast<const __m256i&>(r));
  }
  to_bf16_scalar(out + i, in + i, n - i);
}

__attribute__((target("avx512f"))) void to_float_avx512(float* out, const Bf16* in,
                                                        std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
    // The maskz forms: GCC 12 flags the plain ones' undefined pass-through as uninitialized.
    const __m512i w = _mm512_maskz_slli_epi32(0xFFFF, _mm512_maskz_cvtepu16_epi32(0xFFFF, h), 16);
    _mm512_storeu_ps(out + i, _mm512_castsi512_ps(w));
  }
  to_float_scalar(out + i, in + i, n - i);
}

template <typename Out, typename In>
using Body = void (*)(Out*, const In*, std::int64_t);

// Runs `body` over [0, n) in chunks, in parallel when n is large.
template <typename Out, typename In>
void chunked(Body<Out, In> body, Out* out, const In* in, std::int64_t n) {
  if (n < kParallelMin) {
    body(out, in, n);
    return;
  }
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::int64_t lo = c * kChunk;
    body(out + lo, in + lo, std::min(kChunk, n - lo));
  }
}

ConvertIsa detected_isa() {
  static const ConvertIsa isa = convert_isa_for(cpu_features());
  return isa;
}

}  // namespace

std::string_view convert_isa_name(ConvertIsa isa) {
  switch (isa) {
    case ConvertIsa::Avx512Bf16:
      return "avx512_bf16";
    case ConvertIsa::Avx2:
      return "avx2";
    case ConvertIsa::Scalar:
      break;
  }
  return "scalar";
}

ConvertIsa convert_isa_for(const CpuFeatures& f) {
  if (f.avx512_bf16 && f.avx512vl) return ConvertIsa::Avx512Bf16;
  if (f.avx2) return ConvertIsa::Avx2;
  return ConvertIsa::Scalar;
}

bool convert_isa_supported(ConvertIsa isa) {
  return static_cast<int>(isa) <= static_cast<int>(detected_isa());
}

void convert_to_bf16(Bf16* out, const float* in, std::int64_t n, ConvertIsa isa) {
  ETH_CHECK(convert_isa_supported(isa), "convert_to_bf16: this CPU cannot run the " +
                                            std::string(convert_isa_name(isa)) + " path");
  const Body<Bf16, float> body = isa == ConvertIsa::Avx512Bf16 ? to_bf16_avx512
                                 : isa == ConvertIsa::Avx2     ? to_bf16_avx2
                                                               : to_bf16_scalar;
  chunked(body, out, in, n);
}

void convert_to_float(float* out, const Bf16* in, std::int64_t n, ConvertIsa isa) {
  ETH_CHECK(convert_isa_supported(isa), "convert_to_float: this CPU cannot run the " +
                                            std::string(convert_isa_name(isa)) + " path");
  const Body<float, Bf16> body = isa == ConvertIsa::Avx512Bf16 ? to_float_avx512
                                 : isa == ConvertIsa::Avx2     ? to_float_avx2
                                                               : to_float_scalar;
  chunked(body, out, in, n);
}

void convert_to_bf16(Bf16* out, const float* in, std::int64_t n) {
  convert_to_bf16(out, in, n, detected_isa());
}

void convert_to_float(float* out, const Bf16* in, std::int64_t n) {
  convert_to_float(out, in, n, detected_isa());
}

}  // namespace eth::cpu::bf16
