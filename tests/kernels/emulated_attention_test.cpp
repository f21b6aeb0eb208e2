// The emulated device's fused attention (kernels/emulated/attention.cpp) against the double
// reference chain scores -> softmax -> dropout (the CPU's masks) -> P V, in the harness of the
// bf16 kernels (bf16_check.h): out, lse and dqkv, with and without dropout, head sizes 8 to 128,
// sequence lengths that are no multiple of the key block; its dqkv against finite differences of
// the reference loss; its results independent of the thread count; and no T x T tensor.
// Grouped-query attention against the multi-head reference with the kv heads replicated: the
// same out and lse, dQ per head, and each kv head's dK, dV the sum of its copies' gradients.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "attention_gqa.h"
#include "bf16_check.h"
#include "kernels/cpu/threads.h"
#include "kernels/emulated/kernels.h"
#include "kernels/emulated/runtime.h"
#include "kernels/reference/attention.h"
#include "kernels/reference/pointwise.h"
#include "kernels/rng.h"

namespace eth {
namespace {

using emu::DeviceBuffer;
using test::expect_bf16_close;
using test::expect_fp32_close;
using test::nan_bf16;
using test::nan_vec;
using test::random_bf16_vec;
using test::reduction_tol;
using test::to_bf16;
using test::Vec;
using test::VecB;
using test::VecF;

constexpr auto sz = [](std::int64_t n) { return static_cast<std::size_t>(n); };

template <typename T>
DeviceBuffer<T> up(const std::vector<T>& host) {
  DeviceBuffer<T> d(host.size());
  emu::copy_to_device(d.data(), host.data(), d.bytes());
  return d;
}

template <typename T>
std::vector<T> down(const DeviceBuffer<T>& d) {
  emu::synchronize();
  std::vector<T> host(d.size());
  emu::copy_to_host(host.data(), d.data(), d.bytes());
  return host;
}

struct AttnCase {
  std::int64_t B, T, C, NH;
  float p;
  std::int64_t head0 = 0;  // a tp rank's first head: its masks are the model's from there
};

struct RefAttention {
  Vec out, lse, dqkv;
};

// The reference chain in double with the CPU's masks for heads [head0, head0 + NH).
RefAttention reference(const Vec& qkv, const Vec& dout, const emu::AttnDropout& drop,
                       std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH) {
  const std::int64_t nP = B * NH * T * T, N = B * T;
  Vec S(sz(nP)), P(sz(nP)), Pd(sz(nP)), dPd(sz(nP)), dP(sz(nP)), dS(sz(nP));
  RefAttention r{Vec(sz(N * C)), Vec(sz(B * NH * T)), Vec(sz(N * 3 * C), 0.0)};
  std::vector<std::uint8_t> mask(sz(nP), 1);
  if (drop.p > 0) {
    dropout_mask_fill(mask.data(), drop.stream, drop.p, drop.sample0, drop.head0 * T * T, B,
                      NH * T * T);
  }
  ref::attention_scores_forward(S.data(), qkv.data(), B, T, C, NH);
  ref::attention_softmax_forward(P.data(), S.data(), B, NH, T);
  ref::dropout_forward(Pd.data(), P.data(), mask.data(), drop.p, nP);
  ref::attention_av_forward(r.out.data(), Pd.data(), qkv.data(), B, T, C, NH);
  ref::attention_av_backward(dPd.data(), r.dqkv.data(), dout.data(), Pd.data(), qkv.data(), B, T,
                             C, NH);
  ref::dropout_backward(dP.data(), dPd.data(), mask.data(), drop.p, nP);
  ref::attention_softmax_backward(dS.data(), dP.data(), P.data(), B, NH, T);
  ref::attention_scores_backward(r.dqkv.data(), dS.data(), qkv.data(), B, T, C, NH);
  for (std::int64_t row = 0; row < B * NH * T; ++row) {
    const std::int64_t t = row % T;
    double mx = -INFINITY, sum = 0;
    for (std::int64_t j = 0; j <= t; ++j) mx = std::max(mx, S[sz(row * T + j)]);
    for (std::int64_t j = 0; j <= t; ++j) sum += std::exp(S[sz(row * T + j)] - mx);
    r.lse[sz(row)] = mx + std::log(sum);
  }
  return r;
}

struct EmuAttention {
  VecB out;
  VecF lse;
  VecB dqkv;
  VecF dsum;
};

// NKV = 0: multi-head (NKV = NH), qkv (B,T,3C); else qkv (B,T,C + 2 NKV C/NH).
EmuAttention run_emulated(const Vec& qkv, const Vec& dout, const emu::AttnDropout& drop,
                          std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH,
                          std::int64_t NKV = 0) {
  const std::int64_t N = B * T;
  if (NKV == 0) NKV = NH;
  const auto dqkv_in = up(to_bf16(qkv)), ddout = up(to_bf16(dout));
  DeviceBuffer<Bf16> out = up(nan_bf16(sz(N * C))), dqkv = up(nan_bf16(qkv.size()));
  DeviceBuffer<float> lse = up(nan_vec(sz(B * NH * T))), dsum = up(nan_vec(sz(B * NH * T)));
  emu::attention_forward(out.data(), lse.data(), dqkv_in.data(), drop, B, T, C, NH, NKV);
  emu::attention_backward(dqkv.data(), dsum.data(), ddout.data(), lse.data(), dqkv_in.data(),
                          drop, B, T, C, NH, NKV);
  return {down(out), down(lse), down(dqkv), down(dsum)};
}

emu::AttnDropout dropout_of(const AttnCase& k) {
  return emu::AttnDropout{RngStream{77, 5, 2, RngOp::AttnDropout}, k.p, 3, k.head0};
}

void check_attention(const AttnCase& k) {
  const std::int64_t B = k.B, T = k.T, C = k.C, NH = k.NH, hs = C / NH, N = B * T;
  SCOPED_TRACE("B=" + std::to_string(B) + " T=" + std::to_string(T) + " hs=" +
               std::to_string(hs) + " p=" + std::to_string(k.p) + " head0=" +
               std::to_string(k.head0));
  std::mt19937_64 gen(51);
  const Vec qkv = random_bf16_vec(gen, sz(N * 3 * C), -2, 2);
  const Vec dout = random_bf16_vec(gen, sz(N * C));
  const emu::AttnDropout drop = dropout_of(k);
  const EmuAttention got = run_emulated(qkv, dout, drop, B, T, C, NH);
  const RefAttention want = reference(qkv, dout, drop, B, T, C, NH);
  // The CUDA kernels' bounds (cuda_vs_reference_test.cpp): P is never rounded to bf16.
  expect_bf16_close("out", got.out, want.out, reduction_tol(hs + 2 * T));
  expect_fp32_close("lse", got.lse, want.lse, reduction_tol(hs + T));
  expect_bf16_close("dqkv", got.dqkv, want.dqkv, reduction_tol(2 * (hs + 2 * T)));
}

TEST(EmulatedAttention, MatchesTheReferenceChain) {
  // T = 80, 70, 67, 100, 40: one key block and a partial one, or one partial block; T = 150
  // three blocks, the last partial. Head sizes 8, 16, 32, 64, 96 and 128; dropout off and on, and a tp
  // rank's heads (head0 = 2) drawing the model's masks for its heads.
  for (const AttnCase& c :
       {AttnCase{2, 80, 48, 3, 0.0f}, AttnCase{2, 80, 48, 3, 0.2f}, AttnCase{2, 67, 16, 2, 0.1f},
        AttnCase{1, 150, 64, 2, 0.15f, 2}, AttnCase{1, 100, 128, 2, 0.1f},
        AttnCase{1, 70, 192, 2, 0.1f},
        AttnCase{1, 40, 256, 2, 0.0f}, AttnCase{1, 40, 256, 2, 0.3f, 1}}) {
    check_attention(c);
  }
}

TEST(EmulatedAttention, DsumIsTheRowSumOfPTimesDP) {
  // dsum is workspace, but cuda::attention_backward documents what it holds: sum_t2 P dP.
  const std::int64_t B = 1, T = 37, C = 32, NH = 2;
  std::mt19937_64 gen(5);
  const Vec qkv = random_bf16_vec(gen, sz(B * T * 3 * C), -2, 2);
  const Vec dout = random_bf16_vec(gen, sz(B * T * C));
  const emu::AttnDropout drop = dropout_of(AttnCase{B, T, C, NH, 0.25f});
  const EmuAttention got = run_emulated(qkv, dout, drop, B, T, C, NH);
  // P and dP of the reference: dP = mask / (1 - p) * (dout V^T).
  const std::int64_t nP = B * NH * T * T;
  Vec S(sz(nP)), P(sz(nP)), Pd(sz(nP)), dPd(sz(nP)), dP(sz(nP)), unused(sz(B * T * 3 * C));
  std::vector<std::uint8_t> mask(sz(nP));
  dropout_mask_fill(mask.data(), drop.stream, drop.p, drop.sample0, 0, B, NH * T * T);
  ref::attention_scores_forward(S.data(), qkv.data(), B, T, C, NH);
  ref::attention_softmax_forward(P.data(), S.data(), B, NH, T);
  ref::dropout_forward(Pd.data(), P.data(), mask.data(), drop.p, nP);
  ref::attention_av_backward(dPd.data(), unused.data(), dout.data(), Pd.data(), qkv.data(), B, T,
                             C, NH);
  ref::dropout_backward(dP.data(), dPd.data(), mask.data(), drop.p, nP);
  Vec want(sz(B * NH * T), 0.0);
  for (std::int64_t r = 0; r < B * NH * T; ++r) {
    for (std::int64_t j = 0; j < T; ++j) want[sz(r)] += P[sz(r * T + j)] * dP[sz(r * T + j)];
  }
  expect_fp32_close("dsum", got.dsum, want, reduction_tol(C / NH + 2 * T));
}

TEST(EmulatedAttention, GradientMatchesFiniteDifferencesOfTheReferenceLoss) {
  // loss = <dout, attention(qkv)> through the double reference; its gradient in qkv by central
  // differences against the emulated backward (bf16: 2^-8 relative, so tol 2^-6).
  for (const float p : {0.0f, 0.2f}) {
    SCOPED_TRACE("p=" + std::to_string(p));
    const std::int64_t B = 1, T = 11, C = 16, NH = 2, nP = B * NH * T * T;
    std::mt19937_64 gen(9);
    Vec qkv = random_bf16_vec(gen, sz(B * T * 3 * C), -2, 2);
    const Vec dout = random_bf16_vec(gen, sz(B * T * C));
    const emu::AttnDropout drop = dropout_of(AttnCase{B, T, C, NH, p});
    const EmuAttention got = run_emulated(qkv, dout, drop, B, T, C, NH);
    std::vector<std::uint8_t> mask(sz(nP), 1);
    if (p > 0) dropout_mask_fill(mask.data(), drop.stream, p, drop.sample0, 0, B, NH * T * T);
    Vec S(sz(nP)), P(sz(nP)), Pd(sz(nP)), out(sz(B * T * C));
    const auto loss = [&]() -> long double {
      ref::attention_scores_forward(S.data(), qkv.data(), B, T, C, NH);
      ref::attention_softmax_forward(P.data(), S.data(), B, NH, T);
      ref::dropout_forward(Pd.data(), P.data(), mask.data(), p, nP);
      ref::attention_av_forward(out.data(), Pd.data(), qkv.data(), B, T, C, NH);
      return test::project(dout, out);
    };
    test::expect_gradient("dqkv", qkv, test::bf16_to_double(got.dqkv), loss, 1.0 / 64,
                          qkv.size());
  }
}

TEST(EmulatedAttention, ResultsDoNotDependOnTheThreadCount) {
  const std::int64_t B = 2, T = 90, C = 64, NH = 4;
  std::mt19937_64 gen(17);
  const Vec qkv = random_bf16_vec(gen, sz(B * T * 3 * C), -2, 2);
  const Vec dout = random_bf16_vec(gen, sz(B * T * C));
  const emu::AttnDropout drop = dropout_of(AttnCase{B, T, C, NH, 0.1f});
  const int threads = cpu::max_threads();
  cpu::set_max_threads(1);
  const EmuAttention one = run_emulated(qkv, dout, drop, B, T, C, NH);
  cpu::set_max_threads(std::max(threads, 3));
  const EmuAttention many = run_emulated(qkv, dout, drop, B, T, C, NH);
  // Grouped-query: backward runs over (batch, kv head), each summing its group's heads.
  const Vec gqa = random_bf16_vec(gen, sz(B * T * (C + 2 * 2 * C / NH)), -2, 2);
  cpu::set_max_threads(1);
  const EmuAttention one_g = run_emulated(gqa, dout, drop, B, T, C, NH, 2);
  cpu::set_max_threads(std::max(threads, 3));
  const EmuAttention many_g = run_emulated(gqa, dout, drop, B, T, C, NH, 2);
  cpu::set_max_threads(threads);
  EXPECT_TRUE(one.out == many.out);
  EXPECT_TRUE(one.lse == many.lse);
  EXPECT_TRUE(one.dqkv == many.dqkv);
  EXPECT_TRUE(one.dsum == many.dsum);
  EXPECT_TRUE(one_g.out == many_g.out);
  EXPECT_TRUE(one_g.dqkv == many_g.dqkv);
  EXPECT_TRUE(one_g.dsum == many_g.dsum);
}

// ---- grouped-query attention -------------------------------------------------------------

struct GqaCase {
  std::int64_t B, T, C, NH, NKV;
  float p;
  std::int64_t head0 = 0;
};

TEST(EmulatedAttention, GroupedQueryIsMultiHeadWithTheKvHeadsReplicated) {
  // Groups of 2 and 3 query heads, one kv head for all (multi-query), with dropout and a tp
  // rank's heads (head0: its masks are the model's from there); T past one key block.
  for (const GqaCase& k : {GqaCase{2, 67, 64, 4, 2, 0.0f}, GqaCase{1, 80, 96, 6, 2, 0.2f, 6},
                           GqaCase{2, 40, 64, 4, 1, 0.1f}, GqaCase{1, 33, 256, 4, 2, 0.0f}}) {
    const std::int64_t N = k.B * k.T, hs = k.C / k.NH, G = k.NH / k.NKV;
    SCOPED_TRACE("NH=" + std::to_string(k.NH) + " NKV=" + std::to_string(k.NKV) + " T=" +
                 std::to_string(k.T) + " hs=" + std::to_string(hs) + " p=" + std::to_string(k.p));
    std::mt19937_64 gen(61);
    const Vec qkv = random_bf16_vec(gen, sz(N * (k.C + 2 * k.NKV * hs)), -2, 2);
    const Vec dout = random_bf16_vec(gen, sz(N * k.C));
    const emu::AttnDropout drop = dropout_of(AttnCase{k.B, k.T, k.C, k.NH, k.p, k.head0});
    const EmuAttention got = run_emulated(qkv, dout, drop, k.B, k.T, k.C, k.NH, k.NKV);
    const RefAttention want =
        reference(test::replicate_kv(qkv, N, k.C, k.NH, k.NKV), dout, drop, k.B, k.T, k.C, k.NH);
    expect_bf16_close("out", got.out, want.out, reduction_tol(hs + 2 * k.T));
    expect_fp32_close("lse", got.lse, want.lse, reduction_tol(hs + k.T));
    // dK and dV add G heads' sums of up to T terms each.
    expect_bf16_close("dqkv", got.dqkv, test::fold_kv_grads(want.dqkv, N, k.C, k.NH, k.NKV),
                      reduction_tol(2 * (hs + 2 * G * k.T)));
  }
}

// Peak resident memory of this process, in bytes (Linux reports KiB).
double peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) * 1024.0;
}

