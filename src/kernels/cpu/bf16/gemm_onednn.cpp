// bf16 GEMM through oneDNN's matmul primitive: op(A) and op(B) are described by strides (a
// transposed operand is the same buffer with swapped strides), C by its leading dimension, so
// no operand is copied. Primitives are created once per shape and kept; every call then only
// wraps the pointers in memory objects and executes.
#include <oneapi/dnnl/dnnl.hpp>

#include <bit>
#include <compare>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/bf16/gemm_detail.h"

namespace eth::cpu::bf16::detail {
namespace {

using dnnl::memory;
using Dims = memory::dims;

// Everything a primitive depends on (pointers are not part of it).
struct Key {
  bool trans_a = false, trans_b = false, c_bf16 = false, sum = false, bias = false;
  std::int64_t M = 0, N = 0, K = 0, lda = 0, ldb = 0, ldc = 0;
  std::uint32_t alpha_bits = 0;
  auto operator<=>(const Key&) const = default;
};

struct Entry {
  dnnl::matmul prim;
  memory::desc a, b, c, bias, scratch;
};

const dnnl::engine& engine() {
  static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

std::unique_ptr<Entry> create(const Key& k) {
  auto e = std::make_unique<Entry>();
  // op(A) (M,K): row i, column k at A[i*lda + k], or A[k*lda + i] when transposed.
  e->a = memory::desc(Dims{k.M, k.K}, memory::data_type::bf16,
                      k.trans_a ? Dims{1, k.lda} : Dims{k.lda, 1});
  e->b = memory::desc(Dims{k.K, k.N}, memory::data_type::bf16,
                      k.trans_b ? Dims{1, k.ldb} : Dims{k.ldb, 1});
  e->c = memory::desc(Dims{k.M, k.N}, k.c_bf16 ? memory::data_type::bf16 : memory::data_type::f32,
                      Dims{k.ldc, 1});
  if (k.bias) e->bias = memory::desc(Dims{1, k.N}, memory::data_type::bf16, Dims{k.N, 1});
  dnnl::primitive_attr attr;
  // Our own per-thread scratchpad: executions from several threads never share one.
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const float alpha = std::bit_cast<float>(k.alpha_bits);
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  if (k.sum) {
    dnnl::post_ops po;
    po.append_sum(1.0f);  // C += product (fp32 accumulation of parameter gradients)
    attr.set_post_ops(po);
  }
  const auto desc = k.bias ? dnnl::matmul::desc(e->a, e->b, e->bias, e->c)
                           : dnnl::matmul::desc(e->a, e->b, e->c);
  const dnnl::matmul::primitive_desc pd(desc, attr, engine());
  e->prim = dnnl::matmul(pd);
  e->scratch = pd.scratchpad_desc();
  return e;
}

// The process-wide cache: immutable entries, never evicted (a run has few shapes), so the
// pointers it hands out stay valid; the mutex only guards the map.
const Entry& lookup(const Key& k) {
  static std::mutex mu;
  static std::map<Key, std::unique_ptr<Entry>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(k);
  if (it == cache.end()) {
    std::unique_ptr<Entry> e;
    try {
      e = create(k);
    } catch (const dnnl::error& err) {
      ETH_CHECK(false, std::string("bf16 GEMM: oneDNN cannot create a bf16 matmul here: ") +
                           err.what());
    }
    it = cache.emplace(k, std::move(e)).first;
  }
  return *it->second;
}

struct ThreadState {
  dnnl::stream stream{engine()};
  std::vector<unsigned char> scratch;
};

ThreadState& thread_state() {
  thread_local ThreadState s;
  return s;
}

void* mut(const void* p) { return const_cast<void*>(p); }  // oneDNN takes inputs as void*

}  // namespace

bool onednn_bf16_available() {
  static const bool ok = [] {
    try {
      Key k;
      k.M = k.N = k.K = k.lda = k.ldb = k.ldc = 16;
      k.c_bf16 = true;
      k.alpha_bits = std::bit_cast<std::uint32_t>(1.0f);
      create(k);
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return ok;
}

void onednn_bf16_gemm(const GemmCall& c) {
  Key k;
  k.trans_a = c.trans_a == Trans::Yes;
  k.trans_b = c.trans_b == Trans::Yes;
  k.c_bf16 = c.C16 != nullptr;
  k.sum = c.C32 != nullptr && c.beta != 0.0f;
  k.bias = c.bias != nullptr;
  k.M = c.M, k.N = c.N, k.K = c.K, k.lda = c.lda, k.ldb = c.ldb, k.ldc = c.ldc;
  k.alpha_bits = std::bit_cast<std::uint32_t>(c.alpha);
  const Entry& e = lookup(k);
  ThreadState& ts = thread_state();
  const dnnl::engine& eng = engine();
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, memory(e.a, eng, mut(c.A))},
      {DNNL_ARG_WEIGHTS, memory(e.b, eng, mut(c.B))},
      {DNNL_ARG_DST, memory(e.c, eng, k.c_bf16 ? static_cast<void*>(c.C16) : c.C32)}};
  if (k.bias) args.emplace(DNNL_ARG_BIAS, memory(e.bias, eng, mut(c.bias)));
  const std::size_t scratch_bytes = e.scratch.get_size();
  if (scratch_bytes > 0) {
    if (ts.scratch.size() < scratch_bytes) ts.scratch.resize(scratch_bytes);
    args.emplace(DNNL_ARG_SCRATCHPAD, memory(e.scratch, eng, ts.scratch.data()));
  }
  e.prim.execute(ts.stream, args);
  ts.stream.wait();
}

}  // namespace eth::cpu::bf16::detail
