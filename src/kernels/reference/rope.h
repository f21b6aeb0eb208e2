// Naive rotary position embedding (RoPE), templated on the scalar so tests run it in double. The
// obviously-correct twin of cpu/rope.h; never used for training.
//
// It rotates, in place, the q and k heads of a qkv tensor laid out as the attention kernels read
// it (reference/attention.h): per token, key/value head g's group is G = NH / NKV query heads,
// then k_g, then v_g, each hd wide; the groups follow one another. With NKV == NH that is GPT's
// head-interleaved [q_h; k_h; v_h] layout. Within a head, Hugging Face's rotate-half pairing:
// element i < hd/2 with i + hd/2, rotated by t w_i, w_i = theta^(-2i/hd), t = n % T.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/error.h"

namespace eth::ref {

namespace detail {

// Rotates every q and k head of the B*T rows by sign * t * w_i.
template <typename Real>
void rope_rotate(Real* qkv, std::int64_t B, std::int64_t T, std::int64_t NH, std::int64_t NKV,
                 std::int64_t hd, float theta, int sign) {
  ETH_CHECK(NKV > 0 && NH % NKV == 0, "rope: NKV must divide NH");
  ETH_CHECK(hd > 0 && hd % 2 == 0, "rope: the head size must be even");
  const std::int64_t G = NH / NKV, half = hd / 2, row = (NH + 2 * NKV) * hd;
  for (std::int64_t n = 0; n < B * T; ++n) {
    const auto t = static_cast<double>(n % T);
    for (std::int64_t g = 0; g < NKV; ++g) {
      for (std::int64_t j = 0; j <= G; ++j) {  // G query heads and k; v (j = G + 1) is not
        Real* x = qkv + n * row + (g * (G + 2) + j) * hd;
        for (std::int64_t i = 0; i < half; ++i) {
          const double w = std::pow(static_cast<double>(theta),
                                    -2.0 * static_cast<double>(i) / static_cast<double>(hd));
          const auto c = static_cast<Real>(std::cos(t * w));
          const auto s = static_cast<Real>(sign * std::sin(t * w));
          const Real a = x[i], b = x[i + half];
          x[i] = a * c - b * s;
          x[i + half] = b * c + a * s;
        }
      }
    }
  }
}

}  // namespace detail

// x'_i = x_i cos(t w_i) - x_{i+hd/2} sin(t w_i), x'_{i+hd/2} = x_{i+hd/2} cos + x_i sin, on the
// q and k heads of each row; the v heads untouched.
//   qkv (B*T, (NH + 2 NKV) hd)
template <typename Real>
void rope_forward(Real* qkv, std::int64_t B, std::int64_t T, std::int64_t NH, std::int64_t NKV,
                  std::int64_t hd, float theta) {
  detail::rope_rotate(qkv, B, T, NH, NKV, hd, theta, +1);
}

// The adjoint (and inverse) of rope_forward: the rotation by -t w_i, in place on the q and k
// parts of dqkv; the v part untouched.
//   dqkv (B*T, (NH + 2 NKV) hd)
template <typename Real>
void rope_backward(Real* dqkv, std::int64_t B, std::int64_t T, std::int64_t NH, std::int64_t NKV,
                   std::int64_t hd, float theta) {
  detail::rope_rotate(dqkv, B, T, NH, NKV, hd, theta, -1);
}

}  // namespace eth::ref
