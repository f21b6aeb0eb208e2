// Row and column kernels of bf16 training on the device: embedding, layer norm, cross-entropy,
// AdamW, the sum of squares and a tp rank's vocabulary-parallel shares (cpu/bf16/encoder.h,
// layernorm.h, crossentropy.h, optimizer.h, vocab_parallel.h).
// Every sum that the CPU forms in a fixed order and accumulates into a parameter gradient
// (embedding, layer-norm weight and bias) is formed here in the same order, one thread per
// output element: results do not depend on the launch shape.
#include "kernels/constants.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kernels.h"

namespace eth::cuda {
namespace {

// ---- embedding ---------------------------------------------------------------------------

__global__ void encoder_fwd(Bf16* out, const std::int32_t* tokens, const Bf16* wte,
                            const Bf16* wpe, std::int64_t T, std::int64_t C, std::int64_t total) {
  ETH_GRID_LOOP(i, total) {
    const std::int64_t n = i / C, c = i % C, t = n % T;
    const Bf16 tok = wte[tokens[n] * C + c];
    // No position table (rotary positions): the token's row itself.
    out[i] = wpe != nullptr ? to_bf16(to_float(tok) + to_float(wpe[t * C + c])) : tok;
  }
}

// One thread per (t, c): dwpe[t,c] += dout[b,t,c] for b in order.
__global__ void encoder_bwd_pos(float* dwpe, const Bf16* dout, std::int64_t B, std::int64_t T,
                                std::int64_t C) {
  ETH_GRID_LOOP(i, T * C) {
    float acc = dwpe[i];
    for (std::int64_t b = 0; b < B; ++b) acc += to_float(dout[b * T * C + i]);
    dwpe[i] = acc;
  }
}

// One thread per channel: dwte[tokens[n],c] += dout[n,c] for n in order (no atomics, so a token
// that occurs twice adds in token order, as on the CPU).
__global__ void encoder_bwd_tok(float* dwte, const Bf16* dout, const std::int32_t* tokens,
                                std::int64_t N, std::int64_t C) {
  ETH_GRID_LOOP(c, C) {
    for (std::int64_t n = 0; n < N; ++n) dwte[tokens[n] * C + c] += to_float(dout[n * C + c]);
  }
}

// ---- layer norm: one warp per row ---------------------------------------------------------

constexpr int kRowsPerBlock = kThreads / 32;

__global__ void layernorm_fwd(Bf16* out, float* mean, float* rstd, const Bf16* inp,
                              const Bf16* weight, const Bf16* bias, std::int64_t N,
                              std::int64_t C) {
  const std::int64_t n = blockIdx.x * static_cast<std::int64_t>(kRowsPerBlock) + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (n >= N) return;  // the whole warp leaves together
  const Bf16* x = inp + n * C;
  float sum = 0;
  for (std::int64_t c = lane; c < C; c += 32) sum += to_float(x[c]);
  const float m = warp_sum(sum) / static_cast<float>(C);
  float var = 0;
  for (std::int64_t c = lane; c < C; c += 32) {
    const float d = to_float(x[c]) - m;
    var += d * d;
  }
  const float s = rsqrtf(warp_sum(var) / static_cast<float>(C) + static_cast<float>(kLayerNormEps));
  for (std::int64_t c = lane; c < C; c += 32) {
    out[n * C + c] = to_bf16((to_float(x[c]) - m) * s * to_float(weight[c]) + to_float(bias[c]));
  }
  if (lane == 0) {
    mean[n] = m;
    rstd[n] = s;
  }
}

// dinp += rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dout * weight.
__global__ void layernorm_bwd_inp(Bf16* dinp, const Bf16* dout, const Bf16* inp,
                                  const Bf16* weight, const float* mean, const float* rstd,
                                  std::int64_t N, std::int64_t C) {
  const std::int64_t n = blockIdx.x * static_cast<std::int64_t>(kRowsPerBlock) + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (n >= N) return;
  const float m = mean[n], s = rstd[n];
  float sg = 0, sgx = 0;
  for (std::int64_t c = lane; c < C; c += 32) {
    const float g = to_float(dout[n * C + c]) * to_float(weight[c]);
    sg += g;
    sgx += g * (to_float(inp[n * C + c]) - m) * s;
  }
  const float mg = warp_sum(sg) / static_cast<float>(C);
  const float mgx = warp_sum(sgx) / static_cast<float>(C);
  for (std::int64_t c = lane; c < C; c += 32) {
    const std::int64_t i = n * C + c;
    const float g = to_float(dout[i]) * to_float(weight[c]);
    const float xhat = (to_float(inp[i]) - m) * s;
    dinp[i] = to_bf16(to_float(dinp[i]) + s * (g - mg - xhat * mgx));
  }
}

// One thread per channel, rows in order: dweight += sum dout * xhat, dbias += sum dout.
__global__ void layernorm_bwd_params(float* dweight, float* dbias, const Bf16* dout,
                                     const Bf16* inp, const float* mean, const float* rstd,
                                     std::int64_t N, std::int64_t C) {
  ETH_GRID_LOOP(c, C) {
    float dw = dweight[c], db = dbias[c];
    for (std::int64_t n = 0; n < N; ++n) {
      const float d = to_float(dout[n * C + c]);
      dw += d * (to_float(inp[n * C + c]) - mean[n]) * rstd[n];
      db += d;
    }
    dweight[c] = dw;
    dbias[c] = db;
  }
}

// ---- cross-entropy: one block per token ---------------------------------------------------

__global__ void ce_fwd(float* losses, float* lse, const Bf16* logits,
                       const std::int32_t* targets, std::int64_t V) {
  __shared__ float shared[32];
  const std::int64_t n = blockIdx.x;
  const Bf16* z = logits + n * V;
  float mx = -INFINITY;
  for (std::int64_t v = threadIdx.x; v < V; v += blockDim.x) mx = fmaxf(mx, to_float(z[v]));
  mx = block_max(mx, shared);
  float sum = 0;
  for (std::int64_t v = threadIdx.x; v < V; v += blockDim.x) sum += expf(to_float(z[v]) - mx);
  sum = block_sum(sum, shared);
  if (threadIdx.x == 0) {
    const float l = mx + logf(sum);
    lse[n] = l;
    losses[n] = l - to_float(z[targets[n]]);
  }
}

// dlogits = scale (softmax - onehot) over this block's row of V columns, the columns being the
// vocabulary's [v0, v0 + V) (v0 = 0: the whole vocabulary).
__global__ void ce_bwd(Bf16* dlogits, const Bf16* logits, const float* lse,
                       const std::int32_t* targets, std::int64_t v0, float scale,
                       std::int64_t V) {
  const std::int64_t n = blockIdx.x;
  const float l = lse[n];
  const std::int64_t target = targets[n] - v0;
  for (std::int64_t v = threadIdx.x; v < V; v += blockDim.x) {
    const float p = expf(to_float(logits[n * V + v]) - l);
    dlogits[n * V + v] = to_bf16(scale * (p - (v == target ? 1.0f : 0.0f)));
  }
}

// ---- vocabulary-parallel shares (cpu/bf16/vocab_parallel.h) --------------------------------

__global__ void vocab_emb_fwd(float* out, const std::int32_t* tokens, const Bf16* wte_rows,
                              std::int64_t v0, std::int64_t Vr, std::int64_t C,
                              std::int64_t total) {
  ETH_GRID_LOOP(i, total) {
    const std::int64_t n = i / C, c = i % C, tok = tokens[n];
    out[i] = tok >= v0 && tok < v0 + Vr ? to_float(wte_rows[(tok - v0) * C + c]) : 0.0f;
  }
}

// One thread per channel, tokens in order (as encoder_bwd_tok).
__global__ void vocab_emb_bwd(float* dwte_rows, const Bf16* dout, const std::int32_t* tokens,
                              std::int64_t v0, std::int64_t Vr, std::int64_t N, std::int64_t C) {
  ETH_GRID_LOOP(c, C) {
    for (std::int64_t n = 0; n < N; ++n) {
      const std::int64_t tok = tokens[n];
      if (tok >= v0 && tok < v0 + Vr) dwte_rows[(tok - v0) * C + c] += to_float(dout[n * C + c]);
    }
  }
}

__global__ void position_fwd(Bf16* out, const float* lookup, const Bf16* wpe, std::int64_t T,
                             std::int64_t C, std::int64_t total) {
  ETH_GRID_LOOP(i, total) {
    const std::int64_t t = (i / C) % T, c = i % C;
    out[i] = to_bf16(lookup[i] + to_float(wpe[t * C + c]));
  }
}

__global__ void vocab_max(float* mx, const Bf16* logits, std::int64_t Vr) {
  __shared__ float shared[32];
  const std::int64_t n = blockIdx.x;
  float m = -INFINITY;
  for (std::int64_t v = threadIdx.x; v < Vr; v += blockDim.x) {
    m = fmaxf(m, to_float(logits[n * Vr + v]));
  }
  m = block_max(m, shared);
  if (threadIdx.x == 0) mx[n] = m;
}

__global__ void vocab_sums(float* stats, const Bf16* logits, const float* mx,
                           const std::int32_t* targets, std::int64_t v0, std::int64_t Vr) {
  __shared__ float shared[32];
  const std::int64_t n = blockIdx.x;
  float sum = 0;
  for (std::int64_t v = threadIdx.x; v < Vr; v += blockDim.x) {
    sum += expf(to_float(logits[n * Vr + v]) - mx[n]);
  }
  sum = block_sum(sum, shared);
  if (threadIdx.x == 0) {
    const std::int64_t t = targets[n];
    stats[2 * n] = sum;
    stats[2 * n + 1] = t >= v0 && t < v0 + Vr ? to_float(logits[n * Vr + t - v0]) : 0.0f;
  }
}

__global__ void vocab_finish(float* losses, float* lse, const float* mx, const float* stats,
                             std::int64_t N) {
  ETH_GRID_LOOP(n, N) {
    const float l = mx[n] + logf(stats[2 * n]);
    lse[n] = l;
    losses[n] = l - stats[2 * n + 1];
  }
}

// ---- optimizer ----------------------------------------------------------------------------

__global__ void adamw(float* p, Bf16* p_bf16, float* m, float* v, const float* grads,
                      std::int64_t n, cpu::AdamWScalars s) {
  const float c1 = 1.0f - s.beta1, c2 = 1.0f - s.beta2;
  ETH_GRID_LOOP(i, n) {
    const float g = grads[i] * s.grad_scale;
    const float mi = s.beta1 * m[i] + c1 * g;
    const float vi = s.beta2 * v[i] + c2 * g * g;
    m[i] = mi;
    v[i] = vi;
    const float mhat = mi / s.bias_corr1, vhat = vi / s.bias_corr2;
    const float pi = p[i] - (s.lr * mhat / (sqrtf(vhat) + s.eps) + s.decay * p[i]);
    p[i] = pi;
    p_bf16[i] = to_bf16(pi);
  }
}

constexpr std::int64_t kSquaresBlock = 4096;  // the CPU's block (cpu/optimizer.cpp)

// One block of kThreads per 4096 elements: partial[blk] = sum of squares in double.
__global__ void squares(double* partial, const float* x, std::int64_t n) {
  __shared__ double shared[kThreads];
  const std::int64_t lo = blockIdx.x * kSquaresBlock;
  const std::int64_t hi = lo + kSquaresBlock < n ? lo + kSquaresBlock : n;
  double acc = 0;
  for (std::int64_t i = lo + threadIdx.x; i < hi; i += kThreads) {
    const double d = x[i];
    acc += d * d;
  }
  shared[threadIdx.x] = acc;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w >>= 1) {
    if (static_cast<int>(threadIdx.x) < w) shared[threadIdx.x] += shared[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = shared[0];
}

// One thread adds x[0..n) in order in double: the CPU's order for the loss and the blocks of
// the sum of squares (n is tokens or 4096-element blocks: small).
template <typename T>
__global__ void sum_in_order(double* out, const T* x, std::int64_t n) {
  double s = 0;
  for (std::int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]);
  *out = s;
}

// *acc += scale * (x[0] + ... + x[n-1]), the sum in order in double: the CPU trainer's
// `loss += scale * total` for a micro-batch, on a device scalar.
__global__ void add_scaled_sum_in_order(double* acc, const float* x, double scale,
                                        std::int64_t n) {
  double s = 0;
  for (std::int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]);
  *acc += scale * s;
}

// The calling thread's device scratch of at least n doubles, kept and grown to the largest n
// seen (as the CPU's bf16 GEMM keeps its blocks): the first step allocates, no later call does.
// Growing frees the old one, which waits for the device (cudaFree), so no queued kernel still
// reads it.
double* scratch(std::int64_t n) {
  thread_local DeviceBuffer<double> s;
  if (s.size() < static_cast<std::size_t>(n)) s = DeviceBuffer<double>(static_cast<std::size_t>(n));
  return s.data();
}

double fetch(const double* d) {
  double h = 0;
  copy_to_host(&h, d, sizeof(double));
  return h;
}

unsigned row_blocks(std::int64_t N) {
  return static_cast<unsigned>((N + kRowsPerBlock - 1) / kRowsPerBlock);
}

}  // namespace

