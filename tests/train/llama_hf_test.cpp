// ETH's Llama against an independent implementation: Hugging Face transformers'
// LlamaForCausalLM (tests/data/llama/fixture.safetensors, made by tools/make_llama_fixture.py:
// random weights, a fixed batch, transformers' logits, torch's mean cross-entropy and the
// gradient of every weight after one backward, all fp32). The same weights in ETH's layout, one
// forward and backward with the fp32 CPU kernels: the logits, the loss and every gradient agree
// to 1e-5.
//
// The mapping (nn.Linear stores (out, in)): q_proj, k_proj, v_proj are ETH's qkv_w rows in its
// kv-group-interleaved order (per key/value head g: the rows of its query heads, then k_g, then
// v_g; query head h belongs to group h / (NH / NKV), as in transformers' repeat_kv), each head's
// rows as they are (transformers' rotate-half rope is the kernels'); o_proj and down_proj are
// ETH's row-parallel proj_w and down_w, stored (in, out): transposed; gate_proj, up_proj and
// lm_head are copied.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "hf/safetensors.h"
#include "train/kernel_set.h"
#include "train/model_state.h"
#include "train/stage_compute.h"
#include "llama_test_util.h"
#include "train_test_util.h"

namespace eth {
namespace {

constexpr std::int64_t kB = 2;

// tools/make_llama_fixture.py's model.
ModelSpec fixture_model() {
  ModelSpec m = test::small_llama();
  m.name = "hf-llama";
  m.kv_heads = 2;
  m.layers = 2;
  m.hidden = 32;
  m.heads = 4;
  m.ffn = 48;
  m.vocab = 64;
  m.seq_len = 16;
  return m;
}

class Fixture {
 public:
  Fixture() : file_(std::filesystem::path(ETH_TEST_DATA_DIR) / "llama" / "fixture.safetensors") {}
  std::vector<float> read(const std::string& name, const std::vector<std::int64_t>& shape) const {
    const hf::TensorInfo* t = file_.find(name);
    if (t == nullptr) throw std::runtime_error("fixture lacks " + name);
    if (t->shape != shape) throw std::runtime_error("fixture: unexpected shape of " + name);
    std::vector<float> v(static_cast<std::size_t>(t->numel()));
    file_.read_f32(*t, v.data());
    return v;
  }

 private:
  hf::SafetensorsFile file_;
};

// Fills ETH's tensors of the whole model from transformers' tensors named `prefix` + name
// (prefix "" for the weights, "grad." for their gradients).
std::vector<float> eth_buffer(const Fixture& fx, const ModelSpec& m, const ParamLayout& layout,
                              const std::string& prefix) {
  const std::int64_t C = m.hidden, F = m.ffn, V = m.vocab, hd = m.head_dim();
  const std::int64_t NH = m.heads, NKV = m.num_kv_heads(), group = NH / NKV;
  std::vector<float> out(static_cast<std::size_t>(layout.numel()), 0.0f);
  auto at = [&](std::int64_t unit, int role) {
    const UnitSlot& u = layout.unit(unit);
    const int i = u.index_of(role);
    EXPECT_GE(i, 0);
    return out.data() + u.tensors[static_cast<std::size_t>(i)].offset;
  };
  auto copy = [&](float* dst, const std::vector<float>& src) {
    std::copy(src.begin(), src.end(), dst);
  };
  auto transpose = [&](float* dst, const std::vector<float>& src, std::int64_t rows,
                       std::int64_t cols) {  // src (rows, cols) -> dst (cols, rows)
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < cols; ++c) {
        dst[c * rows + r] = src[static_cast<std::size_t>(r * cols + c)];
      }
    }
  };
  copy(at(0, kWte), fx.read(prefix + "model.embed_tokens.weight", {V, C}));
  for (std::int64_t l = 0; l < m.layers; ++l) {
    const std::int64_t u = l + 1;
    const std::string h = prefix + "model.layers." + std::to_string(l) + ".";
    copy(at(u, kLn1W), fx.read(h + "input_layernorm.weight", {C}));
    const auto q = fx.read(h + "self_attn.q_proj.weight", {NH * hd, C});
    const auto k = fx.read(h + "self_attn.k_proj.weight", {NKV * hd, C});
    const auto v = fx.read(h + "self_attn.v_proj.weight", {NKV * hd, C});
    float* qkv = at(u, kQkvW);
    std::int64_t row = 0;
    auto put = [&](const std::vector<float>& src, std::int64_t head) {
      for (std::int64_t r = 0; r < hd; ++r, ++row) {
        std::copy_n(src.begin() + (head * hd + r) * C, C, qkv + row * C);
      }
    };
    for (std::int64_t g = 0; g < NKV; ++g) {
      for (std::int64_t j = 0; j < group; ++j) put(q, g * group + j);
      put(k, g);
      put(v, g);
    }
    transpose(at(u, kProjW), fx.read(h + "self_attn.o_proj.weight", {C, NH * hd}), C, NH * hd);
    copy(at(u, kLn2W), fx.read(h + "post_attention_layernorm.weight", {C}));
    copy(at(u, kGateW), fx.read(h + "mlp.gate_proj.weight", {F, C}));
    copy(at(u, kUpW), fx.read(h + "mlp.up_proj.weight", {F, C}));
    transpose(at(u, kDownW), fx.read(h + "mlp.down_proj.weight", {C, F}), C, F);
  }
  copy(at(m.layers + 1, kLnfW), fx.read(prefix + "model.norm.weight", {C}));
  copy(at(m.layers + 1, kLmHeadW), fx.read(prefix + "lm_head.weight", {V, C}));
  return out;
}

