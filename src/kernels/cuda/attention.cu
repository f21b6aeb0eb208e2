// Fused, memory-efficient causal attention, grouped-query (NKV kv heads, each read by NH/NKV
// query heads; qkv grouped as launch.h's QkvGroups, head-interleaved when NKV = NH): no
// (B,NH,T,T) tensor ever reaches global memory. A block owns kAttnRows rows of one (batch,
// head) (launch.h); each warp keeps its rows' vectors in registers, lanes splitting the head
// dimension, and the other side's rows stream through shared memory in tiles of kAttnKeys.
//   forward:  online softmax over the key tiles (running max and sum), out = P_dropped V / sum,
//             lse = max + log(sum) saved per row;
//   backward: kernel 1 (query rows) recomputes P = exp(s - lse) and dP, forms
//             dsum_i = sum_j P_ij dP_ij in fp32 and then dQ; kernel 2 (key rows) forms dK and
//             dV from the same recomputed P and dsum; a kv head's block walks the query heads
//             of its group in order, so dK and dV sum over them without atomics. Every output
//             element is owned by one warp, so results do not depend on scheduling.
// Dropout of P draws each element's keep bit from philox.h with StageCompute's key (the CPU's
// mask, bit for bit); the softmax sum and lse are of the undropped P, as on the CPU.
#include <cmath>

#include "kernels/cuda/attention_args.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kernels.h"
#include "kernels/philox.h"

