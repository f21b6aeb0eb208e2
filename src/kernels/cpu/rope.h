// Fast fp32 rotary position embedding (OpenMP over positions). Same contract and qkv layout as
// reference/rope.h: per key/value head g, its G = NH / NKV query heads, then k_g, then v_g; the
// q and k heads are rotated in place, the v heads untouched. The angles t w_i are formed in
// double and their cos and sin rounded to float once, so the only float error is the rotation's.
#pragma once

#include <cstdint>

namespace eth::cpu {

// Rotates the q and k heads of each row by t w_i, w_i = theta^(-2i/hd), t = row % T.
//   qkv (B*T, (NH + 2 NKV) hd)
void rope_forward(float* qkv, std::int64_t B, std::int64_t T, std::int64_t NH, std::int64_t NKV,
                  std::int64_t hd, float theta);

// The adjoint: the rotation by -t w_i, in place on the q and k parts of dqkv.
//   dqkv (B*T, (NH + 2 NKV) hd)
void rope_backward(float* dqkv, std::int64_t B, std::int64_t T, std::int64_t NH, std::int64_t NKV,
                   std::int64_t hd, float theta);

}  // namespace eth::cpu
