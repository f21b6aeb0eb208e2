// kernel_bench: fp32 against bf16 at the kernel level, on gpt2-small's shapes (micro-batch 4,
// sequence 256, 2 threads by default), in one run: every GEMM of a training step (forward, dinp,
// dweight of qkv, proj, fc, fcproj and the LM head) through sgemm, through the bf16 GEMM on
// oneDNN's bf16 matmul (where the CPU can) and through the bf16 fp32-compute fallback; then one
// transformer block's forward + backward built from the fp32 kernels and from the bf16 kernel
// set, with the activation bytes each keeps; then the Llama kernels (RMSNorm, RoPE, SwiGLU: the
// double reference beside the fp32 and bf16 kernels; attention with grouped kv heads beside
// multi-head attention). Prints the CPU model, its extensions and the load
// average beside the figures: the machines are shared and vary between Zen 5 and Zen 3. Each
// figure is the best of --repeats rounds, fp32 and bf16 alternating within a round. Not a test.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench_util.h"
#include "kernels/bf16.h"
#include "kernels/cpu/bf16/convert.h"
#include "kernels/cpu/bf16/gemm.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/threads.h"
#include "kernels/reference/rmsnorm.h"
#include "kernels/reference/rope.h"
#include "kernels/reference/swiglu.h"
#include "train/kernel_set.h"
#include "train/kernel_set_bf16.h"

namespace {

using Clock = std::chrono::steady_clock;
using eth::Bf16;
using eth::cpu::Trans;
namespace bf16 = eth::cpu::bf16;

// Seconds of the fastest of `repeats` runs of each function, the functions alternating within
// a round so that a burst of someone else's load hits all of them.
std::vector<double> best_of(int repeats, const std::vector<std::function<void()>>& fns) {
  std::vector<double> best(fns.size(), 1e30);
  for (const auto& f : fns) f();  // warm-up: primitives, scratch, page faults
  for (int r = 0; r < repeats; ++r) {
    for (std::size_t i = 0; i < fns.size(); ++i) {
      const auto t0 = Clock::now();
      fns[i]();
      best[i] = std::min(best[i], std::chrono::duration<double>(Clock::now() - t0).count());
    }
  }
  return best;
}

// Uniform values in [-scale, scale), rounded to bf16 in both types, so an fp32 and a bf16
// consumer drawn from equally seeded generators start from the same numbers.
template <typename T>
std::vector<T> filled(std::size_t n, std::mt19937& gen, float scale) {
  std::uniform_real_distribution<float> d(-scale, scale);
  std::vector<T> v(n);
  for (auto& x : v) {
    if constexpr (std::is_same_v<T, Bf16>) {
      x = eth::bf16_from_float(d(gen));
    } else {
      x = eth::round_to_bf16(d(gen));
    }
  }
  return v;
}

float to_float(float x) { return x; }
float to_float(Bf16 x) { return eth::float_from_bf16(x); }

// rms(got - want) / rms(want): the relative size of the bf16 error.
template <typename T, typename U>
double relative_rms(const std::vector<T>& got, const std::vector<U>& want) {
  double err = 0, ref = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double w = to_float(want[i]), e = to_float(got[i]) - w;
    err += e * e, ref += w * w;
  }
  return std::sqrt(err / ref);
}

struct Gemm {
  const char* what;
  const char* op;  // fwd, dinp or dW
  Trans ta, tb;
  std::int64_t M, N, K;
  std::int64_t count;  // calls per training step
  bool dweight;        // fp32 output accumulated (beta 1) in both precisions
  bool bias;           // bf16 output with a bias (fp32: broadcast, then beta 1)
  double flops() const { return 2.0 * static_cast<double>(M) * static_cast<double>(N) * K; }
};