void encoder_forward(Bf16* out, const std::int32_t* tokens, const Bf16* wte, const Bf16* wpe,
                     std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t /*V*/) {
  const std::int64_t total = B * T * C;
  if (total == 0) return;
  encoder_fwd<<<blocks_for(total), kThreads, 0, stream()>>>(out, tokens, wte, wpe, T, C, total);
  ETH_CUDA_LAUNCHED();
}

void encoder_backward(float* dwte, float* dwpe, const Bf16* dout, const std::int32_t* tokens,
                      std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t /*V*/) {
  if (B * T * C == 0) return;
  if (dwpe != nullptr) {  // else no position table
    encoder_bwd_pos<<<blocks_for(T * C), kThreads, 0, stream()>>>(dwpe, dout, B, T, C);
    ETH_CUDA_LAUNCHED();
  }
  encoder_bwd_tok<<<blocks_for(C, 64), 64, 0, stream()>>>(dwte, dout, tokens, B * T, C);
  ETH_CUDA_LAUNCHED();
}

void layernorm_forward(Bf16* out, float* mean, float* rstd, const Bf16* inp, const Bf16* weight,
                       const Bf16* bias, std::int64_t N, std::int64_t C) {
  if (N == 0) return;
  layernorm_fwd<<<row_blocks(N), kThreads, 0, stream()>>>(out, mean, rstd, inp, weight, bias, N,
                                                          C);
  ETH_CUDA_LAUNCHED();
}

