// A one-block GPT's forward and backward composed from the CUDA kernels against the same
// composition of the CPU bf16 kernels (the kernel sequence of train/stage_compute.cpp without
// dropout or tensor parallelism): the loss and every parameter gradient. The per-kernel tests
// (cuda_vs_reference_test.cpp) check each kernel's numerics; this checks what a GPU stage needs
// on top: the kernels agree on layouts (head-interleaved qkv, the two matmul storage forms) and
// on the accumulation conventions (parameter gradients +=, the residual stream +=), and the
// fused attention's backward fits the chain where the CPU runs scores -> softmax -> P V.
//
// Tolerance: both sides round to bf16 at about 15 places along the chain (each stored
// activation and activation gradient), at different places (the GPU never rounds P) and with
// different fp32 summation orders. Each rounding adds at most 2^-9 relative error, independently,
// so the two sides differ by about sqrt(2 * 15) 2^-9 ~ 2^-6.5 in relative norm; the bound is
// 2^-5. A layout or convention mistake moves a whole tensor (relative error near 1).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "bf16_check.h"
#include "kernels/cpu/bf16/attention.h"
#include "kernels/cpu/bf16/crossentropy.h"
#include "kernels/cpu/bf16/encoder.h"
#include "kernels/cpu/bf16/layernorm.h"
#include "kernels/cpu/bf16/matmul.h"
#include "kernels/cpu/bf16/pointwise.h"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/runtime.h"