// The matmuls of one gpt2-small step as the stage computation issues them (cpu/matmul.cpp).
std::vector<Gemm> step_gemms(std::int64_t n, std::int64_t C, std::int64_t F, std::int64_t V,
                             std::int64_t L) {
  std::vector<Gemm> g;
  auto nt = [&](const char* w, std::int64_t oc, std::int64_t count, bool bias) {
    g.push_back({w, "fwd", Trans::No, Trans::Yes, n, oc, C, count, false, bias});  // inp W^T
    g.push_back({w, "dinp", Trans::No, Trans::No, n, C, oc, count, false, false});  // dout W
    g.push_back({w, "dW", Trans::Yes, Trans::No, oc, C, n, count, true, false});  // dout^T inp
  };
  auto nn = [&](const char* w, std::int64_t in, std::int64_t count) {
    g.push_back({w, "fwd", Trans::No, Trans::No, n, C, in, count, false, true});     // inp W
    g.push_back({w, "dinp", Trans::No, Trans::Yes, n, in, C, count, false, false});  // dout W^T
    g.push_back({w, "dW", Trans::Yes, Trans::No, in, C, n, count, true, false});     // inp^T dout
  };
  nt("qkv", 3 * C, L, true);
  nn("proj", C, L);
  nt("fc", F, L, true);
  nn("fcproj", F, L);
  nt("lm_head", V, 1, false);
  return g;
}

// GFLOP/s as a 10-wide column, "n/a" where the path does not run here.
std::string rate(bool ran, double flops, double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%10.1f", flops / seconds * 1e-9);
  return ran ? buf : "       n/a";
}

void bench_gemms(std::int64_t n, int repeats) {
  const std::int64_t C = 768, F = 3072, V = 50257, L = 12;
  const auto gemms = step_gemms(n, C, F, V, L);
  std::int64_t max_a = 0, max_b = 0, max_c = 0;
  for (const auto& g : gemms) {
    max_a = std::max(max_a, g.M * g.K);
    max_b = std::max(max_b, g.K * g.N);
    max_c = std::max(max_c, g.M * g.N);
  }
  std::mt19937 gen(1);
  const auto a32 = filled<float>(static_cast<std::size_t>(max_a), gen, 1.0f);
  const auto b32 = filled<float>(static_cast<std::size_t>(max_b), gen, 0.05f);
  const auto a16 = filled<Bf16>(static_cast<std::size_t>(max_a), gen, 1.0f);
  const auto b16 = filled<Bf16>(static_cast<std::size_t>(max_b), gen, 0.05f);
  const auto bias16 = filled<Bf16>(static_cast<std::size_t>(std::max(V, F)), gen, 0.1f);
  std::vector<float> c32(static_cast<std::size_t>(max_c), 0.0f);
  std::vector<Bf16> c16(static_cast<std::size_t>(max_c));
  const bool native = bf16::gemm_path_available(bf16::GemmPath::OneDnn);
  const bf16::GemmPath saved = bf16::gemm_path();

  std::printf("\nGEMMs of one step (N = B*T = %lld rows), GFLOP/s, best of %d\n",
              static_cast<long long>(n), repeats);
  std::printf("bf16: oneDNN bf16 matmul; bf16-fp32c: the fp32-compute fallback; x: calls per "
              "step;\nratio: fp32 time / bf16 time on the path this CPU takes by default\n");
  std::printf("%-8s %-5s %6s %6s %6s %4s | %8s %10s %10s | %6s\n", "matmul", "op", "M", "N", "K",
              "x", "fp32", "bf16", "bf16-fp32c", "ratio");
  double t32 = 0, t16 = 0, t16c = 0, t16d = 0, flops = 0;
  for (const auto& g : gemms) {
    const std::int64_t lda = g.ta == Trans::No ? g.K : g.M, ldb = g.tb == Trans::No ? g.N : g.K;
    const auto fp32 = [&] {
      eth::cpu::sgemm(g.ta, g.tb, g.M, g.N, g.K, 1.0f, a32.data(), lda, b32.data(), ldb,
                      g.dweight || g.bias ? 1.0f : 0.0f, c32.data(), g.N);
    };
    const auto on = [&](bf16::GemmPath path) {
      return [&, path] {
        bf16::set_gemm_path(path);
        if (g.dweight) {
          bf16::gemm(g.ta, g.tb, g.M, g.N, g.K, 1.0f, a16.data(), lda, b16.data(), ldb, 1.0f,
                     c32.data(), g.N);
        } else {
          bf16::gemm(g.ta, g.tb, g.M, g.N, g.K, 1.0f, a16.data(), lda, b16.data(), ldb,
                     g.bias ? bias16.data() : nullptr, c16.data(), g.N);
        }
      };
    };
    std::vector<std::function<void()>> fns{fp32, on(bf16::GemmPath::Fp32Compute)};
    if (native) fns.push_back(on(bf16::GemmPath::OneDnn));
    const auto best = best_of(repeats, fns);
    const double s32 = best[0], s16c = best[1], s16 = native ? best[2] : s16c;
    const double s16_default = saved == bf16::GemmPath::OneDnn ? s16 : s16c;
    const double c = static_cast<double>(g.count);
    t32 += c * s32, t16 += c * s16, t16c += c * s16c, t16d += c * s16_default;
    flops += c * g.flops();
    std::printf("%-8s %-5s %6lld %6lld %6lld %4lld | %8.1f %s %10.1f | %6.2f\n", g.what, g.op,
                static_cast<long long>(g.M), static_cast<long long>(g.N),
                static_cast<long long>(g.K), static_cast<long long>(g.count),
                g.flops() / s32 * 1e-9, rate(native, g.flops(), s16).c_str(),
                g.flops() / s16c * 1e-9, s32 / s16_default);
  }
  bf16::set_gemm_path(saved);
  std::printf("%-33s | %8.1f %s %10.1f | %6.2f   (step total: %.0f / %.0f / %.0f ms)\n",
              "all, weighted by calls per step", flops / t32 * 1e-9,
              rate(native, flops, t16).c_str(), flops / t16c * 1e-9, t32 / t16d, t32 * 1e3,
              t16 * 1e3, t16c * 1e3);
}

