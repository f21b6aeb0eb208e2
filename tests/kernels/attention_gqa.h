// Grouped-query attention through the multi-head reference (an independent check of the kv
// grouping): a grouped qkv (cuda/launch.h QkvGroups) with its kv heads replicated, one copy per
// query head, is a multi-head qkv whose attention is the grouped one; the grouped dK and dV are
// the sums of the copies' gradients.
#pragma once

#include <cstddef>
#include <cstdint>

#include "bf16_check.h"
#include "kernels/cuda/launch.h"

namespace eth::test {

// The multi-head qkv (B,T,3C), head-interleaved, whose head h holds query head h of the grouped
// qkv and a copy of its kv head h / (NH / NKV).
inline Vec replicate_kv(const Vec& gqa, std::int64_t N, std::int64_t C, std::int64_t NH,
                 std::int64_t NKV) {
  const std::int64_t hs = C / NH, W = C + 2 * NKV * hs;
  const cuda::launch::QkvGroups L{hs, NH / NKV};
  Vec mha(static_cast<std::size_t>(N * 3 * C));
  for (std::int64_t n = 0; n < N; ++n) {
    for (std::int64_t h = 0; h < NH; ++h) {
      const std::int64_t kv = h / L.G;
      for (std::int64_t d = 0; d < hs; ++d) {
        double* dst = mha.data() + n * 3 * C + h * 3 * hs + d;
        const double* src = gqa.data() + n * W + d;
        dst[0] = src[L.q_col(h)];
        dst[hs] = src[L.k_col(kv)];
        dst[2 * hs] = src[L.v_col(kv)];
      }
    }
  }
  return mha;
}

// The grouped dqkv from the multi-head one: dQ per head, dK and dV summed over each group.
inline Vec fold_kv_grads(const Vec& mha, std::int64_t N, std::int64_t C, std::int64_t NH,
                  std::int64_t NKV) {
  const std::int64_t hs = C / NH, W = C + 2 * NKV * hs;
  const cuda::launch::QkvGroups L{hs, NH / NKV};
  Vec gqa(static_cast<std::size_t>(N * W), 0.0);
  for (std::int64_t n = 0; n < N; ++n) {
    for (std::int64_t h = 0; h < NH; ++h) {
      const std::int64_t kv = h / L.G;
      for (std::int64_t d = 0; d < hs; ++d) {
        const double* src = mha.data() + n * 3 * C + h * 3 * hs + d;
        double* dst = gqa.data() + n * W + d;
        dst[L.q_col(h)] = src[0];
        dst[L.k_col(kv)] += src[hs];
        dst[L.v_col(kv)] += src[2 * hs];
      }
    }
  }
  return gqa;
}

}  // namespace eth::test
