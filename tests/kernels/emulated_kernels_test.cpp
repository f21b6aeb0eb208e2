// The emulated kernels composed on device memory (upload, run, download, through EmulatedApi)
// against the same composition of the CPU bf16 kernels on host memory: every result bit for bit,
// since each emulated kernel here is that CPU kernel. The composition is written once, over an
// Api; HostApi is the CPU bf16 set under the CUDA set's names, on plain host memory. What this
// catches: an emulated kernel that passes an argument out of place or calls the wrong CPU
// kernel, and an EmulatedApi entry that names the wrong function. The Llama blocks' kernels
// (RMSNorm, rotary positions, SwiGLU, the embedding without positions) run on the device
// against the double references (llama_device_check.h, shared with the CUDA test), bit for bit
// against the CPU bf16 kernels, and refuse host memory.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "bf16_check.h"
#include "llama_device_check.h"
#include "kernels/cpu/bf16/convert.h"
#include "kernels/cpu/bf16/crossentropy.h"
#include "kernels/cpu/bf16/encoder.h"
#include "kernels/cpu/bf16/layernorm.h"
#include "kernels/cpu/bf16/matmul.h"
#include "kernels/cpu/bf16/optimizer.h"
#include "kernels/cpu/bf16/pointwise.h"
#include "kernels/cpu/bf16/rmsnorm.h"
#include "kernels/cpu/bf16/rope.h"
#include "kernels/cpu/bf16/swiglu.h"
#include "kernels/cpu/bf16/vocab_parallel.h"
#include "kernels/cpu/optimizer.h"
#include "kernels/cpu/vocab_parallel.h"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/api.h"
#include "kernels/emulated/api.h"
#include "kernels/rng.h"

namespace eth::emulated_kernels_test {
namespace {

using test::random_bf16_vec;
using test::random_ids;
using test::random_vec;
using test::to_bf16;
using test::to_float;

// The CPU bf16 kernels under the CUDA set's names, on host memory.
struct HostApi {
  static void* alloc(std::size_t bytes) { return bytes == 0 ? nullptr : std::malloc(bytes); }
  static void free(void* p) { std::free(p); }
  static void copy_to_device(void* d, const void* s, std::size_t n) { std::memcpy(d, s, n); }
  static void copy_to_host(void* d, const void* s, std::size_t n) { std::memcpy(d, s, n); }
  static void synchronize() {}

  static constexpr auto encoder_forward = &cpu::bf16::encoder_forward;
  static constexpr auto encoder_backward = &cpu::bf16::encoder_backward;
  static constexpr auto vocab_embedding_forward = &cpu::bf16::vocab_embedding_forward;
  static constexpr auto vocab_embedding_backward = &cpu::bf16::vocab_embedding_backward;
  static constexpr auto position_forward = &cpu::bf16::position_forward;
  static constexpr auto position_backward = &cpu::bf16::position_backward;
  static constexpr auto layernorm_forward = &cpu::bf16::layernorm_forward;
  static constexpr auto layernorm_backward = &cpu::bf16::layernorm_backward;
  static constexpr auto matmul_nt_forward = &cpu::bf16::matmul_nt_forward;
  static constexpr auto matmul_nt_backward = &cpu::bf16::matmul_nt_backward;
  static constexpr auto matmul_nn_forward = &cpu::bf16::matmul_nn_forward;
  static constexpr auto matmul_nn_backward = &cpu::bf16::matmul_nn_backward;
  static constexpr auto matmul_nn_forward_partial = &cpu::bf16::matmul_nn_forward_partial;
  static constexpr auto matmul_nt_backward_partial = &cpu::bf16::matmul_nt_backward_partial;
  static constexpr auto matmul_nt_backward_rows = &cpu::bf16::matmul_nt_backward_rows;
  static constexpr auto matmul_nn_backward_rows = &cpu::bf16::matmul_nn_backward_rows;
  static constexpr auto matmul_nt_backward_partial_rows =
      &cpu::bf16::matmul_nt_backward_partial_rows;
  static constexpr auto gelu_forward = &cpu::bf16::gelu_forward;
  static constexpr auto gelu_backward = &cpu::bf16::gelu_backward;
  static constexpr auto residual_forward = &cpu::bf16::residual_forward;
  static constexpr auto residual_backward = &cpu::bf16::residual_backward;
  static constexpr auto dropout_forward = &cpu::bf16::dropout_forward;
  static constexpr auto dropout_backward = &cpu::bf16::dropout_backward;
  static constexpr auto dropout_mask_fill = &eth::dropout_mask_fill;
  static constexpr auto convert_to_bf16 =
      static_cast<void (*)(Bf16*, const float*, std::int64_t)>(&cpu::bf16::convert_to_bf16);
  static constexpr auto crossentropy_forward = &cpu::bf16::crossentropy_forward;
  static constexpr auto crossentropy_backward = &cpu::bf16::crossentropy_backward;
  static constexpr auto vocab_ce_max = &cpu::bf16::vocab_ce_max;
  static constexpr auto vocab_ce_sums = &cpu::bf16::vocab_ce_sums;
  static constexpr auto vocab_ce_finish = &cpu::vocab_ce_finish;
  static constexpr auto vocab_ce_backward = &cpu::bf16::vocab_ce_backward;
  static constexpr auto adamw_update = &cpu::bf16::adamw_update;
  static constexpr auto sum_squares = &cpu::sum_squares;
  template <typename T>
  static void add_inplace(T* x, const T* y, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) x[i] += y[i];
  }
  template <typename T>
  static void max_inplace(T* x, const T* y, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) x[i] = x[i] < y[i] ? y[i] : x[i];
  }
};

