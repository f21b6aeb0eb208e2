// bf16 rotary position embedding: each pair widened to fp32, rotated by the float cos and sin
// of the double angle (as cpu/rope.h), rounded once when stored. Same contract and layout as
// cpu/rope.h; defined in cpu/rope.cpp as the same template as the fp32 kernel (cpu/storage.h).
#pragma once

#include <cstdint>

#include "kernels/bf16.h"

namespace eth::cpu::bf16 {

//   qkv (B*T, (NH + 2 NKV) hd)
void rope_forward(Bf16* qkv, std::int64_t B, std::int64_t T, std::int64_t NH, std::int64_t NKV,
                  std::int64_t hd, float theta);

//   dqkv (B*T, (NH + 2 NKV) hd)
void rope_backward(Bf16* dqkv, std::int64_t B, std::int64_t T, std::int64_t NH, std::int64_t NKV,
                   std::int64_t hd, float theta);

}  // namespace eth::cpu::bf16