// Forward and backward at T = 2048 in a fresh process (a death test's child), exiting 0 iff the
// peak resident memory grew by less than a quarter of one T x T fp32 tensor (16 MiB): a kernel
// that formed the scores or P of even one head would exceed it. Everything the kernels need
// besides that is O(T hs): about 0.5 MiB here.
void attention_without_a_t_by_t_tensor() {
  const std::int64_t B = 1, T = 2048, C = 16, NH = 2;
  std::mt19937_64 gen(3);
  const Vec qkv = random_bf16_vec(gen, sz(B * T * 3 * C), -2, 2);
  const Vec dout = random_bf16_vec(gen, sz(B * T * C));
  const emu::AttnDropout drop = dropout_of(AttnCase{B, T, C, NH, 0.1f});
  // Warm up (the OpenMP pool, the per-thread scratch at a small size) and upload first.
  (void)run_emulated(random_bf16_vec(gen, sz(8 * 3 * C)), random_bf16_vec(gen, sz(8 * C)), drop,
                     1, 8, C, NH);
  const auto dqkv_in = up(to_bf16(qkv)), ddout = up(to_bf16(dout));
  DeviceBuffer<Bf16> out(sz(B * T * C)), dqkv(sz(B * T * 3 * C));
  DeviceBuffer<float> lse(sz(B * NH * T)), dsum(sz(B * NH * T));
  out.zero();
  dqkv.zero();
  lse.zero();
  dsum.zero();
  const double before = peak_rss_bytes();
  emu::attention_forward(out.data(), lse.data(), dqkv_in.data(), drop, B, T, C, NH, NH);
  emu::attention_backward(dqkv.data(), dsum.data(), ddout.data(), lse.data(), dqkv_in.data(),
                          drop, B, T, C, NH, NH);
  const double grown = peak_rss_bytes() - before;
  std::exit(grown < 0.25 * static_cast<double>(T * T) * sizeof(float) ? 0 : 1);
}

