// The device kernels of Llama blocks (device_kernels.inc: rmsnorm, rope, swiglu, and the
// embedding without a position table) against the double references, in the bf16 harness
// (bf16_check.h), written once over a device Api (kernels/cuda/api.h CudaApi,
// kernels/emulated/api.h EmulatedApi): tests/kernels/cuda_vs_reference_test.cpp runs them on a
// GPU, emulated_kernels_test.cpp on the emulated device. Inputs are bf16-representable, "="
// outputs start as NaN, "+=" outputs from the same random values on both sides.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "bf16_check.h"
#include "kernels/reference/encoder.h"
#include "kernels/reference/rmsnorm.h"
#include "kernels/reference/rope.h"
#include "kernels/reference/swiglu.h"

namespace eth::test {

template <class Api>
struct OnDevice {
  template <typename T>
  using Buf = typename Api::template DeviceBuffer<T>;

  template <typename T>
  static Buf<T> up(const std::vector<T>& host) {
    Buf<T> d(host.size());
    Api::copy_to_device(d.data(), host.data(), d.bytes());
    return d;
  }
  template <typename T>
  static std::vector<T> down(const Buf<T>& d) {
    Api::synchronize();
    std::vector<T> host(d.size());
    Api::copy_to_host(host.data(), d.data(), d.bytes());
    return host;
  }
};

inline std::size_t usz(std::int64_t n) { return static_cast<std::size_t>(n); }

template <class Api>
void check_rmsnorm_on_device() {
  using D = OnDevice<Api>;
  std::mt19937_64 gen(71);
  const std::int64_t N = 37, C = 300;  // C past a block of 256 threads, not a multiple of 32
  const float eps = 1e-5f;
  const Vec inp = random_bf16_vec(gen, usz(N * C), -3, 3), w = random_bf16_vec(gen, usz(C));
  const Vec dout = random_bf16_vec(gen, usz(N * C)), dinp0 = random_bf16_vec(gen, usz(N * C));
  const Vec dw0 = random_vec(gen, usz(C));
  const auto di = D::up(to_bf16(inp)), dwt = D::up(to_bf16(w)), ddout = D::up(to_bf16(dout));
  auto out = D::up(nan_bf16(usz(N * C))), ddinp = D::up(to_bf16(dinp0));
  auto rstd = D::up(nan_vec(usz(N))), ddw = D::up(to_float(dw0));
  Api::rmsnorm_forward(out.data(), rstd.data(), di.data(), dwt.data(), eps, N, C);
  Api::rmsnorm_backward(ddinp.data(), ddw.data(), ddout.data(), di.data(), dwt.data(),
                        rstd.data(), N, C);
  Vec wout(usz(N * C)), wrstd(usz(N)), wdinp = dinp0, wdw = to_double(to_float(dw0));
  ref::rmsnorm_forward(wout.data(), wrstd.data(), inp.data(), w.data(), eps, N, C);
  ref::rmsnorm_backward(wdinp.data(), wdw.data(), dout.data(), inp.data(), w.data(),
                        wrstd.data(), N, C);
  expect_bf16_close("rmsnorm out", D::down(out), wout, reduction_tol(C));
  expect_fp32_close("rmsnorm rstd", D::down(rstd), wrstd, reduction_tol(C));
  expect_bf16_close("rmsnorm dinp", D::down(ddinp), wdinp, reduction_tol(C));
  expect_fp32_close("rmsnorm dweight", D::down(ddw), wdw, reduction_tol(N * 4));
}

// Forward on qkv and backward on a gradient of the same shape, multi-head and grouped (the q
// and k heads turned, the v heads untouched: the reference leaves them as they were).
template <class Api>
void check_rope_on_device() {
  using D = OnDevice<Api>;
  struct Case {
    std::int64_t B, T, NH, NKV, hd;
  };
  for (const Case& k : {Case{2, 50, 4, 4, 64}, Case{1, 70, 6, 2, 16}, Case{2, 9, 4, 1, 128},
                        Case{1, 1500, 2, 1, 8}}) {
    SCOPED_TRACE("NH=" + std::to_string(k.NH) + " NKV=" + std::to_string(k.NKV) +
                 " hd=" + std::to_string(k.hd) + " T=" + std::to_string(k.T));
    std::mt19937_64 gen(72);
    const float theta = 10000.0f;
    const std::int64_t n = k.B * k.T * (k.NH + 2 * k.NKV) * k.hd;
    Vec qkv = random_bf16_vec(gen, usz(n), -2, 2), dqkv = random_bf16_vec(gen, usz(n));
    auto dq = D::up(to_bf16(qkv)), dg = D::up(to_bf16(dqkv));
    Api::rope_forward(dq.data(), k.B, k.T, k.NH, k.NKV, k.hd, theta);
    Api::rope_backward(dg.data(), k.B, k.T, k.NH, k.NKV, k.hd, theta);
    ref::rope_forward(qkv.data(), k.B, k.T, k.NH, k.NKV, k.hd, theta);
    ref::rope_backward(dqkv.data(), k.B, k.T, k.NH, k.NKV, k.hd, theta);
    // Each output is a c - b s: two products and a sum in fp32, c and s rounded to float once.
    expect_bf16_close("rope forward", D::down(dq), qkv, reduction_tol(4));
    expect_bf16_close("rope backward", D::down(dg), dqkv, reduction_tol(4));
  }
}

template <class Api>
void check_swiglu_on_device() {
  using D = OnDevice<Api>;
  std::mt19937_64 gen(73);
  const std::int64_t N = 33, F = 100;
  const Vec gate = random_bf16_vec(gen, usz(N * F), -8, 8), upv = random_bf16_vec(gen, usz(N * F));
  const Vec dout = random_bf16_vec(gen, usz(N * F));
  const auto dgt = D::up(to_bf16(gate)), dup_in = D::up(to_bf16(upv));
  const auto ddout = D::up(to_bf16(dout));
  auto out = D::up(nan_bf16(usz(N * F))), dgate = D::up(nan_bf16(usz(N * F)));
  auto dup = D::up(nan_bf16(usz(N * F)));
  Api::swiglu_forward(out.data(), dgt.data(), dup_in.data(), N, F);
  Api::swiglu_backward(dgate.data(), dup.data(), ddout.data(), dgt.data(), dup_in.data(), N, F);
  Vec wout(usz(N * F)), wdgate(usz(N * F)), wdup(usz(N * F));
  ref::swiglu_forward(wout.data(), gate.data(), upv.data(), N, F);
  ref::swiglu_backward(wdgate.data(), wdup.data(), dout.data(), gate.data(), upv.data(), N, F);
  // A few fp32 operations per element (exp, a division), as GELU's bound.
  expect_bf16_close("swiglu out", D::down(out), wout, reduction_tol(16));
  expect_bf16_close("swiglu dgate", D::down(dgate), wdgate, reduction_tol(16));
  expect_bf16_close("swiglu dup", D::down(dup), wdup, reduction_tol(16));
}

// No position table (wpe, dwpe null): out is the token rows exactly, dwte as with positions.
template <class Api>
void check_encoder_without_positions_on_device() {
  using D = OnDevice<Api>;
  std::mt19937_64 gen(74);
  const std::int64_t B = 2, T = 13, C = 40, V = 7;  // V small: tokens repeat
  std::vector<std::int32_t> tokens(usz(B * T));
  for (auto& t : tokens) t = static_cast<std::int32_t>(gen() % V);
  const Vec wte = random_bf16_vec(gen, usz(V * C)), dout = random_bf16_vec(gen, usz(B * T * C));
  const Vec dwte0 = random_vec(gen, usz(V * C));
  const auto dtok = D::up(tokens);
  const auto dwte_t = D::up(to_bf16(wte)), ddout = D::up(to_bf16(dout));
  auto out = D::up(nan_bf16(usz(B * T * C))), dwte = D::up(to_float(dwte0));
  Api::encoder_forward(out.data(), dtok.data(), dwte_t.data(), nullptr, B, T, C, V);
  Api::encoder_backward(dwte.data(), nullptr, ddout.data(), dtok.data(), B, T, C, V);
  Vec want(usz(B * T * C)), wdte = to_double(to_float(dwte0));
  ref::encoder_forward<double>(want.data(), tokens.data(), wte.data(), nullptr, B, T, C, V);
  ref::encoder_backward<double>(wdte.data(), nullptr, dout.data(), tokens.data(), B, T, C, V);
  EXPECT_TRUE(bf16_to_double(D::down(out)) == want) << "the token rows, bit for bit";
  expect_fp32_close("dwte", D::down(dwte), wdte, reduction_tol(B * T));
}

}  // namespace eth::test