// Buffers of one side, and every result downloaded as bytes under a name.
template <typename Api>
class Side {
 public:
  Side() = default;
  Side(const Side&) = delete;
  Side& operator=(const Side&) = delete;
  ~Side() {
    for (void* p : owned_) Api::free(p);
  }

  template <typename T>
  T* up(const std::vector<T>& host) {
    T* p = zeros<T>(host.size());
    Api::copy_to_device(p, host.data(), host.size() * sizeof(T));
    return p;
  }
  template <typename T>
  T* zeros(std::size_t n) {
    auto* p = static_cast<T*>(Api::alloc(n * sizeof(T)));
    owned_.push_back(p);
    const std::vector<unsigned char> z(n * sizeof(T), 0);
    Api::copy_to_device(p, z.data(), z.size());
    return p;
  }
  template <typename T>
  void record(const std::string& name, const T* p, std::size_t n) {
    Api::synchronize();
    std::vector<unsigned char> bytes(n * sizeof(T));
    Api::copy_to_host(bytes.data(), p, bytes.size());
    results[name] = std::move(bytes);
  }
  void record_host(const std::string& name, double x) {
    std::vector<unsigned char> bytes(sizeof x);
    std::memcpy(bytes.data(), &x, sizeof x);
    results[name] = std::move(bytes);
  }

  std::map<std::string, std::vector<unsigned char>> results;

 private:
  std::vector<void*> owned_;
};

constexpr std::int64_t B = 2, T = 9, C = 24, V = 37, H = 4 * C, N = B * T;
constexpr auto sz = [](std::int64_t n) { return static_cast<std::size_t>(n); };

struct Inputs {
  std::vector<std::int32_t> tokens, targets;
  std::vector<Bf16> wte, wpe, lnw, lnb, fcw, fcb, projw, projb;
  std::vector<float> masters, m, v;
};

Inputs make_inputs() {
  std::mt19937_64 gen(2024);
  Inputs in;
  in.tokens = random_ids(gen, sz(N), V);
  in.targets = random_ids(gen, sz(N), V);
  in.wte = to_bf16(random_bf16_vec(gen, sz(V * C)));
  in.wpe = to_bf16(random_bf16_vec(gen, sz(T * C)));
  in.lnw = to_bf16(random_bf16_vec(gen, sz(C), 0.5, 1.5));
  in.lnb = to_bf16(random_bf16_vec(gen, sz(C)));
  in.fcw = to_bf16(random_bf16_vec(gen, sz(H * C), -0.3, 0.3));
  in.fcb = to_bf16(random_bf16_vec(gen, sz(H)));
  in.projw = to_bf16(random_bf16_vec(gen, sz(H * C), -0.3, 0.3));  // (H, C): the nn form
  in.projb = to_bf16(random_bf16_vec(gen, sz(C)));
  in.masters = to_float(random_vec(gen, sz(V * C)));
  in.m = to_float(random_vec(gen, sz(V * C), -0.01, 0.01));
  in.v = to_float(random_vec(gen, sz(V * C), 0.0, 0.001));
  return in;
}