namespace eth::cuda_block_test {
namespace {

using test::VecB;
using test::VecF;

constexpr std::int64_t B = 2, T = 40, C = 64, NH = 2, F = 4 * C, V = 97, N = B * T;
constexpr auto sz = [](std::int64_t n) { return static_cast<std::size_t>(n); };

// The parameters (bf16 compute copies) and the parameter gradients (fp32) of the block model.
struct Params {
  VecB wte, wpe, ln1w, ln1b, qkvw, qkvb, projw, projb, ln2w, ln2b, fcw, fcb, fcpw, fcpb, lnfw,
      lnfb, lmw;
};
struct Grads {
  double loss = 0;
  std::vector<std::pair<std::string, VecF>> tensors;
};

struct CpuSide {
  template <typename T>
  using Buf = std::vector<T>;
  template <typename T>
  static Buf<T> make(const std::vector<T>& h) { return h; }
  template <typename T>
  static Buf<T> zeros(std::int64_t n) { return Buf<T>(sz(n), T{}); }
  template <typename T>
  static std::vector<T> get(const Buf<T>& b) { return b; }
  // The CPU's attention chain, with its saved P and workspaces.
  struct Attention {
    Buf<Bf16> P = zeros<Bf16>(B * NH * T * T), dP = zeros<Bf16>(B * NH * T * T);
    const cpu::bf16::QkvLayout L = cpu::bf16::QkvLayout::head_interleaved(C, NH);
    void forward(Bf16* out, const Bf16* qkv) {
      cpu::bf16::attention_probs_forward(P.data(), qkv, L, B, T, C, NH);
      cpu::bf16::attention_av_forward(out, P.data(), qkv, L, B, T, C, NH);
    }
    void backward(Bf16* dqkv, const Bf16* dout, const Bf16* qkv) {
      cpu::bf16::attention_av_backward(dP.data(), dqkv, dout, P.data(), qkv, L, B, T, C, NH);
      cpu::bf16::attention_softmax_backward(dP.data(), dP.data(), P.data(), B, NH, T);
      cpu::bf16::attention_scores_backward(dqkv, dP.data(), qkv, L, B, T, C, NH);
    }
  };
  static constexpr auto encoder_forward = &cpu::bf16::encoder_forward;
  static constexpr auto encoder_backward = &cpu::bf16::encoder_backward;
  static constexpr auto layernorm_forward = &cpu::bf16::layernorm_forward;
  static constexpr auto layernorm_backward = &cpu::bf16::layernorm_backward;
  static constexpr auto matmul_nt_forward = &cpu::bf16::matmul_nt_forward;
  static constexpr auto matmul_nt_backward = &cpu::bf16::matmul_nt_backward;
  static constexpr auto matmul_nn_forward = &cpu::bf16::matmul_nn_forward;
  static constexpr auto matmul_nn_backward = &cpu::bf16::matmul_nn_backward;
  static constexpr auto gelu_forward = &cpu::bf16::gelu_forward;
  static constexpr auto gelu_backward = &cpu::bf16::gelu_backward;
  static constexpr auto residual_forward = &cpu::bf16::residual_forward;
  static constexpr auto residual_backward = &cpu::bf16::residual_backward;
  static constexpr auto crossentropy_forward = &cpu::bf16::crossentropy_forward;
  static constexpr auto crossentropy_backward = &cpu::bf16::crossentropy_backward;
};

struct GpuSide {
  template <typename T>
  using Buf = cuda::DeviceBuffer<T>;
  template <typename T>
  static Buf<T> make(const std::vector<T>& h) {
    Buf<T> d(h.size());
    cuda::copy_to_device(d.data(), h.data(), d.bytes());
    return d;
  }
  template <typename T>
  static Buf<T> zeros(std::int64_t n) {
    Buf<T> d(sz(n));
    d.zero();
    return d;
  }
  template <typename T>
  static std::vector<T> get(const Buf<T>& d) {
    cuda::synchronize();
    std::vector<T> h(d.size());
    cuda::copy_to_host(h.data(), d.data(), d.bytes());
    return h;
  }
  // The fused pair, with its saved log-sum-exp and workspace.
  struct Attention {
    Buf<float> lse = zeros<float>(B * NH * T), dsum = zeros<float>(B * NH * T);
    const cuda::AttnDropout none{};
    void forward(Bf16* out, const Bf16* qkv) {
      cuda::attention_forward(out, lse.data(), qkv, none, B, T, C, NH, NH);
    }
    void backward(Bf16* dqkv, const Bf16* dout, const Bf16* qkv) {
      cuda::attention_backward(dqkv, dsum.data(), dout, lse.data(), qkv, none, B, T, C, NH,
                               NH);
    }
  };
  static constexpr auto encoder_forward = &cuda::encoder_forward;
  static constexpr auto encoder_backward = &cuda::encoder_backward;
  static constexpr auto layernorm_forward = &cuda::layernorm_forward;
  static constexpr auto layernorm_backward = &cuda::layernorm_backward;
  static constexpr auto matmul_nt_forward = &cuda::matmul_nt_forward;
  static constexpr auto matmul_nt_backward = &cuda::matmul_nt_backward;
  static constexpr auto matmul_nn_forward = &cuda::matmul_nn_forward;
  static constexpr auto matmul_nn_backward = &cuda::matmul_nn_backward;
  static constexpr auto gelu_forward = &cuda::gelu_forward;
  static constexpr auto gelu_backward = &cuda::gelu_backward;
  static constexpr auto residual_forward = &cuda::residual_forward;
  static constexpr auto residual_backward = &cuda::residual_backward;
  static constexpr auto crossentropy_forward = &cuda::crossentropy_forward;
  static constexpr auto crossentropy_backward = &cuda::crossentropy_backward;
};

// Forward, loss and backward of embedding -> pre-norm block -> final norm -> LM head.
template <typename K>
Grads step(const Params& p, const std::vector<std::int32_t>& tokens,
           const std::vector<std::int32_t>& targets) {
  using A = typename K::template Buf<Bf16>;
  using G = typename K::template Buf<float>;
  const auto tok = K::make(tokens), tgt = K::make(targets);
  const A wte = K::make(p.wte), wpe = K::make(p.wpe), ln1w = K::make(p.ln1w),
          ln1b = K::make(p.ln1b), qkvw = K::make(p.qkvw), qkvb = K::make(p.qkvb),
          projw = K::make(p.projw), projb = K::make(p.projb), ln2w = K::make(p.ln2w),
          ln2b = K::make(p.ln2b), fcw = K::make(p.fcw), fcb = K::make(p.fcb),
          fcpw = K::make(p.fcpw), fcpb = K::make(p.fcpb), lnfw = K::make(p.lnfw),
          lnfb = K::make(p.lnfb), lmw = K::make(p.lmw);
  auto za = [](std::int64_t n) { return K::template zeros<Bf16>(n); };
  auto zg = [](std::int64_t n) { return K::template zeros<float>(n); };
  A x = za(N * C), ln1 = za(N * C), qkv = za(N * 3 * C), att = za(N * C), proj = za(N * C),
    x2 = za(N * C), ln2 = za(N * C), fc = za(N * F), g = za(N * F), fcp = za(N * C),
    x3 = za(N * C), lnf = za(N * C), logits = za(N * V);
  G m1 = zg(N), r1 = zg(N), m2 = zg(N), r2 = zg(N), mf = zg(N), rf = zg(N), losses = zg(N),
    lse = zg(N);
  typename K::Attention attn;

  K::encoder_forward(x.data(), tok.data(), wte.data(), wpe.data(), B, T, C, V);
  K::layernorm_forward(ln1.data(), m1.data(), r1.data(), x.data(), ln1w.data(), ln1b.data(), N, C);
  K::matmul_nt_forward(qkv.data(), ln1.data(), qkvw.data(), qkvb.data(), N, C, 3 * C);
  attn.forward(att.data(), qkv.data());
  K::matmul_nn_forward(proj.data(), att.data(), projw.data(), projb.data(), N, C, C);
  K::residual_forward(x2.data(), x.data(), proj.data(), N * C);
  K::layernorm_forward(ln2.data(), m2.data(), r2.data(), x2.data(), ln2w.data(), ln2b.data(), N,
                       C);
  K::matmul_nt_forward(fc.data(), ln2.data(), fcw.data(), fcb.data(), N, C, F);
  K::gelu_forward(g.data(), fc.data(), N * F);
  K::matmul_nn_forward(fcp.data(), g.data(), fcpw.data(), fcpb.data(), N, F, C);
  K::residual_forward(x3.data(), x2.data(), fcp.data(), N * C);
  K::layernorm_forward(lnf.data(), mf.data(), rf.data(), x3.data(), lnfw.data(), lnfb.data(), N,
                       C);
  K::matmul_nt_forward(logits.data(), lnf.data(), lmw.data(), nullptr, N, C, V);
  Grads out;
  const double scale = 1.0 / static_cast<double>(N);
  K::crossentropy_forward(&out.loss, losses.data(), lse.data(), logits.data(), tgt.data(), scale,
                          N, V);

  G dwte = zg(V * C), dwpe = zg(T * C), dln1w = zg(C), dln1b = zg(C), dqkvw = zg(3 * C * C),
    dqkvb = zg(3 * C), dprojw = zg(C * C), dprojb = zg(C), dln2w = zg(C), dln2b = zg(C),
    dfcw = zg(F * C), dfcb = zg(F), dfcpw = zg(F * C), dfcpb = zg(C), dlnfw = zg(C),
    dlnfb = zg(C), dlmw = zg(V * C);
  A dlnf = za(N * C), dx3 = za(N * C), dx2 = za(N * C), dx = za(N * C), dfcp = za(N * C),
    dg = za(N * F), dfc = za(N * F), dln2 = za(N * C), dproj = za(N * C), datt = za(N * C),
    dqkv = za(N * 3 * C), dln1 = za(N * C);
  K::crossentropy_backward(logits.data(), logits.data(), lse.data(), tgt.data(), scale, N, V);
  K::matmul_nt_backward(dlnf.data(), dlmw.data(), nullptr, logits.data(), lnf.data(), lmw.data(),
                        N, C, V);
  K::layernorm_backward(dx3.data(), dlnfw.data(), dlnfb.data(), dlnf.data(), x3.data(),
                        lnfw.data(), mf.data(), rf.data(), N, C);
  K::residual_backward(dx2.data(), dfcp.data(), dx3.data(), N * C);
  K::matmul_nn_backward(dg.data(), dfcpw.data(), dfcpb.data(), dfcp.data(), g.data(), fcpw.data(),
                        N, F, C);
  K::gelu_backward(dfc.data(), dg.data(), fc.data(), N * F);
  K::matmul_nt_backward(dln2.data(), dfcw.data(), dfcb.data(), dfc.data(), ln2.data(), fcw.data(),
                        N, C, F);
  K::layernorm_backward(dx2.data(), dln2w.data(), dln2b.data(), dln2.data(), x2.data(),
                        ln2w.data(), m2.data(), r2.data(), N, C);
  K::residual_backward(dx.data(), dproj.data(), dx2.data(), N * C);
  K::matmul_nn_backward(datt.data(), dprojw.data(), dprojb.data(), dproj.data(), att.data(),
                        projw.data(), N, C, C);
  attn.backward(dqkv.data(), datt.data(), qkv.data());
  K::matmul_nt_backward(dln1.data(), dqkvw.data(), dqkvb.data(), dqkv.data(), ln1.data(),
                        qkvw.data(), N, C, 3 * C);
  K::layernorm_backward(dx.data(), dln1w.data(), dln1b.data(), dln1.data(), x.data(), ln1w.data(),
                        m1.data(), r1.data(), N, C);
  K::encoder_backward(dwte.data(), dwpe.data(), dx.data(), tok.data(), B, T, C, V);

  const std::pair<const char*, const G*> named[] = {
      {"wte", &dwte},   {"wpe", &dwpe},     {"ln1w", &dln1w},   {"ln1b", &dln1b},
      {"qkvw", &dqkvw}, {"qkvb", &dqkvb},   {"projw", &dprojw}, {"projb", &dprojb},
      {"ln2w", &dln2w}, {"ln2b", &dln2b},   {"fcw", &dfcw},     {"fcb", &dfcb},
      {"fcpw", &dfcpw}, {"fcpb", &dfcpb},   {"lnfw", &dlnfw},   {"lnfb", &dlnfb},
      {"lmw", &dlmw}};
  for (const auto& [name, buf] : named) out.tensors.emplace_back(name, K::get(*buf));
  return out;
}

TEST(CudaBlock, LossAndEveryGradientMatchTheCpuBf16Kernels) {
  std::mt19937_64 gen(60);
  auto w = [&](std::int64_t n, double s) {
    return test::to_bf16(test::random_bf16_vec(gen, sz(n), -s, s));
  };
  auto near1 = [&](std::int64_t n) {
    return test::to_bf16(test::random_bf16_vec(gen, sz(n), 0.8, 1.2));
  };
  Params p;
  p.wte = w(V * C, 0.5), p.wpe = w(T * C, 0.1), p.ln1w = near1(C), p.ln1b = w(C, 0.1);
  p.qkvw = w(3 * C * C, 0.2), p.qkvb = w(3 * C, 0.1), p.projw = w(C * C, 0.1);
  p.projb = w(C, 0.1), p.ln2w = near1(C), p.ln2b = w(C, 0.1), p.fcw = w(F * C, 0.1);
  p.fcb = w(F, 0.1), p.fcpw = w(F * C, 0.05), p.fcpb = w(C, 0.1), p.lnfw = near1(C);
  p.lnfb = w(C, 0.1), p.lmw = w(V * C, 0.2);
  const auto tokens = test::random_ids(gen, sz(N), V), targets = test::random_ids(gen, sz(N), V);

  // The CPU side first, also without a GPU: its kernels' own checks (shapes, token ids) then
  // vet this test's wiring on every CI run.
  const Grads cpu = step<CpuSide>(p, tokens, targets);
  if (cuda::device_count() == 0) {
    GTEST_SKIP() << "no GPU here: " << cuda::unavailable_reason();
  }
  const Grads gpu = step<GpuSide>(p, tokens, targets);
  EXPECT_NEAR(gpu.loss, cpu.loss, std::ldexp(1.0, -7) * std::abs(cpu.loss));
  ASSERT_EQ(gpu.tensors.size(), cpu.tensors.size());
  const double bound = std::ldexp(1.0, -5);
  for (std::size_t t = 0; t < cpu.tensors.size(); ++t) {
    const VecF& want = cpu.tensors[t].second;
    const VecF& got = gpu.tensors[t].second;
    ASSERT_EQ(got.size(), want.size());
    double diff = 0, norm = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      const double d = static_cast<double>(got[i]) - want[i];
      diff += d * d;
      norm += static_cast<double>(want[i]) * want[i];
    }
    ASSERT_GT(norm, 0) << cpu.tensors[t].first << ": the CPU gradient is zero";
    EXPECT_LE(std::sqrt(diff / norm), bound) << cpu.tensors[t].first;  // NaN fails too
  }
}

}  // namespace
}  // namespace eth::cuda_block_test
