// The emulated device's fused causal attention (kernels.h): cuda::attention_forward/backward's
// contract on the CPU (grouped-query: NKV kv heads, qkv grouped as cuda/launch.h's QkvGroups),
// memory-efficient the same way. Nothing of size T x T exists, not even per head:
//   forward:  each query row walks its keys in blocks of kKeyBlock with a running max and sum
//             (online softmax), rescaling its fp32 accumulator when the max grows;
//             out = P_dropped V / sum, lse = max + log(sum) saved;
//   backward: each query row recomputes its P = exp(s - lse) and dP = z (dout . v) into rows of
//             length T, forms dsum = sum_j P dP in fp32, then adds its share of dQ (its own),
//             dK and dV (its kv head's, accumulated in fp32 over the group's query heads in
//             head order and rounded once at the end).
// OpenMP over (batch, head) forward and (batch, kv head) backward: a thread owns every output
// of its (b, h) or its (b, kv) group, so results do not depend on the thread count. Dropout
// draws the keep bit of element (head0 + h) T T + t T + t2 of sample sample0 + b from
// philox.h, four elements per Philox block, like rng.cpp's masks.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/vec_math.h"
#include "kernels/cuda/attention_args.h"
#include "kernels/cuda/launch.h"
#include "kernels/emulated/check.h"
#include "kernels/emulated/kernels.h"
#include "kernels/emulated/runtime.h"
#include "kernels/philox.h"

