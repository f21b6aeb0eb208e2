// Naive token + position embedding, templated on the scalar so tests run it in double. The
// obviously-correct twin of cpu/encoder.h; never used for training.
#pragma once

#include <cstdint>

#include "core/error.h"

namespace eth::ref {

// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]; wpe == nullptr (rotary positions: no position
// table) adds nothing.
//   out (B,T,C), tokens (B,T) in [0,V), wte (V,C), wpe (>=T,C) or null
template <typename Real>
void encoder_forward(Real* out, const std::int32_t* tokens, const Real* wte, const Real* wpe,
                     std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t V) {
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t t = 0; t < T; ++t) {
      const std::int64_t tok = tokens[b * T + t];
      ETH_CHECK(tok >= 0 && tok < V, "encoder: token id out of range");
      for (std::int64_t c = 0; c < C; ++c) {
        out[(b * T + t) * C + c] = wte[tok * C + c] + (wpe ? wpe[t * C + c] : Real(0));
      }
    }
  }
}

// dwte[tokens[b,t],:] += dout[b,t,:], dwpe[t,:] += dout[b,t,:]  (parameter gradients: +=);
// dwpe == nullptr (no position table) is skipped.
//   dwte (V,C), dwpe (>=T,C) or null, dout (B,T,C), tokens (B,T)
template <typename Real>
void encoder_backward(Real* dwte, Real* dwpe, const Real* dout, const std::int32_t* tokens,
                      std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t V) {
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t t = 0; t < T; ++t) {
      const std::int64_t tok = tokens[b * T + t];
      ETH_CHECK(tok >= 0 && tok < V, "encoder: token id out of range");
      for (std::int64_t c = 0; c < C; ++c) {
        dwte[tok * C + c] += dout[(b * T + t) * C + c];
        if (dwpe) dwpe[t * C + c] += dout[(b * T + t) * C + c];
      }
    }
  }
}

}  // namespace eth::ref
