// The mixed-precision AdamW step: fp32 gradients, fp32 master weights and moments, and in the
// same pass the bf16 compute copy of the updated weights that the next forward reads. The
// master update is bit for bit cpu::adamw_update's (one template, cpu/optimizer.cpp); the copy
// is bf16_from_float of the new master value. The gradient norm needs no bf16 variant:
// gradients are fp32 (cpu::sum_squares).
#pragma once

#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/cpu/optimizer.h"

namespace eth::cpu::bf16 {

// m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2,
// p -= lr * (m / bc1) / (sqrt(v / bc2) + eps) + decay * p, p_bf16 = round(p).
//   p, m, v (n) fp32 updated in place, p_bf16 (n) written, grads (n) fp32
void adamw_update(float* p, Bf16* p_bf16, float* m, float* v, const float* grads, std::int64_t n,
                  const AdamWScalars& s);

}  // namespace eth::cpu::bf16