// A one-layer MLP language model, forward and backward, then one AdamW step of wte.
template <typename Api>
void mlp_step(Side<Api>& s, const Inputs& in) {
  const RngStream stream{11, 3, 1, RngOp::MlpResidDropout};
  const float p = 0.1f;
  std::int32_t* tokens = s.up(in.tokens);
  std::int32_t* targets = s.up(in.targets);
  Bf16* wte = s.up(in.wte);
  Bf16* wpe = s.up(in.wpe);
  Bf16* lnw = s.up(in.lnw);
  Bf16* lnb = s.up(in.lnb);
  Bf16* fcw = s.up(in.fcw);
  Bf16* fcb = s.up(in.fcb);
  Bf16* projw = s.up(in.projw);
  Bf16* projb = s.up(in.projb);
  Bf16 *x = s.template zeros<Bf16>(sz(N * C)), *ln = s.template zeros<Bf16>(sz(N * C));
  float *mean = s.template zeros<float>(sz(N)), *rstd = s.template zeros<float>(sz(N));
  Bf16 *h = s.template zeros<Bf16>(sz(N * H)), *g = s.template zeros<Bf16>(sz(N * H));
  Bf16 *y = s.template zeros<Bf16>(sz(N * C)), *r = s.template zeros<Bf16>(sz(N * C));
  Bf16* rd = s.template zeros<Bf16>(sz(N * C));
  std::uint8_t* mask = s.template zeros<std::uint8_t>(sz(N * C));
  Bf16* logits = s.template zeros<Bf16>(sz(N * V));
  float *losses = s.template zeros<float>(sz(N)), *lse = s.template zeros<float>(sz(N));

  Api::encoder_forward(x, tokens, wte, wpe, B, T, C, V);
  Api::layernorm_forward(ln, mean, rstd, x, lnw, lnb, N, C);
  Api::matmul_nt_forward(h, ln, fcw, fcb, N, C, H);
  Api::gelu_forward(g, h, N * H);
  Api::matmul_nn_forward(y, g, projw, projb, N, H, C);
  Api::residual_forward(r, x, y, N * C);
  Api::dropout_mask_fill(mask, stream, p, 5, 0, B, T * C);
  Api::dropout_forward(rd, r, mask, p, N * C);
  Api::matmul_nt_forward(logits, rd, wte, nullptr, N, C, V);
  double loss = -1;
  Api::crossentropy_forward(&loss, losses, lse, logits, targets, 1.0 / N, N, V);
  s.record_host("loss", loss);
  s.record("x", x, sz(N * C));
  s.record("mean", mean, sz(N));
  s.record("rstd", rstd, sz(N));
  s.record("mask", mask, sz(N * C));
  s.record("logits", logits, sz(N * V));
  s.record("losses", losses, sz(N));

  Bf16* dlogits = s.template zeros<Bf16>(sz(N * V));
  Bf16 *drd = s.template zeros<Bf16>(sz(N * C)), *dr = s.template zeros<Bf16>(sz(N * C));
  Bf16 *dx = s.template zeros<Bf16>(sz(N * C)), *dy = s.template zeros<Bf16>(sz(N * C));
  Bf16 *dg = s.template zeros<Bf16>(sz(N * H)), *dh = s.template zeros<Bf16>(sz(N * H));
  Bf16* dln = s.template zeros<Bf16>(sz(N * C));
  float *dwte = s.template zeros<float>(sz(V * C)), *dwpe = s.template zeros<float>(sz(T * C));
  float *dlnw = s.template zeros<float>(sz(C)), *dlnb = s.template zeros<float>(sz(C));
  float *dfcw = s.template zeros<float>(sz(H * C)), *dfcb = s.template zeros<float>(sz(H));
  float *dprojw = s.template zeros<float>(sz(H * C)), *dprojb = s.template zeros<float>(sz(C));
  Api::crossentropy_backward(dlogits, logits, lse, targets, 1.0 / N, N, V);
  Api::matmul_nt_backward(drd, dwte, nullptr, dlogits, rd, wte, N, C, V);
  Api::dropout_backward(dr, drd, mask, p, N * C);
  Api::residual_backward(dx, dy, dr, N * C);
  Api::matmul_nn_backward(dg, dprojw, dprojb, dy, g, projw, N, H, C);
  Api::gelu_backward(dh, dg, h, N * H);
  Api::matmul_nt_backward(dln, dfcw, dfcb, dh, ln, fcw, N, C, H);
  Api::layernorm_backward(dx, dlnw, dlnb, dln, x, lnw, mean, rstd, N, C);
  Api::encoder_backward(dwte, dwpe, dx, tokens, B, T, C, V);
  for (const auto& [name, ptr, n] :
       {std::tuple{"dwte", dwte, V * C}, std::tuple{"dwpe", dwpe, T * C},
        std::tuple{"dlnw", dlnw, C}, std::tuple{"dlnb", dlnb, C}, std::tuple{"dfcw", dfcw, H * C},
        std::tuple{"dfcb", dfcb, H}, std::tuple{"dprojw", dprojw, H * C},
        std::tuple{"dprojb", dprojb, C}}) {
    s.record(name, ptr, sz(n));
  }
  s.record("dx", dx, sz(N * C));
  s.record_host("sum_squares", Api::sum_squares(dwte, V * C));

  float* pm = s.up(in.masters);
  float* m = s.up(in.m);
  float* v = s.up(in.v);
  Bf16* pb = s.template zeros<Bf16>(sz(V * C));
  const cpu::AdamWScalars hyper{1e-3f, 0.9f, 0.95f, 1e-8f, 1e-4f, 0.19f, 0.0975f, 0.5f};
  Api::adamw_update(pm, pb, m, v, dwte, V * C, hyper);
  s.record("masters", pm, sz(V * C));
  s.record("wte_bf16", pb, sz(V * C));
  s.record("m", m, sz(V * C));
  s.record("v", v, sz(V * C));
  Bf16* refreshed = s.template zeros<Bf16>(sz(T * C));
  Api::convert_to_bf16(refreshed, dwpe, T * C);
  s.record("convert", refreshed, sz(T * C));
}

