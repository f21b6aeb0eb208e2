// The optimizer's element-wise passes over flat fp32 buffers: AdamW's update and the sum of
// squares behind the global gradient norm. Here (not in train/) so they are compiled like the
// other kernels (-march=native, vectorized sqrt without errno checks). Every element is a pure
// function of its own inputs, and the sum of squares adds fixed blocks in a fixed order, so
// results do not depend on the thread count.
#pragma once

#include <cstdint>

namespace eth::cpu {

struct AdamWScalars {
  float lr = 0;          // learning rate of this step
  float beta1 = 0, beta2 = 0, eps = 0;
  float decay = 0;       // lr * weight decay, or 0 for tensors without decay
  float bias_corr1 = 1;  // 1 - beta1^t
  float bias_corr2 = 1;  // 1 - beta2^t
  float grad_scale = 1;  // g = grad_scale * grads (clipping)
};

// m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2,
// p -= lr * (m / bc1) / (sqrt(v / bc2) + eps) + decay * p.
//   p, m, v (n) updated in place, grads (n)
void adamw_update(float* p, float* m, float* v, const float* grads, std::int64_t n,
                  const AdamWScalars& s);

// Sum of x[i]^2 in double, in blocks of 4096 elements from the start of the span, blocks added
// in order.
//   x (n)
double sum_squares(const float* x, std::int64_t n);

}  // namespace eth::cpu