// One pre-norm GPT-2 block (no dropout), forward then backward, as StageCompute sequences it,
// on one kernel set; all buffers allocated once.
template <class K, typename Act, typename Par, typename Grd, typename Stat>
struct Block {
  std::int64_t B, T, C, NH, F, N;
  std::vector<Par> ln1w, ln1b, qkvw, qkvb, projw, projb, ln2w, ln2b, fcw, fcb, fcpw, fcpb;
  std::vector<Grd> g_ln1w, g_ln1b, g_qkvw, g_qkvb, g_projw, g_projb, g_ln2w, g_ln2b, g_fcw, g_fcb,
      g_fcpw, g_fcpb;
  // Saved for backward (what a slot holds) and the workspace.
  std::vector<Act> x, ln1, qkv, P, atty, x2, ln2, fch, gelu;
  std::vector<Stat> ln1_mean, ln1_rstd, ln2_mean, ln2_rstd;
  std::vector<Act> attproj, fcproj, out, dout, dx, dx2, dbranch, dF, dln, dqkv, dTT;

  Block(std::int64_t b, std::int64_t t, std::int64_t c, std::int64_t nh, std::uint32_t seed)
      : B(b), T(t), C(c), NH(nh), F(4 * c), N(b * t) {
    std::mt19937 gen(seed);
    const auto z = [](std::int64_t n) { return static_cast<std::size_t>(n); };
    const auto par = [&](std::int64_t n, float s) { return filled<Par>(z(n), gen, s); };
    ln1w = par(C, 1), ln1b = par(C, 0.1f), qkvw = par(3 * C * C, 0.02f), qkvb = par(3 * C, 0.02f);
    projw = par(C * C, 0.02f), projb = par(C, 0.02f), ln2w = par(C, 1), ln2b = par(C, 0.1f);
    fcw = par(F * C, 0.02f), fcb = par(F, 0.02f), fcpw = par(F * C, 0.02f), fcpb = par(C, 0.02f);
    for (auto* g : {&g_ln1w, &g_ln1b, &g_ln2w, &g_ln2b, &g_projb, &g_fcpb}) g->assign(z(C), Grd{});
    g_qkvw.assign(z(3 * C * C), Grd{}), g_qkvb.assign(z(3 * C), Grd{});
    g_projw.assign(z(C * C), Grd{}), g_fcw.assign(z(F * C), Grd{}), g_fcb.assign(z(F), Grd{});
    g_fcpw.assign(z(F * C), Grd{});
    x = filled<Act>(z(N * C), gen, 1.0f), dout = filled<Act>(z(N * C), gen, 1e-3f);
    for (auto* a : {&ln1, &atty, &x2, &ln2, &attproj, &fcproj, &out, &dx, &dx2, &dbranch, &dln}) {
      a->assign(z(N * C), Act{});
    }
    qkv.assign(z(3 * N * C), Act{}), dqkv.assign(z(3 * N * C), Act{});
    P.assign(z(B * NH * T * T), Act{}), dTT.assign(z(B * NH * T * T), Act{});
    fch.assign(z(N * F), Act{}), gelu.assign(z(N * F), Act{}), dF.assign(z(N * F), Act{});
    for (auto* s : {&ln1_mean, &ln1_rstd, &ln2_mean, &ln2_rstd}) s->assign(z(N), Stat{});
  }

