// bf16 token + position embedding, forward and backward, OpenMP over tokens / channel blocks as
// in cpu/encoder.cpp.
#include "kernels/cpu/bf16/encoder.h"

#include <algorithm>

#include "core/error.h"

namespace eth::cpu::bf16 {
namespace {

constexpr std::int64_t kChannelBlock = 64;

void check_tokens(const std::int32_t* tokens, std::int64_t n, std::int64_t V) {
  for (std::int64_t i = 0; i < n; ++i) {
    ETH_CHECK(tokens[i] >= 0 && tokens[i] < V, "encoder: token id out of range");
  }
}

}  // namespace

void encoder_forward(Bf16* out, const std::int32_t* tokens, const Bf16* wte, const Bf16* wpe,
                     std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t V) {
  check_tokens(tokens, B * T, V);
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < B * T; ++n) {
    const Bf16* e = wte + static_cast<std::int64_t>(tokens[n]) * C;
    const Bf16* p = wpe + (n % T) * C;
    Bf16* o = out + n * C;
#pragma omp simd
    for (std::int64_t c = 0; c < C; ++c) {
      o[c] = bf16_from_float(float_from_bf16(e[c]) + float_from_bf16(p[c]));
    }
  }
}

void encoder_backward(float* dwte, float* dwpe, const Bf16* dout, const std::int32_t* tokens,
                      std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t V) {
  check_tokens(tokens, B * T, V);
  const std::int64_t blocks = (C + kChannelBlock - 1) / kChannelBlock;
  // Rows of dwte may be shared by several tokens: threads own channel blocks, not rows.
#pragma omp parallel for schedule(static)
  for (std::int64_t blk = 0; blk < blocks; ++blk) {
    const std::int64_t c0 = blk * kChannelBlock, c1 = std::min(C, c0 + kChannelBlock);
    for (std::int64_t n = 0; n < B * T; ++n) {
      float* we = dwte + static_cast<std::int64_t>(tokens[n]) * C;
      float* wp = dwpe + (n % T) * C;
      const Bf16* d = dout + n * C;
#pragma omp simd
      for (std::int64_t c = c0; c < c1; ++c) {
        const float g = float_from_bf16(d[c]);
        we[c] += g;
        wp[c] += g;
      }
    }
  }
}

}  // namespace eth::cpu::bf16
