// The embedding (cpu/encoder.cpp: token and position lookup, and the gradients scattered back)
// against the double reference, fp32 and bf16 storage.
// fp32 kernels: |got - want| <= atol + rtol |want| with rtol = 4 sqrt(K) eps_float for a
// reduction of length K and atol = rtol rms(want) (kernel_check.h's expect_reduction).
// bf16 kernels: bf16_check.h's bound, 2^-8 |want| + (1 + 2^-8) tol32 (|want| + rms(want)); their
// fp32 outputs (parameter gradients, statistics, losses) tol32 alone.
// "=" outputs start as NaN (so an unwritten element fails), "+=" outputs from the same random
// values on both sides.
#include <gtest/gtest.h>

#include <random>

#include "bf16_check.h"
#include "kernel_check.h"
#include "kernels/cpu/bf16/encoder.h"
#include "kernels/cpu/encoder.h"
#include "kernels/reference/encoder.h"

namespace eth::test::encoder_test {
namespace {

// The shapes of every kernel-against-reference test (T > 64 exercises the attention row blocks;
// hs = C / NH = 16).
constexpr std::int64_t B = 2, T = 80, C = 48, NH = 3, V = 97, F = 4 * C, N = B * T;
constexpr auto sz = [](std::int64_t n) { return static_cast<std::size_t>(n); };

TEST(CpuVsReference, Encoder) {
  std::mt19937_64 gen(21);
  const Vec wte = random_vec(gen, sz(V * C)), wpe = random_vec(gen, sz(T * C));
  const auto tokens = test::random_ids(gen, sz(N), V);
  Vec out(sz(N * C));
  ref::encoder_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C, V);
  VecF outf = nan_vec(out.size());
  cpu::encoder_forward(outf.data(), tokens.data(), to_float(wte).data(), to_float(wpe).data(), B,
                       T, C, V);
  expect_close("out", outf, out, 0.0, kFloatEps);

  const Vec dout = random_vec(gen, sz(N * C));
  Vec dwte = random_vec(gen, wte.size()), dwpe = random_vec(gen, wpe.size());
  VecF dwtef = to_float(dwte), dwpef = to_float(dwpe);
  ref::encoder_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), B, T, C, V);
  cpu::encoder_backward(dwtef.data(), dwpef.data(), to_float(dout).data(), tokens.data(), B, T, C,
                        V);
  expect_reduction("dwte", dwtef, dwte, N);
  expect_reduction("dwpe", dwpef, dwpe, B);
}

TEST(Bf16VsReference, Encoder) {
  std::mt19937_64 gen(46);
  const Vec wte = random_bf16_vec(gen, sz(V * C)), wpe = random_bf16_vec(gen, sz(T * C));
  const auto tokens = test::random_ids(gen, sz(N), V);
  Vec out(sz(N * C));
  ref::encoder_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C, V);
  VecB outb = nan_bf16(out.size());
  cpu::bf16::encoder_forward(outb.data(), tokens.data(), to_bf16(wte).data(), to_bf16(wpe).data(),
                             B, T, C, V);
  expect_bf16_close("out", outb, out, kFloatEps);

  const Vec dout = random_bf16_vec(gen, sz(N * C));
  VecF dwtef = to_float(random_vec(gen, wte.size())), dwpef = to_float(random_vec(gen, wpe.size()));
  Vec dwte = to_double(dwtef), dwpe = to_double(dwpef);
  ref::encoder_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), B, T, C, V);
  cpu::bf16::encoder_backward(dwtef.data(), dwpef.data(), to_bf16(dout).data(), tokens.data(), B,
                              T, C, V);
  expect_fp32_close("dwte", dwtef, dwte, reduction_tol(N));
  expect_fp32_close("dwpe", dwpef, dwpe, reduction_tol(B));
}

}  // namespace
}  // namespace eth::test::encoder_test