  void zero_grads() {
    for (auto* g : {&g_ln1w, &g_ln1b, &g_qkvw, &g_qkvb, &g_projw, &g_projb, &g_ln2w, &g_ln2b,
                    &g_fcw, &g_fcb, &g_fcpw, &g_fcpb}) {
      std::fill(g->begin(), g->end(), Grd{});
    }
  }

  // Bytes a micro-batch slot keeps for this block (the saved tensors above).
  double saved_bytes() const {
    const double acts = static_cast<double>(x.size() + ln1.size() + qkv.size() + P.size() +
                                            atty.size() + x2.size() + ln2.size() + fch.size() +
                                            gelu.size());
    return acts * sizeof(Act) + 4.0 * static_cast<double>(N) * sizeof(Stat);
  }

  void forward() {
    K::layernorm_forward(ln1.data(), ln1_mean.data(), ln1_rstd.data(), x.data(), ln1w.data(),
                         ln1b.data(), N, C);
    K::matmul_nt_forward(qkv.data(), ln1.data(), qkvw.data(), qkvb.data(), N, C, 3 * C);
    if constexpr (requires { K::attention_probs_forward; }) {
      K::attention_probs_forward(P.data(), qkv.data(), B, T, C, NH, NH);
    } else {
      K::attention_scores_forward(P.data(), qkv.data(), B, T, C, NH, NH);
      K::attention_softmax_forward(P.data(), P.data(), B, NH, T);
    }
    K::attention_av_forward(atty.data(), P.data(), qkv.data(), B, T, C, NH, NH);
    K::matmul_nn_forward(attproj.data(), atty.data(), projw.data(), projb.data(), N, C, C);
    K::residual_forward(x2.data(), x.data(), attproj.data(), N * C);
    K::layernorm_forward(ln2.data(), ln2_mean.data(), ln2_rstd.data(), x2.data(), ln2w.data(),
                         ln2b.data(), N, C);
    K::matmul_nt_forward(fch.data(), ln2.data(), fcw.data(), fcb.data(), N, C, F);
    K::gelu_forward(gelu.data(), fch.data(), N * F);
    K::matmul_nn_forward(fcproj.data(), gelu.data(), fcpw.data(), fcpb.data(), N, F, C);
    K::residual_forward(out.data(), x2.data(), fcproj.data(), N * C);
  }

