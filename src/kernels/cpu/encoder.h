// Fast fp32 token + position embedding (OpenMP). Same contract as reference/encoder.h.
#pragma once

#include <cstdint>

namespace eth::cpu {

// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]. Token ids are checked (ETH_CHECK) before use.
//   out (B,T,C), tokens (B,T) in [0,V), wte (V,C), wpe (>=T,C) or null (no
//   position table: nothing added)
void encoder_forward(float* out, const std::int32_t* tokens, const float* wte, const float* wpe,
                     std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t V);

// dwte[tokens[b,t],:] += dout[b,t,:]; dwpe[t,:] += dout[b,t,:] (parameter gradients: +=).
// Each thread owns a block of channels and visits tokens in order: thread-count independent.
//   dwte (V,C), dwpe (>=T,C) or null, dout (B,T,C), tokens (B,T)
void encoder_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens,
                      std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t V);

}  // namespace eth::cpu
