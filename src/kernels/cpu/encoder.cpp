// Token + position embedding, forward and backward, OpenMP over tokens / channel blocks.
#include "kernels/cpu/encoder.h"

#include <algorithm>

#include "core/error.h"

namespace eth::cpu {
namespace {

void check_tokens(const std::int32_t* tokens, std::int64_t n, std::int64_t V) {
  for (std::int64_t i = 0; i < n; ++i) {
    ETH_CHECK(tokens[i] >= 0 && tokens[i] < V, "encoder: token id out of range");
  }
}

constexpr std::int64_t kChannelBlock = 64;

}  // namespace

void encoder_forward(float* out, const std::int32_t* tokens, const float* wte, const float* wpe,
                     std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t V) {
  check_tokens(tokens, B * T, V);
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < B * T; ++n) {
    const float* e = wte + static_cast<std::int64_t>(tokens[n]) * C;
    const float* p = wpe + (n % T) * C;
    float* o = out + n * C;
#pragma omp simd
    for (std::int64_t c = 0; c < C; ++c) o[c] = e[c] + p[c];
  }
}

void encoder_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens,
                      std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t V) {
  check_tokens(tokens, B * T, V);
  const std::int64_t blocks = (C + kChannelBlock - 1) / kChannelBlock;
  // Several tokens may share a row of dwte, so rows cannot be split between threads; channel
  // blocks can, and each block sums its tokens in one fixed order.
#pragma omp parallel for schedule(static)
  for (std::int64_t blk = 0; blk < blocks; ++blk) {
    const std::int64_t c0 = blk * kChannelBlock, c1 = std::min(C, c0 + kChannelBlock);
    for (std::int64_t n = 0; n < B * T; ++n) {
      float* we = dwte + static_cast<std::int64_t>(tokens[n]) * C;
      float* wp = dwpe + (n % T) * C;
      const float* d = dout + n * C;
#pragma omp simd
      for (std::int64_t c = c0; c < c1; ++c) {
        we[c] += d[c];
        wp[c] += d[c];
      }
    }
  }
}

}  // namespace eth::cpu