namespace eth::emu {
namespace {

using cpu::exp_approx;

constexpr std::int64_t kKeyBlock = 64;
constexpr std::int64_t kMaxHead = cuda::launch::kAttnMaxHead;

using Geometry = cuda::launch::AttnGeometry;
using Drop = cuda::launch::AttnDrop;

Geometry geometry(const char* fn, std::int64_t T, std::int64_t C, std::int64_t NH,
                  std::int64_t NKV) {
  if (NH <= 0 || C % NH != 0 || C / NH < 1 || C / NH > kMaxHead) {
    throw EmuError(std::string("[emulated] ") + fn +
                   ": head size C/NH must divide C and be at most 128");
  }
  if (NKV <= 0 || NH % NKV != 0) {
    throw EmuError(std::string("[emulated] ") + fn +
                   ": the kv heads NKV must divide the query heads NH");
  }
  return cuda::launch::attn_geometry(T, C, NH, NKV);
}

Drop drop_args(const char* fn, const AttnDropout& d) {
  detail::dropout_p(fn, d.p);
  return cuda::launch::attn_drop(d);
}

// z[jj] = 1/(1-p) if element (b, h, i, j0 + jj) is kept, else 0, for jj in [0, n); 1 without
// dropout.
void drop_keys(float* z, const Drop& d, const Geometry& g, std::int64_t b, std::int64_t h,
               std::int64_t i, std::int64_t j0, std::int64_t n) {
  if (d.keep_scale == 0.0f) {
    std::fill(z, z + n, 1.0f);
    return;
  }
  const std::int64_t base = (d.head0 + h) * g.T * g.T + i * g.T + j0;
  const std::uint32_t k0 = philox::key0(d.seed), k1 = philox::key1(d.seed);
  for (std::int64_t jj = 0; jj < n;) {
    const std::int64_t e = base + jj;
    const philox::Block w =
        philox::rounds10(philox::counter(d.step, d.unit, d.op, d.sample0 + b, e >> 2), k0, k1);
    for (std::int64_t lane = e & 3; lane < 4 && jj < n; ++lane, ++jj) {
      z[jj] = philox::dropout_keep(w.w[lane], d.threshold) ? d.keep_scale : 0.0f;
    }
  }
}

// Rows [0, T) of sample b's columns [col, col + hs) of qkv, widened: dst (T, hs).
void load_part(float* dst, const Bf16* qkv, const Geometry& g, std::int64_t b, std::int64_t col) {
  for (std::int64_t t = 0; t < g.T; ++t) {
    const Bf16* src = qkv + (b * g.T + t) * g.W + col;
    for (std::int64_t d = 0; d < g.hs; ++d) dst[t * g.hs + d] = float_from_bf16(src[d]);
  }
}

// Head h's columns of a (B,T,C) tensor's sample b, widened: dst (T, hs).
void load_btc(float* dst, const Bf16* x, const Geometry& g, std::int64_t b, std::int64_t h) {
  for (std::int64_t t = 0; t < g.T; ++t) {
    const Bf16* src = x + (b * g.T + t) * g.C + h * g.hs;
    for (std::int64_t d = 0; d < g.hs; ++d) dst[t * g.hs + d] = float_from_bf16(src[d]);
  }
}

inline float dot(const float* a, const float* b, std::int64_t n) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (std::int64_t d = 0; d < n; ++d) s += a[d] * b[d];
  return s;
}

// Per-thread scratch, grown once to the largest size seen (as cpu/bf16's score tiles).
float* scratch(std::size_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

// One (b, h) of the forward pass.
void forward_head(Bf16* out, float* lse, const Bf16* qkv, const Geometry& g, const Drop& drop,
                  std::int64_t b, std::int64_t h) {
  const std::int64_t T = g.T, hs = g.hs;
  float* kf = scratch(static_cast<std::size_t>(2 * T * hs + 2 * hs + 2 * kKeyBlock));
  float* vf = kf + T * hs;
  float* q = vf + T * hs;
  float* acc = q + hs;
  float* s = acc + hs;         // the block's scores, then its probabilities
  float* z = s + kKeyBlock;    // the block's keep factors
  const std::int64_t kv = h / g.groups.G;
  load_part(kf, qkv, g, b, g.groups.k_col(kv));
  load_part(vf, qkv, g, b, g.groups.v_col(kv));
  for (std::int64_t i = 0; i < T; ++i) {
    const Bf16* qrow = qkv + (b * T + i) * g.W + g.groups.q_col(h);
    for (std::int64_t d = 0; d < hs; ++d) q[d] = float_from_bf16(qrow[d]);
    std::fill(acc, acc + hs, 0.0f);
    float mx = -INFINITY, sum = 0.0f;
    for (std::int64_t j0 = 0; j0 <= i; j0 += kKeyBlock) {
      const std::int64_t n = std::min(kKeyBlock, i + 1 - j0);
      float bmx = -INFINITY;
      for (std::int64_t jj = 0; jj < n; ++jj) {
        s[jj] = dot(q, kf + (j0 + jj) * hs, hs) * g.scale;
        bmx = std::max(bmx, s[jj]);
      }
      const float m_new = std::max(mx, bmx);
      const float corr = exp_approx(mx - m_new);  // 0 for the first block (mx = -inf)
      float bsum = 0.0f;
      for (std::int64_t jj = 0; jj < n; ++jj) {
        s[jj] = exp_approx(s[jj] - m_new);
        bsum += s[jj];
      }
      sum = sum * corr + bsum;
      drop_keys(z, drop, g, b, h, i, j0, n);
#pragma omp simd
      for (std::int64_t d = 0; d < hs; ++d) acc[d] *= corr;
      for (std::int64_t jj = 0; jj < n; ++jj) {
        const float pz = s[jj] * z[jj];
        const float* v = vf + (j0 + jj) * hs;
#pragma omp simd
        for (std::int64_t d = 0; d < hs; ++d) acc[d] += pz * v[d];
      }
      mx = m_new;
    }
    const float inv = 1.0f / sum;
    Bf16* o = out + (b * T + i) * g.C + h * hs;
    for (std::int64_t d = 0; d < hs; ++d) o[d] = bf16_from_float(acc[d] * inv);
    lse[(b * g.NH + h) * T + i] = mx + std::log(sum);
  }
}

// One (b, kv) group of the backward pass: dsum and the q parts of dqkv (=) of its query heads,
// and its kv head's k and v parts (=), summed over those heads in order.
void backward_group(Bf16* dqkv, float* dsum, const Bf16* dout, const float* lse, const Bf16* qkv,
                    const Geometry& g, const Drop& drop, std::int64_t b, std::int64_t kv) {
  const std::int64_t T = g.T, hs = g.hs;
  float* qf = scratch(static_cast<std::size_t>(6 * T * hs + hs + 3 * T));
  float* kf = qf + T * hs;
  float* vf = kf + T * hs;
  float* of = vf + T * hs;  // dout
  float* dk = of + T * hs;
  float* dv = dk + T * hs;
  float* dq = dv + T * hs;
  float* p = dq + hs;       // row i's P, its dP before dropout (dout . v) and keep factors
  float* dpd = p + T;
  float* z = dpd + T;
  load_part(kf, qkv, g, b, g.groups.k_col(kv));
  load_part(vf, qkv, g, b, g.groups.v_col(kv));
  std::fill(dk, dk + 2 * T * hs, 0.0f);  // dk and dv
  for (std::int64_t h = kv * g.groups.G; h < (kv + 1) * g.groups.G; ++h) {
    const std::int64_t bh = b * g.NH + h;
    load_part(qf, qkv, g, b, g.groups.q_col(h));
    load_btc(of, dout, g, b, h);
    for (std::int64_t i = 0; i < T; ++i) {
      const float* q = qf + i * hs;
      const float* o = of + i * hs;
      const float l = lse[bh * T + i];
      drop_keys(z, drop, g, b, h, i, 0, i + 1);
      float ds = 0.0f;
      for (std::int64_t j = 0; j <= i; ++j) {
        p[j] = exp_approx(dot(q, kf + j * hs, hs) * g.scale - l);
        dpd[j] = dot(o, vf + j * hs, hs);
        ds += p[j] * z[j] * dpd[j];
      }
      dsum[bh * T + i] = ds;
      std::fill(dq, dq + hs, 0.0f);
      for (std::int64_t j = 0; j <= i; ++j) {
        const float dS = p[j] * (z[j] * dpd[j] - ds);
        const float pz = p[j] * z[j];
        const float* k = kf + j * hs;
        float* dkj = dk + j * hs;
        float* dvj = dv + j * hs;
#pragma omp simd
        for (std::int64_t d = 0; d < hs; ++d) {
          dq[d] += dS * k[d];
          dkj[d] += dS * q[d];
          dvj[d] += pz * o[d];
        }
      }
      Bf16* dst = dqkv + (b * T + i) * g.W + g.groups.q_col(h);
      for (std::int64_t d = 0; d < hs; ++d) dst[d] = bf16_from_float(dq[d] * g.scale);
    }
  }
  for (std::int64_t j = 0; j < T; ++j) {
    Bf16* row = dqkv + (b * T + j) * g.W;
    for (std::int64_t d = 0; d < hs; ++d) {
      row[g.groups.k_col(kv) + d] = bf16_from_float(dk[j * hs + d] * g.scale);
      row[g.groups.v_col(kv) + d] = bf16_from_float(dv[j * hs + d]);
    }
  }
}

}  // namespace

void attention_forward(Bf16* out, float* lse, const Bf16* qkv, const AttnDropout& drop,
                       std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH,
                       std::int64_t NKV) {
  if (B * T == 0) return;  // before the checks, as the CUDA kernel
  const Geometry g = geometry("attention_forward", T, C, NH, NKV);
  const Drop d = drop_args("attention_forward", drop);
  detail::device_args("attention_forward", {out, lse, qkv});
  const DeviceScope scope;
#pragma omp parallel for schedule(static)
  for (std::int64_t bh = 0; bh < B * NH; ++bh) forward_head(out, lse, qkv, g, d, bh / NH, bh % NH);
}

void attention_backward(Bf16* dqkv, float* dsum, const Bf16* dout, const float* lse,
                        const Bf16* qkv, const AttnDropout& drop, std::int64_t B, std::int64_t T,
                        std::int64_t C, std::int64_t NH, std::int64_t NKV) {
  if (B * T == 0) return;  // before the checks, as the CUDA kernel
  const Geometry g = geometry("attention_backward", T, C, NH, NKV);
  const Drop d = drop_args("attention_backward", drop);
  detail::device_args("attention_backward", {dqkv, dsum, dout, lse, qkv});
  const DeviceScope scope;
#pragma omp parallel for schedule(static)
  for (std::int64_t bkv = 0; bkv < B * NKV; ++bkv) {
    backward_group(dqkv, dsum, dout, lse, qkv, g, d, bkv / NKV, bkv % NKV);
  }
}

}  // namespace eth::emu
