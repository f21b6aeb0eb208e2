// Every CUDA kernel (kernels/cuda/kernels.h) against its double reference (kernels/reference/),
// in the harness of the bf16 CPU kernels (bf16_check.h): bf16-representable inputs, "=" outputs
// starting as NaN, "+=" outputs from the same random values on both sides, and the bf16 bound
// |got - want| <= 2^-8 |want| + (1 + 2^-8) tol32 (|want| + rms(want)). The dropout masks drawn
// on the device must be the CPU's bit for bit (philox.h), and the fused attention must match the
// reference chain scores -> softmax -> dropout -> P V with the CPU's masks (grouped-query: the
// multi-head chain with the kv heads replicated, attention_gqa.h).
//
// Without a GPU (no driver, or the driver reports 0 devices) every test here is skipped with
// the reason, except the ones that check what the runtime says then.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "attention_gqa.h"
#include "bf16_check.h"
#include "llama_device_check.h"
#include "kernels/cpu/optimizer.h"
#include "kernels/cuda/api.h"
#include "kernels/cuda/kernels.h"
#include "kernels/grad_rows.h"
#include "kernels/cuda/runtime.h"
#include "kernels/reference/attention.h"
#include "kernels/reference/crossentropy.h"
#include "kernels/reference/encoder.h"
#include "kernels/reference/layernorm.h"
#include "kernels/reference/matmul.h"
#include "kernels/reference/pointwise.h"
#include "kernels/reference/vocab_parallel.h"
#include "kernels/rng.h"

