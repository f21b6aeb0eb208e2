// Token + position embedding, forward and backward, fp32 and bf16 storage (one template each;
// cpu/storage.h), OpenMP over tokens / channel blocks. Gradients are always fp32.
#include "kernels/cpu/encoder.h"

#include <algorithm>

#include "core/error.h"
#include "kernels/cpu/bf16/encoder.h"
#include "kernels/cpu/storage.h"

namespace eth::cpu {
namespace {

void check_tokens(const std::int32_t* tokens, std::int64_t n, std::int64_t V) {
  for (std::int64_t i = 0; i < n; ++i) {
    ETH_CHECK(tokens[i] >= 0 && tokens[i] < V, "encoder: token id out of range");
  }
}

constexpr std::int64_t kChannelBlock = 64;

// A: the output activation, P: the tables (float or Bf16); the sum is fp32, rounded once.
// wpe == nullptr (rotary positions) copies the token rows (exactly: a bf16 row widened and
// rounded back is itself).
template <typename A, typename P>
void forward(A* out, const std::int32_t* tokens, const P* wte, const P* wpe, std::int64_t B,
             std::int64_t T, std::int64_t C, std::int64_t V) {
  check_tokens(tokens, B * T, V);
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < B * T; ++n) {
    const P* e = wte + static_cast<std::int64_t>(tokens[n]) * C;
    A* o = out + n * C;
    if (wpe == nullptr) {
#pragma omp simd
      for (std::int64_t c = 0; c < C; ++c) o[c] = narrow<A>(widen(e[c]));
      continue;
    }
    const P* p = wpe + (n % T) * C;
#pragma omp simd
    for (std::int64_t c = 0; c < C; ++c) o[c] = narrow<A>(widen(e[c]) + widen(p[c]));
  }
}

template <typename A>
void backward(float* dwte, float* dwpe, const A* dout, const std::int32_t* tokens,
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
      const A* d = dout + n * C;
      if (dwpe == nullptr) {  // no position table (rotary positions)
#pragma omp simd
        for (std::int64_t c = c0; c < c1; ++c) we[c] += widen(d[c]);
        continue;
      }
      float* wp = dwpe + (n % T) * C;
#pragma omp simd
      for (std::int64_t c = c0; c < c1; ++c) {
        we[c] += widen(d[c]);
        wp[c] += widen(d[c]);
      }
    }
  }
}

}  // namespace

void encoder_forward(float* out, const std::int32_t* tokens, const float* wte, const float* wpe,
                     std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t V) {
  forward(out, tokens, wte, wpe, B, T, C, V);
}

void encoder_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens,
                      std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t V) {
  backward(dwte, dwpe, dout, tokens, B, T, C, V);
}

void bf16::encoder_forward(Bf16* out, const std::int32_t* tokens, const Bf16* wte,
                           const Bf16* wpe, std::int64_t B, std::int64_t T, std::int64_t C,
                           std::int64_t V) {
  forward(out, tokens, wte, wpe, B, T, C, V);
}

void bf16::encoder_backward(float* dwte, float* dwpe, const Bf16* dout,
                            const std::int32_t* tokens, std::int64_t B, std::int64_t T,
                            std::int64_t C, std::int64_t V) {
  backward(dwte, dwpe, dout, tokens, B, T, C, V);
}

}  // namespace eth::cpu