namespace eth::cuda {
namespace {

using launch::kAttnKeys;
using launch::kAttnMaxHead;
using launch::kAttnRows;
using launch::kAttnRowsPerWarp;
using launch::kAttnWarps;
constexpr int R = kAttnRowsPerWarp;

using Geometry = launch::AttnGeometry;
using Drop = launch::AttnDrop;

// 1/(1-p) if element (b, h, i, j) is kept, else 0; 1 without dropout.
__device__ __forceinline__ float drop_factor(const Drop& d, const Geometry& g, std::int64_t b,
                                             std::int64_t h, std::int64_t i, std::int64_t j) {
  if (d.keep_scale == 0.0f) return 1.0f;
  const std::int64_t elem = (d.head0 + h) * g.T * g.T + i * g.T + j;
  const std::uint32_t w = philox::word(d.seed, d.step, d.unit, d.op, d.sample0 + b, elem);
  return philox::dropout_keep(w, d.threshold) ? d.keep_scale : 0.0f;
}

// First column of part `part` (0 q, 1 k, 2 v) that query head h reads in a qkv row.
__device__ __forceinline__ std::int64_t part_col(const Geometry& g, std::int64_t h, int part) {
  const std::int64_t kv = h / g.groups.G;
  return part == 0 ? g.groups.q_col(h) : part == 1 ? g.groups.k_col(kv) : g.groups.v_col(kv);
}

// Row `row` of query head h's part `part` of sample b's qkv (k and v: its kv head's).
__device__ __forceinline__ const Bf16* qkv_row(const Bf16* qkv, const Geometry& g, std::int64_t b,
                                               std::int64_t h, int part, std::int64_t row) {
  return qkv + (b * g.T + row) * g.W + part_col(g, h, part);
}

// Loads this lane's dims of a bf16 vector (0 beyond hs).
template <int D>
__device__ __forceinline__ void load_vec(float (&v)[D], const Bf16* p, std::int64_t hs,
                                         int lane) {
#pragma unroll
  for (int c = 0; c < D; ++c) {
    const int d = lane + 32 * c;
    v[c] = d < hs ? to_float(p[d]) : 0.0f;
  }
}

// Warp-wide dot product of a register vector with a shared-memory row (both 0 beyond hs).
template <int D>
__device__ __forceinline__ float dot(const float (&v)[D], const float* row, int lane) {
  float s = 0;
#pragma unroll
  for (int c = 0; c < D; ++c) s += v[c] * row[lane + 32 * c];
  return warp_sum(s);
}

// Fills tile[r][0, kAttnMaxHead) with rows first.. of part `part` (0 beyond T or hs).
__device__ __forceinline__ void load_tile(float (*tile)[kAttnMaxHead], const Bf16* qkv,
                                          const Geometry& g, std::int64_t b, std::int64_t h,
                                          int part, std::int64_t first) {
  for (int idx = threadIdx.x; idx < kAttnKeys * kAttnMaxHead; idx += blockDim.x) {
    const int r = idx / kAttnMaxHead, d = idx % kAttnMaxHead;
    const std::int64_t row = first + r;
    tile[r][d] = row < g.T && d < g.hs ? to_float(qkv_row(qkv, g, b, h, part, row)[d]) : 0.0f;
  }
}

// The same for a (B,T,C) tensor's head-h columns (dout).
__device__ __forceinline__ void load_tile_btc(float (*tile)[kAttnMaxHead], const Bf16* x,
                                              const Geometry& g, std::int64_t b, std::int64_t h,
                                              std::int64_t first) {
  for (int idx = threadIdx.x; idx < kAttnKeys * kAttnMaxHead; idx += blockDim.x) {
    const int r = idx / kAttnMaxHead, d = idx % kAttnMaxHead;
    const std::int64_t row = first + r;
    tile[r][d] = row < g.T && d < g.hs ? to_float(x[(b * g.T + row) * g.C + h * g.hs + d]) : 0.0f;
  }
}

template <int D>
__global__ void __launch_bounds__(kAttnWarps * 32)
    attn_fwd(Bf16* out, float* lse, const Bf16* qkv, Geometry g, Drop drop) {
  __shared__ float ks[kAttnKeys][kAttnMaxHead];
  __shared__ float vs[kAttnKeys][kAttnMaxHead];
  const std::int64_t bh = blockIdx.x, b = bh / g.NH, h = bh % g.NH;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const std::int64_t row0 = blockIdx.y * static_cast<std::int64_t>(kAttnRows) + warp * R;
  float q[R][D], acc[R][D], mx[R], sum[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const std::int64_t i = row0 + r;
    if (i < g.T) {
      load_vec<D>(q[r], qkv_row(qkv, g, b, h, 0, i), g.hs, lane);
    } else {
#pragma unroll
      for (int c = 0; c < D; ++c) q[r][c] = 0;
    }
#pragma unroll
    for (int c = 0; c < D; ++c) acc[r][c] = 0;
    mx[r] = -INFINITY;
    sum[r] = 0;
  }
  const std::int64_t keys_end = launch::attn_keys_end(blockIdx.y, g.T);
  for (std::int64_t k0 = 0; k0 < keys_end; k0 += kAttnKeys) {
    __syncthreads();
    load_tile(ks, qkv, g, b, h, 1, k0);
    load_tile(vs, qkv, g, b, h, 2, k0);
    __syncthreads();
    const int nk = static_cast<int>(keys_end - k0 < kAttnKeys ? keys_end - k0 : kAttnKeys);
    for (int jj = 0; jj < nk; ++jj) {
      const std::int64_t j = k0 + jj;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float s = dot<D>(q[r], ks[jj], lane) * g.scale;
        const std::int64_t i = row0 + r;
        if (j > i || i >= g.T) continue;  // warp-uniform
        const float m_new = fmaxf(mx[r], s);
        const float corr = expf(mx[r] - m_new);
        const float p = expf(s - m_new);
        sum[r] = sum[r] * corr + p;
        const float pd = p * drop_factor(drop, g, b, h, i, j);
#pragma unroll
        for (int c = 0; c < D; ++c) acc[r][c] = acc[r][c] * corr + pd * vs[jj][lane + 32 * c];
        mx[r] = m_new;
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const std::int64_t i = row0 + r;
    if (i >= g.T) continue;
    const float inv = 1.0f / sum[r];
#pragma unroll
    for (int c = 0; c < D; ++c) {
      const int d = lane + 32 * c;
      if (d < g.hs) out[(b * g.T + i) * g.C + h * g.hs + d] = to_bf16(acc[r][c] * inv);
    }
    if (lane == 0) lse[bh * g.T + i] = mx[r] + logf(sum[r]);
  }
}

// Query rows: dsum_i = sum_j P_ij z_ij (dout_i . v_j), then dQ_i = scale sum_j dS_ij k_j with
// dS_ij = P_ij (z_ij dout_i . v_j - dsum_i).
template <int D>
__global__ void __launch_bounds__(kAttnWarps * 32)
    attn_bwd_q(Bf16* dqkv, float* dsum, const Bf16* dout, const float* lse, const Bf16* qkv,
               Geometry g, Drop drop) {
  __shared__ float ks[kAttnKeys][kAttnMaxHead];
  __shared__ float vs[kAttnKeys][kAttnMaxHead];
  const std::int64_t bh = blockIdx.x, b = bh / g.NH, h = bh % g.NH;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const std::int64_t row0 = blockIdx.y * static_cast<std::int64_t>(kAttnRows) + warp * R;
  float q[R][D], dO[R][D], dq[R][D], l[R], ds[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const std::int64_t i = row0 + r < g.T ? row0 + r : g.T - 1;  // rows past T: never written
    load_vec<D>(q[r], qkv_row(qkv, g, b, h, 0, i), g.hs, lane);
    load_vec<D>(dO[r], dout + (b * g.T + i) * g.C + h * g.hs, g.hs, lane);
#pragma unroll
    for (int c = 0; c < D; ++c) dq[r][c] = 0;
    l[r] = lse[bh * g.T + i];
    ds[r] = 0;
  }
  const std::int64_t keys_end = launch::attn_keys_end(blockIdx.y, g.T);
  for (int pass = 0; pass < 2; ++pass) {
    for (std::int64_t k0 = 0; k0 < keys_end; k0 += kAttnKeys) {
      __syncthreads();
      load_tile(ks, qkv, g, b, h, 1, k0);
      load_tile(vs, qkv, g, b, h, 2, k0);
      __syncthreads();
      const int nk = static_cast<int>(keys_end - k0 < kAttnKeys ? keys_end - k0 : kAttnKeys);
      for (int jj = 0; jj < nk; ++jj) {
        const std::int64_t j = k0 + jj;
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const float s = dot<D>(q[r], ks[jj], lane) * g.scale;
          const float dpd = dot<D>(dO[r], vs[jj], lane);
          const std::int64_t i = row0 + r;
          if (j > i || i >= g.T) continue;
          const float p = expf(s - l[r]);
          const float z = drop_factor(drop, g, b, h, i, j);
          if (pass == 0) {
            ds[r] += p * z * dpd;
          } else {
            const float dS = p * (z * dpd - ds[r]);
#pragma unroll
            for (int c = 0; c < D; ++c) dq[r][c] += dS * ks[jj][lane + 32 * c];
          }
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const std::int64_t i = row0 + r;
    if (i >= g.T) continue;
    Bf16* dst = dqkv + (b * g.T + i) * g.W + g.groups.q_col(h);
#pragma unroll
    for (int c = 0; c < D; ++c) {
      const int d = lane + 32 * c;
      if (d < g.hs) dst[d] = to_bf16(dq[r][c] * g.scale);
    }
    if (lane == 0) dsum[bh * g.T + i] = ds[r];
  }
}

// Key rows of kv head kv: dK_j = scale sum_h sum_i dS^h_ij q^h_i, dV_j = sum_h sum_i P^h_ij
// z^h_ij dout^h_i over queries i >= j and the group's query heads h, in head order.
template <int D>
__global__ void __launch_bounds__(kAttnWarps * 32)
    attn_bwd_kv(Bf16* dqkv, const float* dsum, const Bf16* dout, const float* lse,
                const Bf16* qkv, Geometry g, Drop drop) {
  __shared__ float qs[kAttnKeys][kAttnMaxHead];
  __shared__ float os[kAttnKeys][kAttnMaxHead];
  __shared__ float ls[kAttnKeys], dss[kAttnKeys];
  const std::int64_t NKV = g.NH / g.groups.G;
  const std::int64_t b = blockIdx.x / NKV, kv = blockIdx.x % NKV;
  const std::int64_t h_first = kv * g.groups.G;  // the group's first query head
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const std::int64_t row0 = blockIdx.y * static_cast<std::int64_t>(kAttnRows) + warp * R;
  float k[R][D], v[R][D], dk[R][D], dv[R][D];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const std::int64_t j = row0 + r < g.T ? row0 + r : g.T - 1;
    load_vec<D>(k[r], qkv_row(qkv, g, b, h_first, 1, j), g.hs, lane);
    load_vec<D>(v[r], qkv_row(qkv, g, b, h_first, 2, j), g.hs, lane);
#pragma unroll
    for (int c = 0; c < D; ++c) dk[r][c] = dv[r][c] = 0;
  }
  for (std::int64_t h = h_first; h < h_first + g.groups.G; ++h) {
    const std::int64_t bh = b * g.NH + h;
    for (std::int64_t q0 = launch::attn_queries_begin(blockIdx.y); q0 < g.T; q0 += kAttnKeys) {
      __syncthreads();
      load_tile(qs, qkv, g, b, h, 0, q0);
      load_tile_btc(os, dout, g, b, h, q0);
      for (int t = threadIdx.x; t < kAttnKeys; t += blockDim.x) {
        const std::int64_t i = q0 + t;
        ls[t] = i < g.T ? lse[bh * g.T + i] : 0.0f;
        dss[t] = i < g.T ? dsum[bh * g.T + i] : 0.0f;
      }
      __syncthreads();
      const int nq = static_cast<int>(g.T - q0 < kAttnKeys ? g.T - q0 : kAttnKeys);
      for (int ii = 0; ii < nq; ++ii) {
        const std::int64_t i = q0 + ii;
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const float s = dot<D>(k[r], qs[ii], lane) * g.scale;
          const float dpd = dot<D>(v[r], os[ii], lane);
          const std::int64_t j = row0 + r;
          if (j > i || j >= g.T) continue;
          const float p = expf(s - ls[ii]);
          const float z = drop_factor(drop, g, b, h, i, j);
          const float dS = p * (z * dpd - dss[ii]);
#pragma unroll
          for (int c = 0; c < D; ++c) {
            dk[r][c] += dS * qs[ii][lane + 32 * c];
            dv[r][c] += p * z * os[ii][lane + 32 * c];
          }
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const std::int64_t j = row0 + r;
    if (j >= g.T) continue;
    Bf16* row = dqkv + (b * g.T + j) * g.W;
#pragma unroll
    for (int c = 0; c < D; ++c) {
      const int d = lane + 32 * c;
      if (d < g.hs) {
        row[g.groups.k_col(kv) + d] = to_bf16(dk[r][c] * g.scale);
        row[g.groups.v_col(kv) + d] = to_bf16(dv[r][c]);
      }
    }
  }
}

Geometry geometry(std::int64_t T, std::int64_t C, std::int64_t NH, std::int64_t NKV) {
  if (NH <= 0 || C % NH != 0 || launch::attn_chunks(C / NH) == 0) {
    throw CudaError("[cuda] attention: head size C/NH must divide C and be at most 128");
  }
  if (NKV <= 0 || NH % NKV != 0) {
    throw CudaError("[cuda] attention: the kv heads NKV must divide the query heads NH");
  }
  return launch::attn_geometry(T, C, NH, NKV);
}

Drop drop_args(const AttnDropout& d) {
  if (!(d.p >= 0.0f && d.p < 1.0f)) {
    throw CudaError("[cuda] attention: dropout probability must be in [0, 1)");
  }
  return launch::attn_drop(d);
}

// Instantiates kernel<D> for the head size's chunk count and launches it.
#define ETH_ATTN_LAUNCH(kernel, grid, ...)                                                  \
  switch (launch::attn_chunks(g.hs)) {                                                      \
    case 1: kernel<1><<<grid, kAttnWarps * 32, 0, stream()>>>(__VA_ARGS__); break;          \
    case 2: kernel<2><<<grid, kAttnWarps * 32, 0, stream()>>>(__VA_ARGS__); break;          \
    case 3: kernel<3><<<grid, kAttnWarps * 32, 0, stream()>>>(__VA_ARGS__); break;          \
    default: kernel<4><<<grid, kAttnWarps * 32, 0, stream()>>>(__VA_ARGS__); break;         \
  }                                                                                         \
  ETH_CUDA_LAUNCHED()

dim3 grid_of(std::int64_t B, std::int64_t T, std::int64_t NH) {
  const launch::AttnGrid a = launch::attention_grid(B, T, NH);
  if (a.y > 65535) throw CudaError("[cuda] attention: sequence too long for the grid");
  return dim3(static_cast<unsigned>(a.x), static_cast<unsigned>(a.y));
}

}  // namespace

void attention_forward(Bf16* out, float* lse, const Bf16* qkv, const AttnDropout& drop,
                       std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH,
                       std::int64_t NKV) {
  if (B * T == 0) return;
  const Geometry g = geometry(T, C, NH, NKV);
  const Drop d = drop_args(drop);
  const dim3 grid = grid_of(B, T, NH);
  ETH_ATTN_LAUNCH(attn_fwd, grid, out, lse, qkv, g, d);
}

void attention_backward(Bf16* dqkv, float* dsum, const Bf16* dout, const float* lse,
                        const Bf16* qkv, const AttnDropout& drop, std::int64_t B, std::int64_t T,
                        std::int64_t C, std::int64_t NH, std::int64_t NKV) {
  if (B * T == 0) return;
  const Geometry g = geometry(T, C, NH, NKV);
  const Drop d = drop_args(drop);
  const dim3 grid = grid_of(B, T, NH);
  ETH_ATTN_LAUNCH(attn_bwd_q, grid, dqkv, dsum, dout, lse, qkv, g, d);
  // One block per (batch, kv head): it sums its group's query heads (needs all of dsum).
  const dim3 kv_grid = grid_of(B, T, NKV);
  ETH_ATTN_LAUNCH(attn_bwd_kv, kv_grid, dqkv, dsum, dout, lse, qkv, g, d);
}

}  // namespace eth::cuda