// The tensor-parallel shares: two vocabulary halves of embedding and loss joined as the
// all-reduces join them (add_inplace, max_inplace on the device), the partial and row-chunk
// matmul gradients.
template <typename Api>
void tp_shares(Side<Api>& s, const Inputs& in) {
  const std::int64_t V0 = 20, V1 = V - V0;
  std::int32_t* tokens = s.up(in.tokens);
  std::int32_t* targets = s.up(in.targets);
  Bf16* wte = s.up(in.wte);
  Bf16* wpe = s.up(in.wpe);
  float *look0 = s.template zeros<float>(sz(N * C)), *look1 = s.template zeros<float>(sz(N * C));
  Api::vocab_embedding_forward(look0, tokens, wte, 0, V0, N, C, V);
  Api::vocab_embedding_forward(look1, tokens, wte + V0 * C, V0, V1, N, C, V);
  Api::add_inplace(look0, look1, N * C);
  Bf16* x = s.template zeros<Bf16>(sz(N * C));
  Api::position_forward(x, look0, wpe, B, T, C);
  s.record("x", x, sz(N * C));

  Bf16 *lg0 = s.template zeros<Bf16>(sz(N * V0)), *lg1 = s.template zeros<Bf16>(sz(N * V1));
  Api::matmul_nt_forward(lg0, x, wte, nullptr, N, C, V0);
  Api::matmul_nt_forward(lg1, x, wte + V0 * C, nullptr, N, C, V1);
  float *mx0 = s.template zeros<float>(sz(N)), *mx1 = s.template zeros<float>(sz(N));
  Api::vocab_ce_max(mx0, lg0, N, V0);
  Api::vocab_ce_max(mx1, lg1, N, V1);
  Api::max_inplace(mx0, mx1, N);
  float *st0 = s.template zeros<float>(sz(2 * N)), *st1 = s.template zeros<float>(sz(2 * N));
  Api::vocab_ce_sums(st0, lg0, mx0, targets, 0, N, V0);
  Api::vocab_ce_sums(st1, lg1, mx0, targets, V0, N, V1);
  Api::add_inplace(st0, st1, 2 * N);
  float *losses = s.template zeros<float>(sz(N)), *lse = s.template zeros<float>(sz(N));
  double loss = -1;
  Api::vocab_ce_finish(&loss, losses, lse, mx0, st0, 0.5, N);
  s.record_host("loss", loss);
  s.record("lse", lse, sz(N));
  Api::vocab_ce_backward(lg0, lg0, lse, targets, 0, 0.5, N, V0);  // in place, as the trainer
  Api::vocab_ce_backward(lg1, lg1, lse, targets, V0, 0.5, N, V1);
  s.record("dlogits1", lg1, sz(N * V1));

  // Row chunks of the first share's weight gradient, stored apart, and the fp32 partial dinp.
  float *dx0 = s.template zeros<float>(sz(N * C)), *dx1 = s.template zeros<float>(sz(N * C));
  float* chunk_a = s.template zeros<float>(sz(8 * C));
  float* chunk_b = s.template zeros<float>(sz(12 * C));
  const GradRows<float> rows[] = {{0, 8, chunk_a, nullptr}, {8, V0, chunk_b, nullptr}};
  Api::matmul_nt_backward_partial_rows(dx0, rows, 2, lg0, x, wte, N, C, V0);
  float* dw1 = s.template zeros<float>(sz(V1 * C));
  Api::matmul_nt_backward_partial(dx1, dw1, nullptr, lg1, x, wte + V0 * C, N, C, V1);
  Api::add_inplace(dx0, dx1, N * C);
  s.record("dx", dx0, sz(N * C));
  s.record("chunk_a", chunk_a, sz(8 * C));
  s.record("chunk_b", chunk_b, sz(12 * C));
  s.record("dw1", dw1, sz(V1 * C));
  Bf16* dxb = s.template zeros<Bf16>(sz(N * C));
  Api::convert_to_bf16(dxb, dx0, N * C);
  float *dwpe = s.template zeros<float>(sz(T * C)), *dwte0 = s.template zeros<float>(sz(V0 * C));
  Api::position_backward(dwpe, dxb, B, T, C);
  Api::vocab_embedding_backward(dwte0, dxb, tokens, 0, V0, N, C);
  s.record("dwpe", dwpe, sz(T * C));
  s.record("dwte0", dwte0, sz(V0 * C));

  // The rows forms of the whole-tensor gradients, and nn_forward_partial.
  Bf16* dinp = s.template zeros<Bf16>(sz(N * C));
  float* c0 = s.template zeros<float>(sz(5 * C));
  float* c1 = s.template zeros<float>(sz((V1 - 5) * C));
  const GradRows<float> rows1[] = {{0, 5, c0, nullptr}, {5, V1, c1, nullptr}};
  Api::matmul_nt_backward_rows(dinp, rows1, 2, lg1, x, wte + V0 * C, N, C, V1);
  s.record("rows_dinp", dinp, sz(N * C));
  s.record("rows_c1", c1, sz((V1 - 5) * C));
  Bf16* wnn = s.up(in.projw);  // read as (C, H): the nn form of a C -> H product
  float* part = s.template zeros<float>(sz(N * H));
  Api::matmul_nn_forward_partial(part, x, wnn, nullptr, N, C, H);
  s.record("nn_partial", part, sz(N * H));
  Bf16* dnn = s.template zeros<Bf16>(sz(N * C));
  float *g0 = s.template zeros<float>(sz(10 * H)), *g1 = s.template zeros<float>(sz(14 * H));
  float* gb = s.template zeros<float>(sz(H));
  const GradRows<float> rows2[] = {{0, 10, g0, nullptr}, {10, C, g1, nullptr}};
  Bf16* dpart = s.template zeros<Bf16>(sz(N * H));
  Api::convert_to_bf16(dpart, part, N * H);
  Api::matmul_nn_backward_rows(dnn, rows2, 2, gb, dpart, x, wnn, N, C, H);
  s.record("nn_rows_dinp", dnn, sz(N * C));
  s.record("nn_rows_g1", g1, sz(14 * H));
  s.record("nn_rows_bias", gb, sz(H));
  std::vector<double> d0{1.0, -2.0, 3.5}, d1{0.25, 4.0, -1.0};
  double* a = s.up(d0);
  double* b = s.up(d1);
  Api::add_inplace(a, b, 3);
  Api::max_inplace(b, a, 3);
  s.record("add_double", a, 3);
  s.record("max_double", b, 3);
}

