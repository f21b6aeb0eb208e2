// SwiGLU forward and backward, fp32 and bf16 storage (one template each; cpu/storage.h), with
// the vectorizable sigmoid of vec_math.h (relative error about one float ulp).
#include "kernels/cpu/swiglu.h"

#include "kernels/cpu/bf16/swiglu.h"
#include "kernels/cpu/storage.h"
#include "kernels/cpu/vec_math.h"

namespace eth::cpu {
namespace {

template <typename A>
void fwd(A* out, const A* gate, const A* up, std::int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    const float x = widen(gate[i]);
    out[i] = narrow<A>(x * sigmoid_approx(x) * widen(up[i]));
  }
}

template <typename A>
void bwd(A* dgate, A* dup, const A* dout, const A* gate, const A* up, std::int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    const float x = widen(gate[i]), u = widen(up[i]), dy = widen(dout[i]);
    const float s = sigmoid_approx(x);
    // silu'(x) = s + x s (1 - s)
    const float dg = dy * u * (s * (1.0f + x * (1.0f - s)));
    const float du = dy * (x * s);
    dgate[i] = narrow<A>(dg);
    dup[i] = narrow<A>(du);
  }
}

}  // namespace

void swiglu_forward(float* out, const float* gate, const float* up, std::int64_t N,
                    std::int64_t F) {
  fwd(out, gate, up, N * F);
}

void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate,
                     const float* up, std::int64_t N, std::int64_t F) {
  bwd(dgate, dup, dout, gate, up, N * F);
}

void bf16::swiglu_forward(Bf16* out, const Bf16* gate, const Bf16* up, std::int64_t N,
                          std::int64_t F) {
  fwd(out, gate, up, N * F);
}

void bf16::swiglu_backward(Bf16* dgate, Bf16* dup, const Bf16* dout, const Bf16* gate,
                           const Bf16* up, std::int64_t N, std::int64_t F) {
  bwd(dgate, dup, dout, gate, up, N * F);
}

}  // namespace eth::cpu