  void backward() {
    std::fill(dx.begin(), dx.end(), Act{});
    std::fill(dx2.begin(), dx2.end(), Act{});
    K::residual_backward(dx2.data(), dbranch.data(), dout.data(), N * C);
    K::matmul_nn_backward(dF.data(), g_fcpw.data(), g_fcpb.data(), dbranch.data(), gelu.data(),
                          fcpw.data(), N, F, C);
    K::gelu_backward(dF.data(), dF.data(), fch.data(), N * F);
    K::matmul_nt_backward(dln.data(), g_fcw.data(), g_fcb.data(), dF.data(), ln2.data(),
                          fcw.data(), N, C, F);
    K::layernorm_backward(dx2.data(), g_ln2w.data(), g_ln2b.data(), dln.data(), x2.data(),
                          ln2w.data(), ln2_mean.data(), ln2_rstd.data(), N, C);
    K::residual_backward(dx.data(), dbranch.data(), dx2.data(), N * C);
    K::matmul_nn_backward(dln.data(), g_projw.data(), g_projb.data(), dbranch.data(), atty.data(),
                          projw.data(), N, C, C);
    K::attention_av_backward(dTT.data(), dqkv.data(), dln.data(), P.data(), qkv.data(), B, T, C,
                             NH, NH);
    K::attention_softmax_backward(dTT.data(), dTT.data(), P.data(), B, NH, T);
    K::attention_scores_backward(dqkv.data(), dTT.data(), qkv.data(), B, T, C, NH, NH);
    K::matmul_nt_backward(dln.data(), g_qkvw.data(), g_qkvb.data(), dqkv.data(), ln1.data(),
                          qkvw.data(), N, C, 3 * C);
    K::layernorm_backward(dx.data(), g_ln1w.data(), g_ln1b.data(), dln.data(), x.data(),
                          ln1w.data(), ln1_mean.data(), ln1_rstd.data(), N, C);
  }

  // Model FLOPs of forward + backward (matmuls and attention products, backward twice forward).
  double flops() const {
    const double n = static_cast<double>(N), c = static_cast<double>(C);
    const double mm = 2 * n * c * (3 * c + c + 2 * static_cast<double>(F));
    const double att = 2 * 2 * static_cast<double>(B) * static_cast<double>(T) *
                       static_cast<double>(T) * c;
    return 3 * (mm + att);
  }
};