void expect_same(const Side<HostApi>& host, const Side<EmulatedApi>& dev) {
  ASSERT_EQ(host.results.size(), dev.results.size());
  for (const auto& [name, bytes] : host.results) {
    const auto it = dev.results.find(name);
    ASSERT_NE(it, dev.results.end()) << name;
    EXPECT_TRUE(it->second == bytes) << name << " differs from the CPU bf16 kernels' bits";
  }
}

TEST(EmulatedKernels, OneMlpStepOnTheDeviceIsTheCpuBf16KernelsBitForBit) {
  const Inputs in = make_inputs();
  Side<HostApi> host;
  Side<EmulatedApi> dev;
  mlp_step(host, in);
  mlp_step(dev, in);
  expect_same(host, dev);
  // The comparison is not vacuous: the step did something (a finite loss, a nonzero gradient).
  double loss = 0;
  std::memcpy(&loss, host.results.at("loss").data(), sizeof loss);
  EXPECT_GT(loss, 1.0);
  double sq = 0;
  std::memcpy(&sq, host.results.at("sum_squares").data(), sizeof sq);
  EXPECT_GT(sq, 0.0);
}

// The device-scalar losses: two micro-batches added into one device double give the host forms'
// scaled sums added in the same order (the CPU trainer's step loss), bit for bit.
TEST(EmulatedKernels, LossesAddIntoADeviceScalarAsTheHostFormsSum) {
  const std::int64_t n = 6, v = 11;
  std::mt19937_64 gen(7);
  const std::vector<Bf16> logits = to_bf16(random_vec(gen, sz(n * v), -3.0, 3.0));
  const std::vector<std::int32_t> targets = random_ids(gen, sz(n), v);
  auto up = [](const auto& h) {
    using E = typename std::decay_t<decltype(h)>::value_type;
    auto* d = static_cast<E*>(emu::alloc(h.size() * sizeof(E)));
    emu::copy_to_device(d, h.data(), h.size() * sizeof(E));
    return d;
  };
  Bf16* dlogits = up(logits);
  std::int32_t* dtargets = up(targets);
  auto* losses = static_cast<float*>(emu::alloc(n * sizeof(float)));
  auto* lse = static_cast<float*>(emu::alloc(n * sizeof(float)));
  auto* dloss = static_cast<double*>(emu::alloc(sizeof(double)));
  emu::memset_zero(dloss, sizeof(double));
  emu::crossentropy_forward_add(dloss, losses, lse, dlogits, dtargets, 0.25, n, v);
  emu::crossentropy_forward_add(dloss, losses, lse, dlogits, dtargets, 0.5, n, v);
  double got = 0;
  emu::copy_to_host(&got, dloss, sizeof(double));
  std::vector<float> hl(n), hlse(n);
  double a = 0, b = 0;
  cpu::bf16::crossentropy_forward(&a, hl.data(), hlse.data(), logits.data(), targets.data(), 0.25,
                                  n, v);
  cpu::bf16::crossentropy_forward(&b, hl.data(), hlse.data(), logits.data(), targets.data(), 0.5,
                                  n, v);
  EXPECT_EQ(got, (0.0 + a) + b);

  // vocab_ce_finish_add on the statistics of the whole vocabulary (one share).
  auto* mx = static_cast<float*>(emu::alloc(n * sizeof(float)));
  auto* stats = static_cast<float*>(emu::alloc(2 * n * sizeof(float)));
  emu::vocab_ce_max(mx, dlogits, n, v);
  emu::vocab_ce_sums(stats, dlogits, mx, dtargets, 0, n, v);
  emu::memset_zero(dloss, sizeof(double));
  emu::vocab_ce_finish_add(dloss, losses, lse, mx, stats, 0.5, n);
  emu::copy_to_host(&got, dloss, sizeof(double));
  std::vector<float> hmx(n), hstats(2 * n);
  cpu::bf16::vocab_ce_max(hmx.data(), logits.data(), n, v);
  cpu::bf16::vocab_ce_sums(hstats.data(), logits.data(), hmx.data(), targets.data(), 0, n, v);
  double c = 0;
  cpu::vocab_ce_finish(&c, hl.data(), hlse.data(), hmx.data(), hstats.data(), 0.5, n);
  EXPECT_EQ(got, 0.0 + c);
  // A host loss is refused: on a GPU it would be a crash.
  double host = 0;
  EXPECT_THROW(emu::crossentropy_forward_add(&host, losses, lse, dlogits, dtargets, 1, n, v),
               emu::EmuError);
  for (void* p : std::initializer_list<void*>{dlogits, dtargets, losses, lse, dloss, mx, stats})
    emu::free(p);
}