void layernorm_backward(Bf16* dinp, float* dweight, float* dbias, const Bf16* dout,
                        const Bf16* inp, const Bf16* weight, const float* mean, const float* rstd,
                        std::int64_t N, std::int64_t C) {
  if (N == 0) return;
  layernorm_bwd_inp<<<row_blocks(N), kThreads, 0, stream()>>>(dinp, dout, inp, weight, mean,
                                                              rstd, N, C);
  ETH_CUDA_LAUNCHED();
  layernorm_bwd_params<<<blocks_for(C, 64), 64, 0, stream()>>>(dweight, dbias, dout, inp, mean,
                                                              rstd, N, C);
  ETH_CUDA_LAUNCHED();
}

void crossentropy_forward(double* loss, float* losses, float* lse, const Bf16* logits,
                          const std::int32_t* targets, double scale, std::int64_t N,
                          std::int64_t V) {
  *loss = 0;
  if (N == 0) return;
  ce_fwd<<<static_cast<unsigned>(N), kThreads, 0, stream()>>>(losses, lse, logits, targets, V);
  ETH_CUDA_LAUNCHED();
  double* sum = scratch(1);
  sum_in_order<<<1, 1, 0, stream()>>>(sum, losses, N);  // the CPU's sum: token order, double
  ETH_CUDA_LAUNCHED();
  *loss = scale * fetch(sum);
}