std::vector<std::int32_t> ids(const std::vector<float>& v) {
  std::vector<std::int32_t> out;
  for (float x : v) out.push_back(static_cast<std::int32_t>(x));
  return out;
}

TEST(LlamaHf, ForwardAndGradientsMatchTransformers) {
  const test::OneThread one_thread;
  const Fixture fx;
  const ModelSpec m = fixture_model();
  const std::int64_t T = m.seq_len, V = m.vocab;
  const ParamLayout layout(m, 0, m.num_units() - 1);
  const std::vector<float> params = eth_buffer(fx, m, layout, "");
  const std::vector<float> want_grads = eth_buffer(fx, m, layout, "grad.");
  const auto tokens = ids(fx.read("input_ids", {kB, T}));
  const auto targets = ids(fx.read("targets", {kB, T}));
  const auto want_logits = fx.read("logits", {kB, T, V});
  const double want_loss = fx.read("loss", {1})[0];

  StageCompute<CpuKernels> sc(m, test::whole_model(m, kB));
  const MicroBatch mb = test::micro_batch(tokens, targets, kB, T);
  std::vector<float> grads(params.size(), 0.0f);
  sc.forward(0, params.data(), mb, nullptr, nullptr);
  const double loss = sc.take_loss();
  sc.backward(0, params.data(), grads.data(), mb, nullptr, nullptr);
  std::printf("loss: transformers %.7f, ETH %.7f\n", want_loss, loss);
  EXPECT_NEAR(loss, want_loss, 1e-5 * want_loss);

  // Logits: the head's input (the output of units 0..L) through ETH's RMSNorm and LM head
  // kernels, which the head unit runs.
  StageComputeConfig body = test::whole_model(m, kB);
  body.last_unit = m.layers;
  StageCompute<CpuKernels> bsc(m, body);
  const std::int64_t N = kB * T, C = m.hidden;
  std::vector<float> x(static_cast<std::size_t>(N * C)), y(x.size());
  std::vector<float> rstd(static_cast<std::size_t>(N)), logits(static_cast<std::size_t>(N * V));
  bsc.forward(0, params.data(), mb, nullptr, x.data());
  const UnitSlot& head = layout.unit(m.layers + 1);
  auto weight = [&](int role) {
    return params.data() + head.tensors[static_cast<std::size_t>(head.index_of(role))].offset;
  };
  CpuKernels::rmsnorm_forward(y.data(), rstd.data(), x.data(), weight(kLnfW),
                              static_cast<float>(m.norm_eps), N, C);
  CpuKernels::matmul_nt_forward(logits.data(), y.data(), weight(kLmHeadW), nullptr, N, C, V);
  double lmax = 0, lworst = 0;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    lmax = std::max(lmax, std::abs(static_cast<double>(want_logits[i])));
    lworst = std::max(lworst, std::abs(static_cast<double>(logits[i]) - want_logits[i]));
  }
  std::printf("logits: worst difference %.3e of largest %.3e\n", lworst, lmax);
  EXPECT_LT(lworst, 1e-5 * lmax);

  double gmax = 0, worst = 0;
  std::size_t worst_i = 0;
  for (float g : want_grads) gmax = std::max(gmax, std::abs(static_cast<double>(g)));
  for (std::size_t i = 0; i < grads.size(); ++i) {
    const double d = std::abs(static_cast<double>(grads[i]) - want_grads[i]);
    if (d > worst) {
      worst = d;
      worst_i = i;
    }
  }
  std::printf("gradients: worst difference %.3e of largest %.3e (element %zu)\n", worst, gmax,
              worst_i);
  EXPECT_LT(worst, 1e-5 * gmax);
}

}  // namespace
}  // namespace eth