TEST(EmulatedKernels, TensorParallelSharesOnTheDeviceAreTheCpuBf16KernelsBitForBit) {
  const Inputs in = make_inputs();
  Side<HostApi> host;
  Side<EmulatedApi> dev;
  tp_shares(host, in);
  tp_shares(dev, in);
  expect_same(host, dev);
}

// ---- Llama blocks ---------------------------------------------------------------------------

TEST(EmulatedKernels, LlamaBlockKernelsMatchTheDoubleReferences) {
  test::check_rmsnorm_on_device<EmulatedApi>();
  test::check_rope_on_device<EmulatedApi>();
  test::check_swiglu_on_device<EmulatedApi>();
  test::check_encoder_without_positions_on_device<EmulatedApi>();
}

TEST(EmulatedKernels, LlamaBlockKernelsAreTheCpuBf16KernelsBitForBit) {
  using D = test::OnDevice<EmulatedApi>;
  std::mt19937_64 gen(75);
  // The file's N, C, B and T; a grouped qkv of 4 query and 2 kv heads of 8.
  const std::int64_t NH = 4, NKV = 2, hd = 8, W = (NH + 2 * NKV) * hd;
  const auto bits = [](const std::vector<Bf16>& a, const std::vector<Bf16>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(Bf16)) == 0;
  };
  const auto x = to_bf16(random_bf16_vec(gen, sz(N * C), -3, 3));
  const auto w = to_bf16(random_bf16_vec(gen, sz(C)));
  const auto g = to_bf16(random_bf16_vec(gen, sz(N * C)));
  const auto dx = D::up(x), dw = D::up(w), dg = D::up(g);
  // RMSNorm forward and backward (dinp and dweight from zero).
  std::vector<Bf16> out(sz(N * C)), dinp(sz(N * C), Bf16{0});
  std::vector<float> rstd(sz(N)), dweight(sz(C), 0.0f);
  auto edinp = D::up(dinp);
  cpu::bf16::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), 1e-6f, N, C);
  cpu::bf16::rmsnorm_backward(dinp.data(), dweight.data(), g.data(), x.data(), w.data(),
                              rstd.data(), N, C);
  auto eout = D::up(std::vector<Bf16>(sz(N * C)));
  auto erstd = D::up(std::vector<float>(sz(N))), edw = D::up(std::vector<float>(sz(C), 0.0f));
  EmulatedApi::rmsnorm_forward(eout.data(), erstd.data(), dx.data(), dw.data(), 1e-6f, N, C);
  EmulatedApi::rmsnorm_backward(edinp.data(), edw.data(), dg.data(), dx.data(), dw.data(),
                                erstd.data(), N, C);
  EXPECT_TRUE(bits(D::down(eout), out) && bits(D::down(edinp), dinp));
  EXPECT_TRUE(D::down(erstd) == rstd && D::down(edw) == dweight);
  // Rotary positions, forward then backward of a gradient, on a grouped qkv.
  auto qkv = to_bf16(random_bf16_vec(gen, sz(B * T * W), -2, 2));
  auto dq = to_bf16(random_bf16_vec(gen, sz(B * T * W)));
  auto eqkv = D::up(qkv), edq = D::up(dq);
  cpu::bf16::rope_forward(qkv.data(), B, T, NH, NKV, hd, 500000.0f);
  cpu::bf16::rope_backward(dq.data(), B, T, NH, NKV, hd, 500000.0f);
  EmulatedApi::rope_forward(eqkv.data(), B, T, NH, NKV, hd, 500000.0f);
  EmulatedApi::rope_backward(edq.data(), B, T, NH, NKV, hd, 500000.0f);
  EXPECT_TRUE(bits(D::down(eqkv), qkv) && bits(D::down(edq), dq));
  // SwiGLU, with gate = x and up = g.
  std::vector<Bf16> s(sz(N * C)), dgate(sz(N * C)), dup(sz(N * C));
  cpu::bf16::swiglu_forward(s.data(), x.data(), g.data(), N, C);
  cpu::bf16::swiglu_backward(dgate.data(), dup.data(), out.data(), x.data(), g.data(), N, C);
  auto es = D::up(std::vector<Bf16>(sz(N * C))), edgate = D::up(std::vector<Bf16>(sz(N * C)));
  auto edup = D::up(std::vector<Bf16>(sz(N * C)));
  EmulatedApi::swiglu_forward(es.data(), dx.data(), dg.data(), N, C);
  EmulatedApi::swiglu_backward(edgate.data(), edup.data(), eout.data(), dx.data(), dg.data(), N,
                               C);
  EXPECT_TRUE(bits(D::down(es), s) && bits(D::down(edgate), dgate) && bits(D::down(edup), dup));
}