void crossentropy_forward_add(double* loss, float* losses, float* lse, const Bf16* logits,
                              const std::int32_t* targets, double scale, std::int64_t N,
                              std::int64_t V) {
  if (N == 0) return;
  ce_fwd<<<static_cast<unsigned>(N), kThreads, 0, stream()>>>(losses, lse, logits, targets, V);
  ETH_CUDA_LAUNCHED();
  add_scaled_sum_in_order<<<1, 1, 0, stream()>>>(loss, losses, scale, N);
  ETH_CUDA_LAUNCHED();
}

void crossentropy_backward(Bf16* dlogits, const Bf16* logits, const float* lse,
                           const std::int32_t* targets, double scale, std::int64_t N,
                           std::int64_t V) {
  if (N == 0) return;
  ce_bwd<<<static_cast<unsigned>(N), kThreads, 0, stream()>>>(dlogits, logits, lse, targets, 0,
                                                              static_cast<float>(scale), V);
  ETH_CUDA_LAUNCHED();
}

void adamw_update(float* p, Bf16* p_bf16, float* m, float* v, const float* grads, std::int64_t n,
                  const cpu::AdamWScalars& s) {
  if (n == 0) return;
  adamw<<<blocks_for(n), kThreads, 0, stream()>>>(p, p_bf16, m, v, grads, n, s);
  ETH_CUDA_LAUNCHED();
}

