// Path selection and the fp32-compute path of gemm.h. The fp32-compute path cuts the product
// into blocks of at most kBlock rows, columns and depth, converts each block of op(A) and op(B)
// into per-thread fp32 buffers and calls sgemm on them, adding the depth blocks onto C (or onto
// an fp32 tile that a bf16 result is rounded from once).
// Both paths accumulate the same fp32 products of the same bf16 values; they differ only in
// summation order.
#include "kernels/cpu/bf16/gemm.h"

#include <algorithm>
#include <atomic>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/bf16/convert.h"
#include "kernels/cpu/bf16/gemm_detail.h"

namespace eth::cpu::bf16 {
namespace {

// Rows, columns and depth of one block: a 1024^3 sgemm (2 GFLOP) runs at full speed, each
// element of op(A) is converted once per column block of C and each of op(B) once per row block
// (one conversion per 1024 flops of a large product, about 1% of its time), and the scratch
// stays at 3 x 4 MiB per thread (the LM head's weight would be 154 MB of fp32 in one piece).
constexpr std::int64_t kBlock = 1024;

struct Blocks {
  std::vector<float> a, b, c;
};

Blocks& thread_blocks() {
  thread_local Blocks p;
  return p;
}

float* grow(std::vector<float>& v, std::int64_t n) {
  if (static_cast<std::int64_t>(v.size()) < n) v.resize(static_cast<std::size_t>(n));
  return v.data();
}

// dst (rows, cols) packed <- the rows x cols block at src with leading dimension ld.
void unpack(float* dst, const Bf16* src, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
  if (ld == cols) {
    convert_to_float(dst, src, rows * cols);
    return;
  }
  for (std::int64_t r = 0; r < rows; ++r) convert_to_float(dst + r * cols, src + r * ld, cols);
}

}  // namespace

void detail::fp32_compute_gemm(const GemmCall& c, std::int64_t block) {
  Blocks& p = thread_blocks();
  const bool ta = c.trans_a == Trans::Yes, tb = c.trans_b == Trans::Yes;
  const std::int64_t mb = std::min(c.M, block), nb = std::min(c.N, block);
  const std::int64_t kb = std::max<std::int64_t>(1, std::min(c.K, block));
  for (std::int64_t j0 = 0; j0 < c.N; j0 += nb) {
    const std::int64_t jn = std::min(nb, c.N - j0);
    for (std::int64_t i0 = 0; i0 < c.M; i0 += mb) {
      const std::int64_t im = std::min(mb, c.M - i0);
      // The (im, jn) block of C: in place for an fp32 C, else an fp32 tile (holding the bias
      // when there is one) rounded once at the end.
      float* dst = c.C32 != nullptr ? c.C32 + i0 * c.ldc + j0 : grow(p.c, im * jn);
      const std::int64_t ldd = c.C32 != nullptr ? c.ldc : jn;
      float beta = c.beta;
      if (c.C32 == nullptr) {
        beta = c.bias != nullptr ? 1.0f : 0.0f;
        if (c.bias != nullptr) {
          convert_to_float(dst, c.bias + j0, jn);
          for (std::int64_t r = 1; r < im; ++r) std::copy(dst, dst + jn, dst + r * jn);
        }
      }
      // K in blocks, the first with the caller's beta, the rest adding on (k0 = 0 runs once
      // even for K = 0, so C still becomes beta C).
      for (std::int64_t k0 = 0; k0 == 0 || k0 < c.K; k0 += kb) {
        const std::int64_t kn = std::min(kb, c.K - k0);
        // The stored blocks of op(A) (rows i0.., columns k0..) and op(B) (rows k0.., columns
        // j0..), packed in the orientation they are stored in.
        float* a = grow(p.a, im * kn);
        float* b = grow(p.b, kn * jn);
        if (ta) {
          unpack(a, c.A + k0 * c.lda + i0, kn, im, c.lda);
        } else {
          unpack(a, c.A + i0 * c.lda + k0, im, kn, c.lda);
        }
        if (tb) {
          unpack(b, c.B + j0 * c.ldb + k0, jn, kn, c.ldb);
        } else {
          unpack(b, c.B + k0 * c.ldb + j0, kn, jn, c.ldb);
        }
        sgemm(c.trans_a, c.trans_b, im, jn, kn, c.alpha, a, ta ? im : kn, b, tb ? kn : jn,
              k0 == 0 ? beta : 1.0f, dst, ldd);
      }
      if (c.C16 != nullptr) {
        Bf16* out = c.C16 + i0 * c.ldc + j0;
        if (c.ldc == jn) {
          convert_to_bf16(out, dst, im * jn);
        } else {
          for (std::int64_t r = 0; r < im; ++r) convert_to_bf16(out + r * c.ldc, dst + r * jn, jn);
        }
      }
    }
  }
}

namespace {

GemmPath default_path() {
  const GemmPath p = gemm_path_for(cpu_features());
  return gemm_path_available(p) ? p : GemmPath::Fp32Compute;
}

// -1 until first use, then the GemmPath value.
std::atomic<int> g_path{-1};

void run(const detail::GemmCall& c) {
  if (c.M == 0 || c.N == 0) return;
  if (gemm_path() == GemmPath::OneDnn) {
    detail::onednn_bf16_gemm(c);
  } else {
    detail::fp32_compute_gemm(c, kBlock);
  }
}

}  // namespace

std::string_view gemm_path_name(GemmPath path) {
  return path == GemmPath::OneDnn ? "onednn-bf16" : "fp32-compute";
}

GemmPath gemm_path_for(const CpuFeatures& f) {
  return f.has_bf16_matmul() ? GemmPath::OneDnn : GemmPath::Fp32Compute;
}

bool gemm_path_available(GemmPath path) {
  return path == GemmPath::Fp32Compute || detail::onednn_bf16_available();
}

GemmPath gemm_path() {
  int p = g_path.load(std::memory_order_relaxed);
  if (p < 0) {
    p = static_cast<int>(default_path());
    g_path.store(p, std::memory_order_relaxed);
  }
  return static_cast<GemmPath>(p);
}

void set_gemm_path(GemmPath path) {
  ETH_CHECK(gemm_path_available(path), "set_gemm_path: " +
                                                std::string(gemm_path_name(path)) +
                                                " is not available on this CPU or build");
  g_path.store(static_cast<int>(path), std::memory_order_relaxed);
}

void gemm(Trans trans_a, Trans trans_b, std::int64_t M, std::int64_t N, std::int64_t K,
               float alpha, const Bf16* A, std::int64_t lda, const Bf16* B, std::int64_t ldb,
               float beta, float* C, std::int64_t ldc) {
  ETH_CHECK(beta == 0.0f || beta == 1.0f, "bf16::gemm: beta must be 0 or 1");
  detail::GemmCall c;
  c.trans_a = trans_a, c.trans_b = trans_b, c.M = M, c.N = N, c.K = K, c.alpha = alpha;
  c.A = A, c.lda = lda, c.B = B, c.ldb = ldb, c.beta = beta, c.C32 = C, c.ldc = ldc;
  run(c);
}

void gemm(Trans trans_a, Trans trans_b, std::int64_t M, std::int64_t N, std::int64_t K,
               float alpha, const Bf16* A, std::int64_t lda, const Bf16* B, std::int64_t ldb,
               const Bf16* bias, Bf16* C, std::int64_t ldc) {
  ETH_CHECK(bias == nullptr || alpha == 1.0f, "bf16::gemm: alpha must be 1 with a bias");
  detail::GemmCall c;
  c.trans_a = trans_a, c.trans_b = trans_b, c.M = M, c.N = N, c.K = K, c.alpha = alpha;
  c.A = A, c.lda = lda, c.B = B, c.ldb = ldb, c.bias = bias, c.C16 = C, c.ldc = ldc;
  run(c);
}

}  // namespace eth::cpu::bf16