TEST(EmulatedKernels, LlamaBlockKernelsRefuseHostMemory) {
  // A host buffer handed to a kernel is a crash on a GPU: each wrapper says so instead.
  emu::DeviceBuffer<Bf16> d(64);
  emu::DeviceBuffer<float> f(64);
  std::vector<Bf16> hb(64);
  std::vector<float> hf(64);
  EXPECT_THROW(emu::rmsnorm_forward(d.data(), hf.data(), d.data(), d.data(), 1e-5f, 2, 8),
               emu::EmuError);
  EXPECT_THROW(emu::rmsnorm_backward(d.data(), f.data(), d.data(), hb.data(), d.data(), f.data(),
                                     2, 8),
               emu::EmuError);
  EXPECT_THROW(emu::rope_forward(hb.data(), 1, 2, 2, 1, 8, 1e4f), emu::EmuError);
  EXPECT_THROW(emu::rope_backward(hb.data(), 1, 2, 2, 1, 8, 1e4f), emu::EmuError);
  EXPECT_THROW(emu::swiglu_forward(d.data(), d.data(), hb.data(), 2, 8), emu::EmuError);
  EXPECT_THROW(emu::swiglu_backward(d.data(), hb.data(), d.data(), d.data(), d.data(), 2, 8),
               emu::EmuError);
}