namespace eth {
namespace {

using cuda::DeviceBuffer;
using test::bf16_to_double;
using test::expect_bf16_close;
using test::expect_fp32_close;
using test::nan_bf16;
using test::nan_vec;
using test::random_bf16_vec;
using test::random_ids;
using test::random_vec;
using test::reduction_tol;
using test::to_bf16;
using test::to_double;
using test::to_float;
using test::Vec;
using test::VecB;
using test::VecF;

constexpr auto sz = [](std::int64_t n) { return static_cast<std::size_t>(n); };

#define ETH_REQUIRE_GPU()                                                   \
  do {                                                                      \
    if (cuda::device_count() == 0) {                                        \
      GTEST_SKIP() << "no GPU here: " << cuda::unavailable_reason();        \
    }                                                                       \
  } while (false)

template <typename T>
DeviceBuffer<T> up(const std::vector<T>& host) {
  DeviceBuffer<T> d(host.size());
  cuda::copy_to_device(d.data(), host.data(), d.bytes());
  return d;
}

template <typename T>
std::vector<T> down(const DeviceBuffer<T>& d) {
  cuda::synchronize();
  std::vector<T> host(d.size());
  cuda::copy_to_host(host.data(), d.data(), d.bytes());
  return host;
}

TEST(CudaRuntime, SaysWhyThereIsNoGpu) {
  // Runs everywhere: this is what `--device cuda` reports before any work.
  EXPECT_TRUE(cuda::compiled());
  if (cuda::device_count() == 0) {
    EXPECT_FALSE(cuda::unavailable_reason().empty());
    EXPECT_THROW((void)cuda::device_info(), cuda::CudaError);
  } else {
    EXPECT_TRUE(cuda::unavailable_reason().empty());
  }
}

TEST(CudaRuntime, DeviceBufferRoundTripAndMove) {
  ETH_REQUIRE_GPU();
  const std::vector<float> host = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f};
  DeviceBuffer<float> a = up(host);
  const float* p = a.data();
  DeviceBuffer<float> b = std::move(a);
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state
  EXPECT_EQ(down(b), host);
  b.zero();
  EXPECT_EQ(down(b), std::vector<float>(host.size(), 0.0f));
}

// ---- matmuls ------------------------------------------------------------------------------

void check_matmul(bool nn, bool with_bias) {
  SCOPED_TRACE(std::string(nn ? "nn" : "nt") + (with_bias ? " with bias" : " without bias"));
  std::mt19937_64 gen(43);
  const std::int64_t N = 67, C = 48, OC = 80;  // odd N: no shape is a multiple of 16
  const Vec inp = random_bf16_vec(gen, sz(N * C)), w = random_bf16_vec(gen, sz(OC * C));
  const Vec bias = random_bf16_vec(gen, sz(OC)), dout = random_bf16_vec(gen, sz(N * OC));
  const Vec dw0 = random_vec(gen, sz(OC * C)), db0 = random_vec(gen, sz(OC));
  const auto di = up(to_bf16(inp)), dwt = up(to_bf16(w)), dbias = up(to_bf16(bias));
  const auto ddout = up(to_bf16(dout));
  DeviceBuffer<Bf16> dout_fwd = up(nan_bf16(sz(N * OC))), ddinp = up(nan_bf16(sz(N * C)));
  DeviceBuffer<float> ddw = up(to_float(dw0)), ddb = up(to_float(db0));
  const Bf16* b = with_bias ? dbias.data() : nullptr;
  float* db = with_bias ? ddb.data() : nullptr;
  if (nn) {
    cuda::matmul_nn_forward(dout_fwd.data(), di.data(), dwt.data(), b, N, C, OC);
    cuda::matmul_nn_backward(ddinp.data(), ddw.data(), db, ddout.data(), di.data(), dwt.data(), N,
                             C, OC);
  } else {
    cuda::matmul_nt_forward(dout_fwd.data(), di.data(), dwt.data(), b, N, C, OC);
    cuda::matmul_nt_backward(ddinp.data(), ddw.data(), db, ddout.data(), di.data(), dwt.data(), N,
                             C, OC);
  }
  Vec out(sz(N * OC)), dinp(sz(N * C)), dw = to_double(to_float(dw0)),
      dbv = to_double(to_float(db0));
  const double* rb = with_bias ? bias.data() : nullptr;
  double* rdb = with_bias ? dbv.data() : nullptr;
  if (nn) {
    ref::matmul_nn_forward(out.data(), inp.data(), w.data(), rb, N, C, OC);
    ref::matmul_nn_backward(dinp.data(), dw.data(), rdb, dout.data(), inp.data(), w.data(), N, C,
                            OC);
  } else {
    ref::matmul_nt_forward(out.data(), inp.data(), w.data(), rb, N, C, OC);
    ref::matmul_nt_backward(dinp.data(), dw.data(), rdb, dout.data(), inp.data(), w.data(), N, C,
                            OC);
  }
  expect_bf16_close("out", down(dout_fwd), out, reduction_tol(C));
  expect_bf16_close("dinp", down(ddinp), dinp, reduction_tol(OC));
  expect_fp32_close("dweight", down(ddw), dw, reduction_tol(N));
  if (with_bias) expect_fp32_close("dbias", down(ddb), dbv, reduction_tol(N));
}

TEST(CudaVsReference, MatmulNt) {
  ETH_REQUIRE_GPU();
  check_matmul(false, true);
  check_matmul(false, false);
}

TEST(CudaVsReference, MatmulNn) {
  ETH_REQUIRE_GPU();
  check_matmul(true, true);
  check_matmul(true, false);
}

TEST(CudaVsReference, MatmulPartialsInFp32UnalignedOperands) {
  ETH_REQUIRE_GPU();
  std::mt19937_64 gen(44);
  const std::int64_t N = 33, C = 40, OC = 24;
  const Vec inp = random_bf16_vec(gen, sz(N * C)), w = random_bf16_vec(gen, sz(C * OC));
  const Vec bias = random_bf16_vec(gen, sz(OC));
  // The operands one element past cudaMalloc's 256-byte alignment, as tensors inside an arena
  // can be: cuBLASLt must be told (matmul.cu) or it may pick a kernel that assumes 16 bytes.
  const auto shifted = [](const VecB& v) {
    DeviceBuffer<Bf16> d(v.size() + 1);
    cuda::copy_to_device(d.data() + 1, v.data(), v.size() * sizeof(Bf16));
    return d;
  };
  const auto di = shifted(to_bf16(inp)), dwt = shifted(to_bf16(w));
  const auto dbias = up(to_bf16(bias));
  DeviceBuffer<float> out = up(nan_vec(sz(N * OC)));
  cuda::matmul_nn_forward_partial(out.data(), di.data() + 1, dwt.data() + 1, dbias.data(), N, C,
                                  OC);
  Vec want(sz(N * OC));
  ref::matmul_nn_forward(want.data(), inp.data(), w.data(), bias.data(), N, C, OC);
  expect_fp32_close("partial out", down(out), want, reduction_tol(C));
}

// The *_rows forms (kernels/grad_rows.h): each chunk of the weight (and bias) gradient, stored
// apart, holds its rows of the reference's whole gradient; dinp as the whole form's.
TEST(CudaVsReference, MatmulGradientRowChunks) {
  ETH_REQUIRE_GPU();
  std::mt19937_64 gen(53);
  const std::int64_t N = 33, C = 48, OC = 80;
  const Vec inp = random_bf16_vec(gen, sz(N * C)), w = random_bf16_vec(gen, sz(OC * C));
  const Vec dout = random_bf16_vec(gen, sz(N * OC));
  const auto di = up(to_bf16(inp)), dwt = up(to_bf16(w)), ddout = up(to_bf16(dout));
  // Chunks [0, b) and [b, rows) of a gradient with `rows` rows of `cols`: the reference's whole
  // gradient cut the same way must match each chunk.
  const auto check_chunks = [&](const std::string& name, std::int64_t rows, std::int64_t cols,
                                std::int64_t b, const Vec& want_w, const Vec* want_b,
                                const std::function<void(const GradRows<float>*)>& run) {
    SCOPED_TRACE(name);
    const std::int64_t cut[3] = {0, b, rows};
    std::vector<DeviceBuffer<float>> dw, db;
    std::vector<GradRows<float>> chunks;
    for (int i = 0; i < 2; ++i) {
      dw.push_back(up(VecF(sz((cut[i + 1] - cut[i]) * cols), 0.0f)));
      db.push_back(up(VecF(sz(cut[i + 1] - cut[i]), 0.0f)));
    }
    for (int i = 0; i < 2; ++i) {
      chunks.push_back({cut[i], cut[i + 1], dw[sz(i)].data(),
                        want_b != nullptr ? db[sz(i)].data() : nullptr});
    }
    run(chunks.data());
    for (int i = 0; i < 2; ++i) {
      const Vec part_w(want_w.begin() + cut[i] * cols, want_w.begin() + cut[i + 1] * cols);
      expect_fp32_close("dweight rows", down(dw[sz(i)]), part_w, reduction_tol(N));
      if (want_b != nullptr) {
        const Vec part_b(want_b->begin() + cut[i], want_b->begin() + cut[i + 1]);
        expect_fp32_close("dbias rows", down(db[sz(i)]), part_b, reduction_tol(N));
      }
    }
  };
  Vec dinp(sz(N * C)), dw(sz(OC * C), 0.0), dbias(sz(OC), 0.0);
  ref::matmul_nt_backward(dinp.data(), dw.data(), dbias.data(), dout.data(), inp.data(), w.data(),
                          N, C, OC);
  DeviceBuffer<Bf16> ddinp = up(nan_bf16(sz(N * C)));
  check_chunks("nt", OC, C, 30, dw, &dbias, [&](const GradRows<float>* rows) {
    cuda::matmul_nt_backward_rows(ddinp.data(), rows, 2, ddout.data(), di.data(), dwt.data(), N,
                                  C, OC);
  });
  expect_bf16_close("nt dinp", down(ddinp), dinp, reduction_tol(OC));
  DeviceBuffer<float> pdinp = up(nan_vec(sz(N * C)));
  check_chunks("nt partial", OC, C, 17, dw, &dbias, [&](const GradRows<float>* rows) {
    cuda::matmul_nt_backward_partial_rows(pdinp.data(), rows, 2, ddout.data(), di.data(),
                                          dwt.data(), N, C, OC);
  });
  expect_fp32_close("nt partial dinp", down(pdinp), dinp, reduction_tol(OC));
  // nn: the weight (C,OC) is cut by input channels, the bias whole.
  Vec dinp_nn(sz(N * C)), dw_nn(sz(C * OC), 0.0), dbias_nn(sz(OC), 0.0);
  ref::matmul_nn_backward(dinp_nn.data(), dw_nn.data(), dbias_nn.data(), dout.data(), inp.data(),
                          w.data(), N, C, OC);
  DeviceBuffer<float> ddb = up(VecF(sz(OC), 0.0f));
  check_chunks("nn", C, OC, 20, dw_nn, nullptr, [&](const GradRows<float>* rows) {
    cuda::matmul_nn_backward_rows(ddinp.data(), rows, 2, ddb.data(), ddout.data(), di.data(),
                                  dwt.data(), N, C, OC);
  });
  expect_bf16_close("nn dinp", down(ddinp), dinp_nn, reduction_tol(OC));
  expect_fp32_close("nn dbias", down(ddb), dbias_nn, reduction_tol(N));
}

// ---- embedding, layer norm, point-wise ----------------------------------------------------

TEST(CudaVsReference, Encoder) {
  ETH_REQUIRE_GPU();
  std::mt19937_64 gen(45);
  const std::int64_t B = 3, T = 17, C = 40, V = 11;  // V small: tokens repeat
  const auto tokens = random_ids(gen, sz(B * T), V);
  const Vec wte = random_bf16_vec(gen, sz(V * C)), wpe = random_bf16_vec(gen, sz(T * C));
  const Vec dout = random_bf16_vec(gen, sz(B * T * C));
  const Vec dwte0 = random_vec(gen, sz(V * C)), dwpe0 = random_vec(gen, sz(T * C));
  const auto dtok = up(tokens);
  const auto dwte_t = up(to_bf16(wte)), dwpe_t = up(to_bf16(wpe));
  const auto ddout = up(to_bf16(dout));
  DeviceBuffer<Bf16> out = up(nan_bf16(sz(B * T * C)));
  DeviceBuffer<float> dwte = up(to_float(dwte0)), dwpe = up(to_float(dwpe0));
  cuda::encoder_forward(out.data(), dtok.data(), dwte_t.data(), dwpe_t.data(), B, T, C, V);
  cuda::encoder_backward(dwte.data(), dwpe.data(), ddout.data(), dtok.data(), B, T, C, V);
  Vec want(sz(B * T * C)), wdte = to_double(to_float(dwte0)), wdpe = to_double(to_float(dwpe0));
  ref::encoder_forward(want.data(), tokens.data(), wte.data(), wpe.data(), B, T, C, V);
  ref::encoder_backward(wdte.data(), wdpe.data(), dout.data(), tokens.data(), B, T, C, V);
  expect_bf16_close("out", down(out), want, reduction_tol(2));
  expect_fp32_close("dwte", down(dwte), wdte, reduction_tol(B * T));
  expect_fp32_close("dwpe", down(dwpe), wdpe, reduction_tol(B));
}

TEST(CudaVsReference, LayerNorm) {
  ETH_REQUIRE_GPU();
  std::mt19937_64 gen(46);
  const std::int64_t N = 45, C = 100;  // C not a multiple of 32: partial lanes
  const Vec inp = random_bf16_vec(gen, sz(N * C), -3, 3), w = random_bf16_vec(gen, sz(C));
  const Vec bias = random_bf16_vec(gen, sz(C)), dout = random_bf16_vec(gen, sz(N * C));
  const Vec dinp0 = random_bf16_vec(gen, sz(N * C));
  const Vec dw0 = random_vec(gen, sz(C)), db0 = random_vec(gen, sz(C));
  const auto di = up(to_bf16(inp)), dwt = up(to_bf16(w)), db = up(to_bf16(bias));
  const auto ddout = up(to_bf16(dout));
  DeviceBuffer<Bf16> out = up(nan_bf16(sz(N * C))), ddinp = up(to_bf16(dinp0));
  DeviceBuffer<float> mean = up(nan_vec(sz(N))), rstd = up(nan_vec(sz(N)));
  DeviceBuffer<float> ddw = up(to_float(dw0)), ddb = up(to_float(db0));
  cuda::layernorm_forward(out.data(), mean.data(), rstd.data(), di.data(), dwt.data(), db.data(),
                          N, C);
  cuda::layernorm_backward(ddinp.data(), ddw.data(), ddb.data(), ddout.data(), di.data(),
                           dwt.data(), mean.data(), rstd.data(), N, C);
  Vec wout(sz(N * C)), wmean(sz(N)), wrstd(sz(N)), wdinp = dinp0, wdw = to_double(to_float(dw0)),
      wdb = to_double(to_float(db0));
  ref::layernorm_forward(wout.data(), wmean.data(), wrstd.data(), inp.data(), w.data(),
                         bias.data(), N, C);
  ref::layernorm_backward(wdinp.data(), wdw.data(), wdb.data(), dout.data(), inp.data(), w.data(),
                          wmean.data(), wrstd.data(), N, C);
  expect_bf16_close("out", down(out), wout, reduction_tol(C));
  expect_fp32_close("mean", down(mean), wmean, reduction_tol(C));
  expect_fp32_close("rstd", down(rstd), wrstd, reduction_tol(C));
  expect_bf16_close("dinp", down(ddinp), wdinp, reduction_tol(C));
  expect_fp32_close("dweight", down(ddw), wdw, reduction_tol(N * 4));
  expect_fp32_close("dbias", down(ddb), wdb, reduction_tol(N));
}

TEST(CudaVsReference, GeluAndResidual) {
  ETH_REQUIRE_GPU();
  std::mt19937_64 gen(47);
  const std::int64_t n = 1000;
  const Vec x = random_bf16_vec(gen, sz(n), -4, 4), dout = random_bf16_vec(gen, sz(n));
  const Vec res = random_bf16_vec(gen, sz(n)), dres0 = random_bf16_vec(gen, sz(n));
  const auto dx = up(to_bf16(x)), ddout = up(to_bf16(dout)), dres_in = up(to_bf16(res));
  DeviceBuffer<Bf16> y = up(nan_bf16(sz(n))), dy = up(nan_bf16(sz(n))), r = up(nan_bf16(sz(n)));
  DeviceBuffer<Bf16> dres = up(to_bf16(dres0)), dbranch = up(nan_bf16(sz(n)));
  cuda::gelu_forward(y.data(), dx.data(), n);
  cuda::gelu_backward(dy.data(), ddout.data(), dx.data(), n);
  cuda::residual_forward(r.data(), dres_in.data(), dx.data(), n);
  cuda::residual_backward(dres.data(), dbranch.data(), ddout.data(), n);
  Vec wy(sz(n)), wdy(sz(n)), wr(sz(n)), wdres = dres0, wdbranch(sz(n));
  ref::gelu_forward(wy.data(), x.data(), n);
  ref::gelu_backward(wdy.data(), dout.data(), x.data(), n);
  ref::residual_forward(wr.data(), res.data(), x.data(), n);
  ref::residual_backward(wdres.data(), wdbranch.data(), dout.data(), n);
  // GELU: a few fp32 operations (tanh through exp) per element, no reduction.
  expect_bf16_close("gelu", down(y), wy, reduction_tol(16));
  expect_bf16_close("gelu backward", down(dy), wdy, reduction_tol(16));
  expect_bf16_close("residual", down(r), wr, reduction_tol(2));
  expect_bf16_close("residual dres", down(dres), wdres, reduction_tol(2));
  expect_bf16_close("residual dbranch", down(dbranch), wdbranch, reduction_tol(1));
}

TEST(CudaVsReference, DropoutMasksAreTheCpusBitForBit) {
  ETH_REQUIRE_GPU();
  struct Case {
    RngStream s;
    float p;
    std::int64_t sample0, elem0, B, n;
  };
  const Case cases[] = {{{5, 3, 2, RngOp::AttnDropout}, 0.1f, 0, 0, 3, 1001},
                        {{~0ull, 0xFFFFFFFF, 65535, RngOp::EmbedDropout}, 0.5f, 7, 3, 2, 4099},
                        {{42, 9, 1, RngOp::AttnDropout}, 0.9f, 1 << 20, 12345, 4, 77}};
  for (const Case& c : cases) {
    std::vector<std::uint8_t> cpu(sz(c.B * c.n));
    dropout_mask_fill(cpu.data(), c.s, c.p, c.sample0, c.elem0, c.B, c.n);
    DeviceBuffer<std::uint8_t> dev(cpu.size());
    cuda::dropout_mask_fill(dev.data(), c.s, c.p, c.sample0, c.elem0, c.B, c.n);
    EXPECT_EQ(down(dev), cpu) << "p " << c.p;
  }
}

TEST(CudaVsReference, DropoutApply) {
  ETH_REQUIRE_GPU();
  std::mt19937_64 gen(48);
  const std::int64_t n = 999;
  const float p = 0.3f;
  const Vec x = random_bf16_vec(gen, sz(n));
  std::vector<std::uint8_t> mask(sz(n));
  dropout_mask_fill(mask.data(), RngStream{1, 2, 3, RngOp::AttnDropout}, p, 0, 0, 1, n);
  const auto dx = up(to_bf16(x));
  const auto dmask = up(mask);
  DeviceBuffer<Bf16> y = up(nan_bf16(sz(n))), dxo = up(nan_bf16(sz(n)));
  cuda::dropout_forward(y.data(), dx.data(), dmask.data(), p, n);
  cuda::dropout_backward(dxo.data(), dx.data(), dmask.data(), p, n);
  Vec wy(sz(n)), wdx(sz(n));
  ref::dropout_forward(wy.data(), x.data(), mask.data(), p, n);
  ref::dropout_backward(wdx.data(), x.data(), mask.data(), p, n);
  expect_bf16_close("dropout", down(y), wy, reduction_tol(2));
  expect_bf16_close("dropout backward", down(dxo), wdx, reduction_tol(2));
}

// RMSNorm, rotary positions (multi-head and grouped), SwiGLU and the embedding without a
// position table (llama_device_check.h, the emulated device's test too).
TEST(CudaVsReference, LlamaBlockKernels) {
  ETH_REQUIRE_GPU();
  test::check_rmsnorm_on_device<CudaApi>();
  test::check_rope_on_device<CudaApi>();
  test::check_swiglu_on_device<CudaApi>();
  test::check_encoder_without_positions_on_device<CudaApi>();
}

// ---- cross-entropy, optimizer --------------------------------------------------------------

TEST(CudaVsReference, CrossEntropy) {
  ETH_REQUIRE_GPU();
  std::mt19937_64 gen(49);
  const std::int64_t N = 37, V = 1000;
  const double scale = 1.0 / 74.0;
  const Vec logits = random_bf16_vec(gen, sz(N * V), -5, 5);
  const auto targets = random_ids(gen, sz(N), V);
  const auto dz = up(to_bf16(logits));
  const auto dt = up(targets);
  DeviceBuffer<float> losses = up(nan_vec(sz(N))), lse = up(nan_vec(sz(N)));
  DeviceBuffer<Bf16> dlogits = up(nan_bf16(sz(N * V)));
  double loss = std::nan("");
  cuda::crossentropy_forward(&loss, losses.data(), lse.data(), dz.data(), dt.data(), scale, N, V);
  cuda::crossentropy_backward(dlogits.data(), dz.data(), lse.data(), dt.data(), scale, N, V);
  Vec wlosses(sz(N)), wlse(sz(N)), wd(sz(N * V));
  double wloss = 0;
  ref::crossentropy_forward(&wloss, wlosses.data(), wlse.data(), logits.data(), targets.data(),
                            scale, N, V);
  ref::crossentropy_backward(wd.data(), logits.data(), wlse.data(), targets.data(), scale, N, V);
  expect_fp32_close("losses", down(losses), wlosses, reduction_tol(V));
  expect_fp32_close("lse", down(lse), wlse, reduction_tol(V));
  EXPECT_NEAR(loss, wloss, reduction_tol(V) * std::abs(wloss));
  expect_bf16_close("dlogits", down(dlogits), wd, reduction_tol(V));
}

TEST(CudaVsReference, AdamWAndSumOfSquares) {
  ETH_REQUIRE_GPU();
  std::mt19937_64 gen(50);
  const std::int64_t n = 10000;  // three 4096-element blocks, the last partial
  const VecF p0 = to_float(random_vec(gen, sz(n))), m0 = to_float(random_vec(gen, sz(n)));
  VecF v0 = to_float(random_vec(gen, sz(n), 0, 1));
  const VecF g = to_float(random_vec(gen, sz(n)));
  const cpu::AdamWScalars s{1e-3f, 0.9f, 0.95f, 1e-8f, 1e-5f, 0.19f, 0.0975f, 0.8f};
  DeviceBuffer<float> dp = up(p0), dm = up(m0), dv = up(v0);
  const auto dg = up(g);
  DeviceBuffer<Bf16> dcopy = up(nan_bf16(sz(n)));
  cuda::adamw_update(dp.data(), dcopy.data(), dm.data(), dv.data(), dg.data(), n, s);
  // The update in double, from the formula of cpu/optimizer.h.
  Vec wp(sz(n)), wm(sz(n)), wv(sz(n));
  for (std::size_t i = 0; i < sz(n); ++i) {
    const double gi = static_cast<double>(g[i]) * s.grad_scale;
    wm[i] = s.beta1 * static_cast<double>(m0[i]) + (1.0 - s.beta1) * gi;
    wv[i] = s.beta2 * static_cast<double>(v0[i]) + (1.0 - s.beta2) * gi * gi;
    wp[i] = p0[i] - (s.lr * (wm[i] / s.bias_corr1) / (std::sqrt(wv[i] / s.bias_corr2) + s.eps) +
                     s.decay * static_cast<double>(p0[i]));
  }
  // A handful of fp32 operations per element: tol32 of a length-8 chain.
  expect_fp32_close("m", down(dm), wm, reduction_tol(8));
  expect_fp32_close("v", down(dv), wv, reduction_tol(8));
  const VecF got_p = down(dp);
  expect_fp32_close("p", got_p, wp, reduction_tol(8));
  const VecB copy = down(dcopy);
  for (std::size_t i = 0; i < sz(n); ++i) {
    ASSERT_EQ(copy[i].bits, bf16_from_float(got_p[i]).bits) << i;  // round(p), bit for bit
  }
  double want = 0;
  for (const float x : g) want += static_cast<double>(x) * x;
  EXPECT_NEAR(cuda::sum_squares(dg.data(), n), want, 1e-12 * want);
}

// ---- vocabulary-parallel shares ------------------------------------------------------------

// Two tp ranks' shares of the vocabulary ([0, 40) and [40, 97)), each against the reference
// twin, joined as the tp all-reduces join them (max, then sum): the loss, lse and gradient of the
// whole vocabulary's reference cross-entropy.
TEST(CudaVsReference, VocabParallelShares) {
  ETH_REQUIRE_GPU();
  std::mt19937_64 gen(52);
  const std::int64_t B = 2, T = 9, N = B * T, C = 24, V = 97;
  const std::int64_t v0s[2] = {0, 40}, Vrs[2] = {40, 57};
  const double scale = 1.0 / 18.0;
  const auto tokens = random_ids(gen, sz(N), V), targets = random_ids(gen, sz(N), V);
  const Vec logits = random_bf16_vec(gen, sz(N * V), -4, 4);
  const auto dtok = up(tokens);
  const auto dtgt = up(targets);
  Vec mx_join(sz(N), -INFINITY), stats_join(sz(2 * N), 0.0);
  std::vector<DeviceBuffer<float>> mx(2);
  std::vector<DeviceBuffer<Bf16>> shard(2);
  std::vector<Vec> shard_host(2);
  for (int r = 0; r < 2; ++r) {
    const std::int64_t v0 = v0s[r], Vr = Vrs[r];
    SCOPED_TRACE("shard " + std::to_string(r));
    // Embedding share: exact (a widened bf16 row or 0).
    const Vec rows = random_bf16_vec(gen, sz(Vr * C)), dout = random_bf16_vec(gen, sz(N * C));
    const Vec d0 = random_vec(gen, sz(Vr * C));
    const auto drows = up(to_bf16(rows)), ddout = up(to_bf16(dout));
    DeviceBuffer<float> look = up(nan_vec(sz(N * C))), drows_grad = up(to_float(d0));
    cuda::vocab_embedding_forward(look.data(), dtok.data(), drows.data(), v0, Vr, N, C, V);
    cuda::vocab_embedding_backward(drows_grad.data(), ddout.data(), dtok.data(), v0, Vr, N, C);
    Vec wlook(sz(N * C)), wgrad = to_double(to_float(d0));
    ref::vocab_embedding_forward(wlook.data(), tokens.data(), rows.data(), v0, Vr, N, C, V);
    ref::vocab_embedding_backward(wgrad.data(), dout.data(), tokens.data(), v0, Vr, N, C);
    expect_fp32_close("lookup", down(look), wlook, reduction_tol(1));
    expect_fp32_close("dwte rows", down(drows_grad), wgrad, reduction_tol(N));
    // The rank's logit columns, and its maximum.
    Vec cols(sz(N * Vr));
    for (std::int64_t n = 0; n < N; ++n) {
      for (std::int64_t v = 0; v < Vr; ++v) cols[sz(n * Vr + v)] = logits[sz(n * V + v0 + v)];
    }
    shard_host[sz(r)] = cols;
    shard[sz(r)] = up(to_bf16(cols));
    mx[sz(r)] = up(nan_vec(sz(N)));
    cuda::vocab_ce_max(mx[sz(r)].data(), shard[sz(r)].data(), N, Vr);
    Vec wmx(sz(N));
    ref::vocab_ce_max(wmx.data(), cols.data(), N, Vr);
    const VecF got_mx = down(mx[sz(r)]);
    expect_fp32_close("max", got_mx, wmx, reduction_tol(1));
    for (std::int64_t n = 0; n < N; ++n) {
      mx_join[sz(n)] = std::max(mx_join[sz(n)], static_cast<double>(got_mx[sz(n)]));
    }
  }
  const auto dmx = up(to_float(mx_join));
  for (int r = 0; r < 2; ++r) {
    DeviceBuffer<float> stats = up(nan_vec(sz(2 * N)));
    cuda::vocab_ce_sums(stats.data(), shard[sz(r)].data(), dmx.data(), dtgt.data(), v0s[r], N,
                        Vrs[r]);
    Vec wstats(sz(2 * N));
    ref::vocab_ce_sums(wstats.data(), shard_host[sz(r)].data(), mx_join.data(), targets.data(),
                       v0s[r], N, Vrs[r]);
    const VecF got = down(stats);
    expect_fp32_close("sums", got, wstats, reduction_tol(Vrs[r]));
    for (std::size_t i = 0; i < got.size(); ++i) stats_join[i] += got[i];
  }
  const auto dstats = up(to_float(stats_join));
  DeviceBuffer<float> losses = up(nan_vec(sz(N))), lse = up(nan_vec(sz(N)));
  double loss = std::nan("");
  cuda::vocab_ce_finish(&loss, losses.data(), lse.data(), dmx.data(), dstats.data(), scale, N);
  Vec wlosses(sz(N)), wlse(sz(N)), wd(sz(N * V));
  double wloss = 0;
  ref::crossentropy_forward(&wloss, wlosses.data(), wlse.data(), logits.data(), targets.data(),
                            scale, N, V);
  ref::crossentropy_backward(wd.data(), logits.data(), wlse.data(), targets.data(), scale, N, V);
  expect_fp32_close("joined losses", down(losses), wlosses, reduction_tol(V));
  expect_fp32_close("joined lse", down(lse), wlse, reduction_tol(V));
  EXPECT_NEAR(loss, wloss, reduction_tol(V) * std::abs(wloss));
  for (int r = 0; r < 2; ++r) {
    DeviceBuffer<Bf16> dlogits = up(nan_bf16(sz(N * Vrs[r])));
    cuda::vocab_ce_backward(dlogits.data(), shard[sz(r)].data(), lse.data(), dtgt.data(), v0s[r],
                            scale, N, Vrs[r]);
    Vec want(sz(N * Vrs[r]));
    for (std::int64_t n = 0; n < N; ++n) {
      for (std::int64_t v = 0; v < Vrs[r]; ++v) {
        want[sz(n * Vrs[r] + v)] = wd[sz(n * V + v0s[r] + v)];
      }
    }
    expect_bf16_close("dlogits shard " + std::to_string(r), down(dlogits), want, reduction_tol(V));
  }
  // Positions after the joined lookup: out = round(lookup + wpe); dwpe += over samples.
  const Vec lookup = random_bf16_vec(gen, sz(N * C)), wpe = random_bf16_vec(gen, sz(T * C));
  const Vec dout = random_bf16_vec(gen, sz(N * C)), dwpe0 = random_vec(gen, sz(T * C));
  const auto dlookup = up(to_float(lookup));
  const auto dwpe_t = up(to_bf16(wpe)), ddout = up(to_bf16(dout));
  DeviceBuffer<Bf16> out = up(nan_bf16(sz(N * C)));
  DeviceBuffer<float> dwpe = up(to_float(dwpe0));
  cuda::position_forward(out.data(), dlookup.data(), dwpe_t.data(), B, T, C);
  cuda::position_backward(dwpe.data(), ddout.data(), B, T, C);
  Vec wout = lookup, wdwpe = to_double(to_float(dwpe0));
  ref::position_forward(wout.data(), wpe.data(), B, T, C);
  ref::position_backward(wdwpe.data(), dout.data(), B, T, C);
  expect_bf16_close("position out", down(out), wout, reduction_tol(2));
  expect_fp32_close("dwpe", down(dwpe), wdwpe, reduction_tol(B));
}

// ---- fused attention ----------------------------------------------------------------------

struct AttnCase {
  std::int64_t B, T, C, NH;
  float p;
  std::int64_t NKV = 0;  // 0: NH (multi-head)
};

void check_attention(const AttnCase& k) {
  const std::int64_t B = k.B, T = k.T, C = k.C, NH = k.NH, hs = C / NH, N = B * T;
  const std::int64_t NKV = k.NKV == 0 ? NH : k.NKV, G = NH / NKV;
  SCOPED_TRACE("B=" + std::to_string(B) + " T=" + std::to_string(T) + " hs=" +
               std::to_string(hs) + " p=" + std::to_string(k.p) + " NKV=" + std::to_string(NKV));
  std::mt19937_64 gen(51);
  const Vec gqkv = random_bf16_vec(gen, sz(N * (C + 2 * NKV * hs)), -2, 2);
  const Vec dout = random_bf16_vec(gen, sz(N * C));
  cuda::AttnDropout drop{RngStream{77, 5, 2, RngOp::AttnDropout}, k.p, 3, 0};
  const auto dqkv_in = up(to_bf16(gqkv)), ddout = up(to_bf16(dout));
  DeviceBuffer<Bf16> out = up(nan_bf16(sz(N * C))), dqkv = up(nan_bf16(gqkv.size()));
  DeviceBuffer<float> lse = up(nan_vec(sz(B * NH * T))), dsum(sz(B * NH * T));
  cuda::attention_forward(out.data(), lse.data(), dqkv_in.data(), drop, B, T, C, NH, NKV);
  cuda::attention_backward(dqkv.data(), dsum.data(), ddout.data(), lse.data(), dqkv_in.data(),
                           drop, B, T, C, NH, NKV);
  // The multi-head qkv with each kv head copied to its query heads (NKV = NH: the same qkv).
  const Vec qkv = test::replicate_kv(gqkv, N, C, NH, NKV);

  // The reference chain with the CPU's mask for these heads (StageCompute's layout).
  const std::int64_t nP = B * NH * T * T;
  Vec S(sz(nP)), P(sz(nP)), Pd(sz(nP)), wout(sz(N * C)), dPd(sz(nP)), dP(sz(nP)), dS(sz(nP));
  Vec wdqkv(sz(N * 3 * C), 0.0), wlse(sz(B * NH * T));
  std::vector<std::uint8_t> mask(sz(nP), 1);
  if (k.p > 0) {
    dropout_mask_fill(mask.data(), drop.stream, k.p, drop.sample0, drop.head0 * T * T, B,
                      NH * T * T);
  }
  ref::attention_scores_forward(S.data(), qkv.data(), B, T, C, NH);
  ref::attention_softmax_forward(P.data(), S.data(), B, NH, T);
  ref::dropout_forward(Pd.data(), P.data(), mask.data(), k.p, nP);
  ref::attention_av_forward(wout.data(), Pd.data(), qkv.data(), B, T, C, NH);
  ref::attention_av_backward(dPd.data(), wdqkv.data(), dout.data(), Pd.data(), qkv.data(), B, T,
                             C, NH);
  ref::dropout_backward(dP.data(), dPd.data(), mask.data(), k.p, nP);
  ref::attention_softmax_backward(dS.data(), dP.data(), P.data(), B, NH, T);
  ref::attention_scores_backward(wdqkv.data(), dS.data(), qkv.data(), B, T, C, NH);
  for (std::int64_t r = 0; r < B * NH * T; ++r) {
    const std::int64_t t = r % T;
    double mx = -INFINITY, sum = 0;
    for (std::int64_t j = 0; j <= t; ++j) mx = std::max(mx, S[sz(r * T + j)]);
    for (std::int64_t j = 0; j <= t; ++j) sum += std::exp(S[sz(r * T + j)] - mx);
    wlse[sz(r)] = mx + std::log(sum);
  }
  // Scores are length-hs sums feeding a length-T softmax and a length-T product; backward
  // chains two more of each (P is never rounded to bf16 on the GPU, so this is looser than the
  // CPU kernels need).
  expect_bf16_close("out", down(out), wout, reduction_tol(hs + 2 * T));
  expect_fp32_close("lse", down(lse), wlse, reduction_tol(hs + T));
  expect_bf16_close("dqkv", down(dqkv), test::fold_kv_grads(wdqkv, N, C, NH, NKV),
                    reduction_tol(2 * (hs + 2 * G * T)));
}

TEST(CudaVsReference, FusedAttention) {
  ETH_REQUIRE_GPU();
  // T = 80: three row tiles of 32, the last partial; head sizes 16 (one dim per lane), 96 and
  // 128 (three and four); with and without dropout of P.
  for (const AttnCase& c : {AttnCase{2, 80, 48, 3, 0.0f}, AttnCase{2, 80, 48, 3, 0.2f},
                            AttnCase{1, 70, 192, 2, 0.1f}, AttnCase{1, 40, 256, 2, 0.0f}}) {
    check_attention(c);
  }
}

TEST(CudaVsReference, FusedGroupedQueryAttention) {
  ETH_REQUIRE_GPU();
  // Groups of 2 and 3 query heads and one kv head for all; the kv kernel's blocks walk their
  // group's heads; head sizes 16, 32 and 64, T past two row tiles.
  for (const AttnCase& c : {AttnCase{2, 80, 64, 4, 0.0f, 2}, AttnCase{1, 70, 96, 6, 0.2f, 2},
                            AttnCase{2, 40, 64, 4, 0.1f, 1}, AttnCase{1, 33, 256, 4, 0.0f, 2}}) {
    check_attention(c);
  }
}

}  // namespace
}  // namespace eth
