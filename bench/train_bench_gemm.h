// train_bench --gemm: the fp32 GEMM library's rate on one training step's matmul shapes, ETH
// fp32's ceiling (the step's FLOPs are mostly these products).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

#include "bench_util.h"
#include "kernels/cpu/gemm.h"
#include "model/model_spec.h"
#include "train/arena.h"

namespace eth::bench {

using Trans = eth::cpu::Trans;

struct Gemm {
  const char* what;
  Trans ta, tb;
  std::int64_t M, N, K;
  std::int64_t count;  // calls per training step
  float beta;          // 1 where StageCompute accumulates (bias broadcast first, dW +=)
  double flops() const { return 2.0 * static_cast<double>(M * N * K); }
};

// The matmuls of one step as StageCompute issues them (forward, then the two backward
// products), N = B * T rows. Attention's per-head products are not included (the model FLOPs
// below include them, so the ratio slightly favours the GEMM side).
inline std::vector<Gemm> step_gemms(const eth::ModelSpec& m, std::int64_t n) {
  const std::int64_t C = m.hidden, F = m.ffn, V = m.vocab, L = m.layers;
  std::vector<Gemm> g;
  auto nt = [&](const char* w, std::int64_t oc, std::int64_t c, std::int64_t count, float bias) {
    g.push_back({w, Trans::No, Trans::Yes, n, oc, c, count, bias});  // out = inp W^T (+ bias)
    g.push_back({w, Trans::No, Trans::No, n, c, oc, count, 0.0f});   // dinp = dout W
    g.push_back({w, Trans::Yes, Trans::No, oc, c, n, count, 1.0f});  // dW += dout^T inp
  };
  auto nn = [&](const char* w, std::int64_t c, std::int64_t oc, std::int64_t count) {
    g.push_back({w, Trans::No, Trans::No, n, oc, c, count, 1.0f});   // out = bias + inp W
    g.push_back({w, Trans::No, Trans::Yes, n, c, oc, count, 0.0f});  // dinp = dout W^T
    g.push_back({w, Trans::Yes, Trans::No, c, oc, n, count, 1.0f});  // dW += inp^T dout
  };
  nt("qkv", 3 * C, C, L, 1.0f);
  nn("proj", C, C, L);
  nt("fc", F, C, L, 1.0f);
  nn("fcproj", F, C, L);
  nt("lm_head", V, C, 1, 0.0f);
  return g;
}

// The step's GEMMs on operands from one pre-faulted arena (mapped once), timed two ways: as the
// step issues them, every call back to back (timed like a step; run between ETH's steps so both
// meet the same machine load), and per shape (fastest single call of each, times its count: an
// optimistic figure on a shared machine, where each shape gets its own luckiest moment).
class GemmBench {
 public:
  explicit GemmBench(std::vector<Gemm> gemms) : gemms_(std::move(gemms)) {
    for (const Gemm& g : gemms_) most_ = std::max({most_, g.M * g.K, g.K * g.N, g.M * g.N});
    arena_ = eth::Arena(3 * eth::arena_bytes<float>(most_));
    a_ = arena_.take<float>(most_);
    b_ = arena_.take<float>(most_);
    c_ = arena_.take<float>(most_);
    for (std::int64_t i = 0; i < most_; ++i) {
      a_[i] = b_[i] = c_[i] = 1e-3f * static_cast<float>(i % 97);
    }
    for (const Gemm& g : gemms_) flops_ += g.flops() * static_cast<double>(g.count);
  }
  double flops() const { return flops_; }
  std::int64_t calls() const {
    std::int64_t n = 0;
    for (const Gemm& g : gemms_) n += g.count;
    return n;
  }

  double sequence_s() {
    const auto t0 = std::chrono::steady_clock::now();
    for (const Gemm& g : gemms_) {
      for (std::int64_t k = 0; k < g.count; ++k) call(g);
    }
    return seconds_since(t0);
  }

  double per_shape_s(int reps) {
    double total = 0;
    for (const Gemm& g : gemms_) {
      double best = 1e30;
      for (int r = 0; r < reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        call(g);
        best = std::min(best, seconds_since(t0));
      }
      total += best * static_cast<double>(g.count);
    }
    return total;
  }

 private:
  void call(const Gemm& g) {
    const std::int64_t lda = g.ta == Trans::No ? g.K : g.M;
    const std::int64_t ldb = g.tb == Trans::No ? g.N : g.K;
    eth::cpu::sgemm(g.ta, g.tb, g.M, g.N, g.K, 1.0f, a_, lda, b_, ldb, g.beta, c_, g.N);
  }

  std::vector<Gemm> gemms_;
  std::int64_t most_ = 0;
  eth::Arena arena_;
  float *a_ = nullptr, *b_ = nullptr, *c_ = nullptr;
  double flops_ = 0;
};

}  // namespace eth::bench