// The emulated set has the CUDA set's functions with exactly the same signatures (decltype only:
// nothing of eth_kernels_cuda is linked). EmulatedApi's entries are the emu:: functions
// themselves, and its attention takes the CUDA set's own AttnDropout.
#define ETH_SAME_SIGNATURE(f) \
  static_assert(std::is_same_v<decltype(&emu::f), decltype(&cuda::f)>, #f)
ETH_SAME_SIGNATURE(encoder_forward);
ETH_SAME_SIGNATURE(encoder_backward);
ETH_SAME_SIGNATURE(vocab_embedding_forward);
ETH_SAME_SIGNATURE(vocab_embedding_backward);
ETH_SAME_SIGNATURE(position_forward);
ETH_SAME_SIGNATURE(position_backward);
ETH_SAME_SIGNATURE(layernorm_forward);
ETH_SAME_SIGNATURE(layernorm_backward);
ETH_SAME_SIGNATURE(rmsnorm_forward);
ETH_SAME_SIGNATURE(rmsnorm_backward);
ETH_SAME_SIGNATURE(rope_forward);
ETH_SAME_SIGNATURE(rope_backward);
ETH_SAME_SIGNATURE(swiglu_forward);
ETH_SAME_SIGNATURE(swiglu_backward);
ETH_SAME_SIGNATURE(matmul_nt_forward);
ETH_SAME_SIGNATURE(matmul_nt_backward);
ETH_SAME_SIGNATURE(matmul_nn_forward);
ETH_SAME_SIGNATURE(matmul_nn_backward);
ETH_SAME_SIGNATURE(matmul_nn_forward_partial);
ETH_SAME_SIGNATURE(matmul_nt_backward_partial);
ETH_SAME_SIGNATURE(matmul_nt_backward_rows);
ETH_SAME_SIGNATURE(matmul_nn_backward_rows);
ETH_SAME_SIGNATURE(matmul_nt_backward_partial_rows);
ETH_SAME_SIGNATURE(attention_forward);
ETH_SAME_SIGNATURE(attention_backward);
ETH_SAME_SIGNATURE(gelu_forward);
ETH_SAME_SIGNATURE(gelu_backward);
ETH_SAME_SIGNATURE(residual_forward);
ETH_SAME_SIGNATURE(residual_backward);
ETH_SAME_SIGNATURE(dropout_forward);
ETH_SAME_SIGNATURE(dropout_backward);
ETH_SAME_SIGNATURE(dropout_mask_fill);
ETH_SAME_SIGNATURE(convert_to_bf16);
ETH_SAME_SIGNATURE(crossentropy_forward);
ETH_SAME_SIGNATURE(crossentropy_forward_add);
ETH_SAME_SIGNATURE(crossentropy_backward);
ETH_SAME_SIGNATURE(vocab_ce_max);
ETH_SAME_SIGNATURE(vocab_ce_sums);
ETH_SAME_SIGNATURE(vocab_ce_finish);
ETH_SAME_SIGNATURE(vocab_ce_finish_add);
ETH_SAME_SIGNATURE(vocab_ce_backward);
ETH_SAME_SIGNATURE(adamw_update);
ETH_SAME_SIGNATURE(sum_squares);
ETH_SAME_SIGNATURE(compiled);
ETH_SAME_SIGNATURE(device_count);
ETH_SAME_SIGNATURE(unavailable_reason);
ETH_SAME_SIGNATURE(set_device);
ETH_SAME_SIGNATURE(alloc);
ETH_SAME_SIGNATURE(free);
ETH_SAME_SIGNATURE(copy_to_device);
ETH_SAME_SIGNATURE(copy_to_host);
ETH_SAME_SIGNATURE(copy_on_device);
ETH_SAME_SIGNATURE(memset_zero);
ETH_SAME_SIGNATURE(synchronize);
#undef ETH_SAME_SIGNATURE
static_assert(EmulatedApi::attention_forward == &emu::attention_forward);
static_assert(EmulatedApi::rmsnorm_forward == &emu::rmsnorm_forward);
static_assert(EmulatedApi::rope_backward == &emu::rope_backward);
static_assert(EmulatedApi::swiglu_backward == &emu::swiglu_backward);
static_assert(EmulatedApi::copy_to_host == &emu::copy_to_host);
static_assert(EmulatedApi::crossentropy_forward_add == &emu::crossentropy_forward_add);
static_assert(EmulatedApi::vocab_ce_finish_add == &emu::vocab_ce_finish_add);
// add_inplace / max_inplace are overloaded static functions in both Apis, with the same overloads.
template <class Api, typename T>
concept HasInplace = requires(T* x, const T* y, std::int64_t n) {
  Api::add_inplace(x, y, n);
  Api::max_inplace(x, y, n);
};
static_assert(HasInplace<EmulatedApi, float> && HasInplace<EmulatedApi, double>);
static_assert(HasInplace<CudaApi, float> && HasInplace<CudaApi, double>);
static_assert(std::is_same_v<EmulatedApi::AttnDropout, cuda::AttnDropout>);

}  // namespace
}  // namespace eth::emulated_kernels_test