// The Llama family's row-wise kernels on a ~125M Llama's shapes (C 768, 12 query heads over 4
// kv heads of 64, SwiGLU width 2048): the double reference (the kernels' obviously-correct twin,
// serial), the fp32 and the bf16 kernels, forward and backward each; then the attention chain
// (probabilities, P V and their backward) under grouped-query attention beside multi-head
// attention of the same query heads, fp32 and bf16.
void bench_llama(std::int64_t B, std::int64_t T, int repeats) {
  const std::int64_t C = 768, NH = 12, NKV = 4, hd = 64, F = 2048, N = B * T;
  const std::int64_t W = C + 2 * NKV * hd;
  const float eps = 1e-5f, theta = 10000.0f;
  std::mt19937 gen(3);
  const auto z = [](std::int64_t n) { return static_cast<std::size_t>(n); };
  const auto f = [&](std::int64_t n) { return filled<float>(z(n), gen, 1.0f); };
  const std::vector<float> x = f(N * C), w = f(C), dy = f(N * C), q = f(N * W), g = f(N * F);
  const std::vector<float> u = f(N * F);
  const auto dbl = [](const std::vector<float>& v) {
    return std::vector<double>(v.begin(), v.end());
  };
  const auto b16 = [](const std::vector<float>& v) {
    std::vector<Bf16> o(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) o[i] = eth::bf16_from_float(v[i]);
    return o;
  };
  const auto xd = dbl(x), wd = dbl(w), dyd = dbl(dy), qd = dbl(q), gd = dbl(g), ud = dbl(u);
  const auto xb = b16(x), wb = b16(w), dyb = b16(dy), qb = b16(q), gb = b16(g), ub = b16(u);
  std::vector<double> od(z(N * F)), od2(z(N * F)), rd(z(N)), dwd(z(C)), qdw = qd;
  std::vector<float> of(z(N * F)), of2(z(N * F)), rf(z(N)), dwf(z(C)), qfw = q;
  std::vector<Bf16> ob(z(N * F)), ob2(z(N * F)), qbw = qb;
  struct Row {
    const char* what;
    std::function<void()> ref, fp32, bf16;
  };
  const std::vector<Row> rows{
      {"rmsnorm_forward",
       [&] { eth::ref::rmsnorm_forward(od.data(), rd.data(), xd.data(), wd.data(), eps, N, C); },
       [&] { eth::cpu::rmsnorm_forward(of.data(), rf.data(), x.data(), w.data(), eps, N, C); },
       [&] { bf16::rmsnorm_forward(ob.data(), rf.data(), xb.data(), wb.data(), eps, N, C); }},
      {"rmsnorm_backward",
       [&] {
         eth::ref::rmsnorm_backward(od.data(), dwd.data(), dyd.data(), xd.data(), wd.data(),
                                    rd.data(), N, C);
       },
       [&] {
         eth::cpu::rmsnorm_backward(of.data(), dwf.data(), dy.data(), x.data(), w.data(), rf.data(),
                                    N, C);
       },
       [&] {
         bf16::rmsnorm_backward(ob.data(), dwf.data(), dyb.data(), xb.data(), wb.data(), rf.data(),
                                N, C);
       }},
      {"rope_forward", [&] { eth::ref::rope_forward(qdw.data(), B, T, NH, NKV, hd, theta); },
       [&] { eth::cpu::rope_forward(qfw.data(), B, T, NH, NKV, hd, theta); },
       [&] { bf16::rope_forward(qbw.data(), B, T, NH, NKV, hd, theta); }},
      {"rope_backward", [&] { eth::ref::rope_backward(qdw.data(), B, T, NH, NKV, hd, theta); },
       [&] { eth::cpu::rope_backward(qfw.data(), B, T, NH, NKV, hd, theta); },
       [&] { bf16::rope_backward(qbw.data(), B, T, NH, NKV, hd, theta); }},
      {"swiglu_forward", [&] { eth::ref::swiglu_forward(od.data(), gd.data(), ud.data(), N, F); },
       [&] { eth::cpu::swiglu_forward(of.data(), g.data(), u.data(), N, F); },
       [&] { bf16::swiglu_forward(ob.data(), gb.data(), ub.data(), N, F); }},
      {"swiglu_backward",
       [&] {
         eth::ref::swiglu_backward(od.data(), od2.data(), gd.data(), gd.data(), ud.data(), N, F);
       },
       [&] {
         eth::cpu::swiglu_backward(of.data(), of2.data(), g.data(), g.data(), u.data(), N, F);
       },
       [&] {
         bf16::swiglu_backward(ob.data(), ob2.data(), gb.data(), gb.data(), ub.data(), N, F);
       }},
  };
  std::printf("\nLlama row-wise kernels, N=%lld (B=%lld T=%lld), C=%lld, %lld/%lld heads of "
              "%lld, F=%lld, best of %d\n",
              static_cast<long long>(N), static_cast<long long>(B), static_cast<long long>(T),
              static_cast<long long>(C), static_cast<long long>(NH), static_cast<long long>(NKV),
              static_cast<long long>(hd), static_cast<long long>(F), repeats);
  std::printf("%-18s %12s %10s %10s %12s\n", "kernel", "ref ms", "fp32 ms", "bf16 ms",
              "ref / fp32");
  for (const auto& r : rows) {
    const auto best = best_of(repeats, {r.ref, r.fp32, r.bf16});
    std::printf("%-18s %12.3f %10.3f %10.3f %11.1fx\n", r.what, best[0] * 1e3, best[1] * 1e3,
                best[2] * 1e3, best[0] / best[1]);
  }

  // Attention: GQA (NKV kv heads) beside MHA (NH), same query heads and T.
  const auto chain = [&](auto tag, std::int64_t nkv) {
    using K = decltype(tag);
    using A = typename K::Act;
    const std::int64_t width = C + 2 * nkv * hd, nP = B * NH * T * T;
    auto qkv = std::make_shared<std::vector<A>>(filled<A>(z(N * width), gen, 1.0f));
    auto d = std::make_shared<std::vector<A>>(filled<A>(z(N * C), gen, 1e-3f));
    auto P = std::make_shared<std::vector<A>>(z(nP)), dP = std::make_shared<std::vector<A>>(z(nP));
    auto out = std::make_shared<std::vector<A>>(z(N * C));
    auto dq = std::make_shared<std::vector<A>>(z(N * width));
    return std::function<void()>([=] {
      K::attention_probs_forward(P->data(), qkv->data(), B, T, C, NH, nkv);
      K::attention_av_forward(out->data(), P->data(), qkv->data(), B, T, C, NH, nkv);
      K::attention_av_backward(dP->data(), dq->data(), d->data(), P->data(), qkv->data(), B, T, C,
                               NH, nkv);
      K::attention_softmax_backward(dP->data(), dP->data(), P->data(), B, NH, T);
      K::attention_scores_backward(dq->data(), dP->data(), qkv->data(), B, T, C, NH, nkv);
    });
  };
  const auto best =
      best_of(repeats, {chain(eth::CpuKernels{}, NKV), chain(eth::CpuKernels{}, NH),
                        chain(eth::CpuBf16Kernels{}, NKV), chain(eth::CpuBf16Kernels{}, NH)});
  std::printf("attention fwd+bwd (ms): fp32 GQA %.2f, MHA %.2f; bf16 (%s) GQA %.2f, MHA %.2f\n",
              best[0] * 1e3, best[1] * 1e3,
              std::string(bf16::gemm_path_name(bf16::gemm_path())).c_str(), best[2] * 1e3,
              best[3] * 1e3);
}

