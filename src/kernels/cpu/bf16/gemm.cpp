// Path selection and the fp32-compute path of gemm.h. The fp32-compute path converts
// panels of op(A) (up to kPanel elements, at least 64 rows) and op(B) into per-thread fp32
// buffers and calls sgemm on them; a bf16 result goes through an fp32 tile and is rounded once.
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

// Elements of one converted panel (8 MiB of fp32): with at least 64 rows per panel, each element
// of an operand is converted once per panel of the other, about 1/128 conversion per flop of a
// K-long product, a few percent of its time; and the scratch stays bounded (the LM head's weight
// would be 154 MB of fp32 in one piece).
constexpr std::int64_t kPanel = std::int64_t{1} << 21;
constexpr std::int64_t kMinPanelRows = 64;

struct Panels {
  std::vector<float> a, b, c;
};

Panels& thread_panels() {
  thread_local Panels p;
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

void detail::fp32_compute_gemm(const GemmCall& c, std::int64_t panel_elements,
                               std::int64_t min_panel_rows) {
  Panels& p = thread_panels();
  const bool ta = c.trans_a == Trans::Yes, tb = c.trans_b == Trans::Yes;
  const auto panel_rows = [&](std::int64_t rows) {
    return std::min(rows, std::max(min_panel_rows, panel_elements / std::max<std::int64_t>(c.K, 1)));
  };
  const std::int64_t mb = panel_rows(c.M), nb = panel_rows(c.N);
  for (std::int64_t i0 = 0; i0 < c.M; i0 += mb) {
    const std::int64_t im = std::min(mb, c.M - i0);
    // The stored block of op(A)'s rows [i0, i0+im), in the same orientation as stored.
    float* a = grow(p.a, im * c.K);
    if (ta) {
      unpack(a, c.A + i0, c.K, im, c.lda);
    } else {
      unpack(a, c.A + i0 * c.lda, im, c.K, c.lda);
    }
    const std::int64_t lda = ta ? im : c.K;
    for (std::int64_t j0 = 0; j0 < c.N; j0 += nb) {
      const std::int64_t jn = std::min(nb, c.N - j0);
      float* b = grow(p.b, jn * c.K);
      // With one column block, op(B) is the same panel for every row block: convert it once.
      if (i0 == 0 || nb < c.N) {
        if (tb) {
          unpack(b, c.B + j0 * c.ldb, jn, c.K, c.ldb);
        } else {
          unpack(b, c.B + j0, c.K, jn, c.ldb);
        }
      }
      const std::int64_t ldb = tb ? c.K : jn;
      if (c.C32 != nullptr) {
        sgemm(c.trans_a, c.trans_b, im, jn, c.K, c.alpha, a, lda, b, ldb, c.beta,
              c.C32 + i0 * c.ldc + j0, c.ldc);
        continue;
      }
      float* tile = grow(p.c, im * jn);
      if (c.bias != nullptr) {
        convert_to_float(tile, c.bias + j0, jn);
        for (std::int64_t r = 1; r < im; ++r) std::copy(tile, tile + jn, tile + r * jn);
      }
      sgemm(c.trans_a, c.trans_b, im, jn, c.K, c.alpha, a, lda, b, ldb,
            c.bias != nullptr ? 1.0f : 0.0f, tile, jn);
      Bf16* out = c.C16 + i0 * c.ldc + j0;
      if (c.ldc == jn) {
        convert_to_bf16(out, tile, im * jn);
      } else {
        for (std::int64_t r = 0; r < im; ++r) convert_to_bf16(out + r * c.ldc, tile + r * jn, jn);
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
    detail::fp32_compute_gemm(c, kPanel, kMinPanelRows);
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