TEST(EmulatedAttention, KeepsNoTByTTensor) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(attention_without_a_t_by_t_tensor(), ::testing::ExitedWithCode(0), "");
}

TEST(EmulatedAttention, RefusesWhatTheCudaKernelsRefuse) {
  DeviceBuffer<Bf16> qkv(3 * 2 * 258), out(2 * 258);
  DeviceBuffer<float> lse(2);
  const emu::AttnDropout none{};
  // Head size 129 (C = 258, NH = 2): above the CUDA kernels' 128.
  EXPECT_THROW(emu::attention_forward(out.data(), lse.data(), qkv.data(), none, 1, 1, 258, 2, 2),
               emu::EmuError);
  // C not a multiple of NH.
  EXPECT_THROW(emu::attention_forward(out.data(), lse.data(), qkv.data(), none, 1, 1, 10, 3, 3),
               emu::EmuError);
  emu::AttnDropout all = none;
  all.p = 1.0f;
  EXPECT_THROW(emu::attention_forward(out.data(), lse.data(), qkv.data(), all, 1, 1, 16, 2, 2),
               emu::EmuError);
  // kv heads that do not divide the query heads, or none.
  EXPECT_THROW(emu::attention_forward(out.data(), lse.data(), qkv.data(), none, 1, 1, 48, 6, 4),
               emu::EmuError);
  EXPECT_THROW(emu::attention_backward(qkv.data(), lse.data(), out.data(), lse.data(), qkv.data(),
                                       none, 1, 1, 48, 6, 0),
               emu::EmuError);
  // A host buffer where device memory belongs.
  std::vector<Bf16> host(16 * 3);
  EXPECT_THROW(emu::attention_forward(out.data(), lse.data(), host.data(), none, 1, 1, 16, 2, 2),
               emu::EmuError);
}

}  // namespace
}  // namespace eth