void bench_block(std::int64_t B, std::int64_t T, int repeats) {
  // The same (bf16-representable) weights and inputs in both.
  Block<eth::CpuKernels, float, float, float, float> f32(B, T, 768, 12, 2);
  Block<eth::CpuBf16Kernels, Bf16, Bf16, float, float> b16(B, T, 768, 12, 2);
  const bool native = bf16::gemm_path_available(bf16::GemmPath::OneDnn);
  const bf16::GemmPath saved = bf16::gemm_path();
  const auto on = [&](bf16::GemmPath p) {
    return [&, p] {
      bf16::set_gemm_path(p);
      b16.forward();
      b16.backward();
    };
  };
  std::vector<std::function<void()>> fns{[&] {
                                           f32.forward();
                                           f32.backward();
                                         },
                                         on(bf16::GemmPath::Fp32Compute)};
  if (native) fns.push_back(on(bf16::GemmPath::OneDnn));
  const auto best = best_of(repeats, fns);
  bf16::set_gemm_path(saved);
  const double tokens = static_cast<double>(B * T);
  std::printf("\nOne gpt2-small block, forward + backward, B=%lld T=%lld, best of %d\n",
              static_cast<long long>(B), static_cast<long long>(T), repeats);
  std::printf("%-22s %9s %9s %10s %14s\n", "kernels", "ms", "GFLOP/s", "tokens/s", "saved MiB");
  const auto row = [&](const char* what, double s, double bytes) {
    std::printf("%-22s %9.2f %9.1f %10.0f %14.2f\n", what, s * 1e3, f32.flops() / s * 1e-9,
                tokens / s, bytes / (1 << 20));
  };
  row("fp32", best[0], f32.saved_bytes());
  row("bf16 fp32-compute", best[1], b16.saved_bytes());
  if (native) row("bf16 onednn-bf16", best[2], b16.saved_bytes());
  const double default16 = saved == bf16::GemmPath::OneDnn ? best[2] : best[1];
  // Accuracy of one bf16 step against the fp32 one on the same numbers (this CPU's path).
  f32.zero_grads(), b16.zero_grads();
  f32.forward(), f32.backward(), b16.forward(), b16.backward();
  std::printf("bf16 vs fp32, rms(diff) / rms(fp32): out %.2e, dx %.2e, d qkv_w %.2e, d fc_w "
              "%.2e, d ln1_w %.2e (2^-8 = %.2e)\n",
              relative_rms(b16.out, f32.out), relative_rms(b16.dx, f32.dx),
              relative_rms(b16.g_qkvw, f32.g_qkvw), relative_rms(b16.g_fcw, f32.g_fcw),
              relative_rms(b16.g_ln1w, f32.g_ln1w), 1.0 / 256);
  std::printf("bf16 (%s, this CPU's default) / fp32: speed %.2fx; fp32-compute path %.2fx; "
              "saved activation bytes %.2fx\n",
              std::string(bf16::gemm_path_name(saved)).c_str(), best[0] / default16,
              best[0] / best[1], b16.saved_bytes() / f32.saved_bytes());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fp32 vs bf16 kernels on gpt2-small shapes (GEMMs and one block)"};
  int threads = 2, repeats = 5;
  std::int64_t batch = 4, seq = 256;
  bool skip_gemms = false, skip_block = false, skip_llama = false;
  app.add_option("--threads", threads, "OpenMP threads")->check(CLI::PositiveNumber);
  app.add_option("--repeats", repeats, "rounds; the best of each is reported")
      ->check(CLI::PositiveNumber);
  app.add_option("--batch", batch, "micro-batch size B")->check(CLI::PositiveNumber);
  app.add_option("--seq", seq, "sequence length T")->check(CLI::PositiveNumber);
  app.add_flag("--skip-gemms", skip_gemms, "skip the GEMMs");
  app.add_flag("--skip-block", skip_block, "skip the gpt2-small block");
  app.add_flag("--skip-llama", skip_llama, "skip the Llama kernels (RMSNorm, RoPE, SwiGLU, GQA)");
  CLI11_PARSE(app, argc, argv);

  eth::cpu::set_max_threads(threads);
  const auto& cpu = eth::cpu::cpu_features();
  std::printf("cpu: %s\nextensions: %s\n", cpu.model.c_str(), cpu.extensions().c_str());
  std::printf("threads %d, fp32 GEMM %s, bf16 GEMM %s (oneDNN bf16 %s), conversions %s\n",
              threads, std::string(eth::cpu::gemm_library()).c_str(),
              std::string(bf16::gemm_path_name(bf16::gemm_path())).c_str(),
              bf16::gemm_path_available(bf16::GemmPath::OneDnn) ? "available" : "unavailable",
              std::string(bf16::convert_isa_name(bf16::convert_isa_for(cpu))).c_str());
  std::printf("default precision: %s\n",
              std::string(eth::cpu::precision_name(eth::cpu::default_precision(cpu))).c_str());
  std::printf("load average before: %.2f\n", eth::bench::load_1m());
  if (!skip_gemms) bench_gemms(batch * seq, repeats);
  if (!skip_block) bench_block(batch, seq, repeats);
  if (!skip_llama) bench_llama(batch, seq, repeats);
  std::printf("\nload average after: %.2f (figures taken above ~1 on 2 cores are suspect)\n",
              eth::bench::load_1m());
  return 0;
}
