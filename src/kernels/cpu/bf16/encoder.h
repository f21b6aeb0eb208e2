// bf16 token + position embedding: bf16 tables (the compute copy) and output, fp32 gradients.
// Same contract as cpu/encoder.h; defined in cpu/encoder.cpp as the same templates as the fp32
// kernels (cpu/storage.h).
#pragma once

#include <cstdint>

#include "kernels/bf16.h"

namespace eth::cpu::bf16 {

// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:], summed in fp32 and rounded once. Token ids are
// checked (ETH_CHECK) before use.
//   out (B,T,C), tokens (B,T) in [0,V), wte (V,C), wpe (>=T,C) or null (no
//   position table: nothing added)
void encoder_forward(Bf16* out, const std::int32_t* tokens, const Bf16* wte, const Bf16* wpe,
                     std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t V);

// dwte[tokens[b,t],:] += dout[b,t,:]; dwpe[t,:] += dout[b,t,:] (fp32 parameter gradients: +=).
// Each thread owns a block of channels and visits tokens in order: thread-count independent.
//   dwte (V,C) fp32, dwpe (>=T,C) or null fp32, dout (B,T,C), tokens (B,T)
void encoder_backward(float* dwte, float* dwpe, const Bf16* dout, const std::int32_t* tokens,
                      std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t V);

}  // namespace eth::cpu::bf16