double sum_squares(const float* x, std::int64_t n) {
  if (n == 0) return 0;
  const std::int64_t blocks = (n + kSquaresBlock - 1) / kSquaresBlock;
  double* sum = scratch(blocks + 1);
  squares<<<static_cast<unsigned>(blocks), kThreads, 0, stream()>>>(sum + 1, x, n);
  ETH_CUDA_LAUNCHED();
  sum_in_order<<<1, 1, 0, stream()>>>(sum, sum + 1, blocks);  // blocks in order, as the CPU
  ETH_CUDA_LAUNCHED();
  return fetch(sum);
}

void vocab_embedding_forward(float* out, const std::int32_t* tokens, const Bf16* wte_rows,
                             std::int64_t v0, std::int64_t Vr, std::int64_t N, std::int64_t C,
                             std::int64_t /*V*/) {
  if (N * C == 0) return;
  vocab_emb_fwd<<<blocks_for(N * C), kThreads, 0, stream()>>>(out, tokens, wte_rows, v0, Vr, C,
                                                              N * C);
  ETH_CUDA_LAUNCHED();
}

void vocab_embedding_backward(float* dwte_rows, const Bf16* dout, const std::int32_t* tokens,
                              std::int64_t v0, std::int64_t Vr, std::int64_t N, std::int64_t C) {
  if (N * C == 0 || Vr == 0) return;
  vocab_emb_bwd<<<blocks_for(C, 64), 64, 0, stream()>>>(dwte_rows, dout, tokens, v0, Vr, N, C);
  ETH_CUDA_LAUNCHED();
}

void position_forward(Bf16* out, const float* lookup, const Bf16* wpe, std::int64_t B,
                      std::int64_t T, std::int64_t C) {
  if (B * T * C == 0) return;
  position_fwd<<<blocks_for(B * T * C), kThreads, 0, stream()>>>(out, lookup, wpe, T, C,
                                                                 B * T * C);
  ETH_CUDA_LAUNCHED();
}

void position_backward(float* dwpe, const Bf16* dout, std::int64_t B, std::int64_t T,
                       std::int64_t C) {
  if (B * T * C == 0) return;
  encoder_bwd_pos<<<blocks_for(T * C), kThreads, 0, stream()>>>(dwpe, dout, B, T, C);
  ETH_CUDA_LAUNCHED();
}

void vocab_ce_max(float* mx, const Bf16* logits, std::int64_t N, std::int64_t Vr) {
  if (N == 0) return;
  vocab_max<<<static_cast<unsigned>(N), kThreads, 0, stream()>>>(mx, logits, Vr);
  ETH_CUDA_LAUNCHED();
}

void vocab_ce_sums(float* stats, const Bf16* logits, const float* mx, const std::int32_t* targets,
                   std::int64_t v0, std::int64_t N, std::int64_t Vr) {
  if (N == 0) return;
  vocab_sums<<<static_cast<unsigned>(N), kThreads, 0, stream()>>>(stats, logits, mx, targets, v0,
                                                                  Vr);
  ETH_CUDA_LAUNCHED();
}

void vocab_ce_finish(double* loss, float* losses, float* lse, const float* mx, const float* stats,
                     double scale, std::int64_t N) {
  *loss = 0;
  if (N == 0) return;
  vocab_finish<<<blocks_for(N), kThreads, 0, stream()>>>(losses, lse, mx, stats, N);
  ETH_CUDA_LAUNCHED();
  double* sum = scratch(1);
  sum_in_order<<<1, 1, 0, stream()>>>(sum, losses, N);  // token order, double: the CPU's sum
  ETH_CUDA_LAUNCHED();
  *loss = scale * fetch(sum);
}

void vocab_ce_finish_add(double* loss, float* losses, float* lse, const float* mx,
                         const float* stats, double scale, std::int64_t N) {
  if (N == 0) return;
  vocab_finish<<<blocks_for(N), kThreads, 0, stream()>>>(losses, lse, mx, stats, N);
  ETH_CUDA_LAUNCHED();
  add_scaled_sum_in_order<<<1, 1, 0, stream()>>>(loss, losses, scale, N);
  ETH_CUDA_LAUNCHED();
}

void vocab_ce_backward(Bf16* dlogits, const Bf16* logits, const float* lse,
                       const std::int32_t* targets, std::int64_t v0, double scale, std::int64_t N,
                       std::int64_t Vr) {
  if (N == 0) return;
  ce_bwd<<<static_cast<unsigned>(N), kThreads, 0, stream()>>>(dlogits, logits, lse, targets, v0,
                                                              static_cast<float>(scale), Vr);
  ETH_CUDA_LAUNCHED();
}

}  // namespace eth::cuda
