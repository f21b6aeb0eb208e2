// GPT-2 tensor mapping and the two conversions. See gpt2_convert.h.
#include "hf/gpt2_convert.h"

#include <algorithm>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "hf/convert_io.h"
#include "hf/tensor_check.h"

namespace eth::hf {

namespace {

constexpr const char* kConfig = "config.json";

// Buffers old GPT-2 files carry beside the weights (the causal mask and its fill value): not
// parameters, recomputed by every implementation, so skipped.
bool is_mask_buffer(const std::string& name) {
  return name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias");
}

}  // namespace

std::vector<Gpt2Tensor> gpt2_tensors(const ModelSpec& m, bool tied, const std::string& prefix) {
  const std::int64_t C = m.hidden, F = m.ffn, V = m.vocab, T = m.seq_len;
  using M = Gpt2Tensor::Map;
  std::vector<Gpt2Tensor> out = {{prefix + "wte.weight", {V, C}, 0, kWte, M::Copy},
                                 {prefix + "wpe.weight", {T, C}, 0, kWpe, M::Copy}};
  for (std::int64_t l = 0; l < m.layers; ++l) {
    const std::string h = prefix + "h." + std::to_string(l) + ".";
    const std::int64_t u = l + 1;
    const std::vector<Gpt2Tensor> block = {
        {h + "ln_1.weight", {C}, u, kLn1W, M::Copy},
        {h + "ln_1.bias", {C}, u, kLn1B, M::Copy},
        {h + "attn.c_attn.weight", {C, 3 * C}, u, kQkvW, M::Qkv},
        {h + "attn.c_attn.bias", {3 * C}, u, kQkvB, M::Qkv},
        {h + "attn.c_proj.weight", {C, C}, u, kProjW, M::Copy},
        {h + "attn.c_proj.bias", {C}, u, kProjB, M::Copy},
        {h + "ln_2.weight", {C}, u, kLn2W, M::Copy},
        {h + "ln_2.bias", {C}, u, kLn2B, M::Copy},
        {h + "mlp.c_fc.weight", {C, F}, u, kFcW, M::Transpose},
        {h + "mlp.c_fc.bias", {F}, u, kFcB, M::Copy},
        {h + "mlp.c_proj.weight", {F, C}, u, kFcprojW, M::Copy},
        {h + "mlp.c_proj.bias", {C}, u, kFcprojB, M::Copy}};
    out.insert(out.end(), block.begin(), block.end());
  }
  const std::int64_t head = m.layers + 1;
  out.push_back({prefix + "ln_f.weight", {C}, head, kLnfW, M::Copy});
  out.push_back({prefix + "ln_f.bias", {C}, head, kLnfB, M::Copy});
  if (!tied) out.push_back({"lm_head.weight", {V, C}, head, kLmHeadW, M::Copy});
  return out;
}

namespace {

// ETH row of HF qkv column `col`: HF groups [all q; all k; all v], ETH [q_h; k_h; v_h] per head.
std::int64_t qkv_row(std::int64_t col, std::int64_t C, std::int64_t hs) {
  const std::int64_t part = col / C, r = col % C;
  return (r / hs) * 3 * hs + part * hs + r % hs;
}

// One loop for both directions: kToEth copies src (HF) -> dst (ETH), else src (ETH) -> dst (HF).
template <bool kToEth>
void map_values(const ModelSpec& m, const Gpt2Tensor& t, const float* src, float* dst) {
  std::int64_t n = 1;
  for (std::int64_t d : t.hf_shape) n *= d;
  auto move = [&](std::int64_t hi, std::int64_t ei) {
    if constexpr (kToEth) {
      dst[ei] = src[hi];
    } else {
      dst[hi] = src[ei];
    }
  };
  switch (t.map) {
    case Gpt2Tensor::Map::Copy:
      for (std::int64_t i = 0; i < n; ++i) move(i, i);
      return;
    case Gpt2Tensor::Map::Transpose: {
      const std::int64_t a = t.hf_shape[0], b = t.hf_shape[1];
      for (std::int64_t i = 0; i < a; ++i) {
        for (std::int64_t j = 0; j < b; ++j) move(i * b + j, j * a + i);
      }
      return;
    }
    case Gpt2Tensor::Map::Qkv: {
      const std::int64_t C = m.hidden, hs = m.head_dim();
      if (t.hf_shape.size() == 1) {
        for (std::int64_t col = 0; col < 3 * C; ++col) move(col, qkv_row(col, C, hs));
        return;
      }
      for (std::int64_t i = 0; i < C; ++i) {
        for (std::int64_t col = 0; col < 3 * C; ++col) {
          move(i * 3 * C + col, qkv_row(col, C, hs) * C + i);
        }
      }
      return;
    }
  }
}

}  // namespace

void gpt2_to_eth(const ModelSpec& model, const Gpt2Tensor& t, const float* hf, float* eth) {
  map_values<true>(model, t, hf, eth);
}

void eth_to_gpt2(const ModelSpec& model, const Gpt2Tensor& t, const float* eth, float* hf) {
  map_values<false>(model, t, eth, hf);
}

Gpt2Source open_gpt2(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    throw InputError("hf", dir.string(), "", "not a folder (expected a Hugging Face model folder)");
  }
  Gpt2Source src;
  src.dir = dir;
  src.config = read_gpt2_config(dir / kConfig);
  src.weights = std::make_unique<SafetensorsModel>(dir);
  const SafetensorsModel& w = *src.weights;
  // GPT2LMHeadModel names its body "transformer."; files saved from a bare GPT2Model (the
  // original OpenAI conversion) have no prefix.
  const std::string prefix = w.find("transformer.wte.weight") || !w.find("wte.weight")
                                 ? "transformer."
                                 : "";
  const ModelSpec& m = src.config.model;
  src.tensors = gpt2_tensors(m, src.config.tied, prefix);
  src.dtype =
      check_hf_tensors(w, src.tensors, src.config.tied, is_mask_buffer, "GPT2LMHeadModel");
  return src;
}

void load_gpt2(const Gpt2Source& src, ModelState& state) {
  const ModelSpec& m = src.config.model;
  ETH_CHECK(state.layout().tp() == 1 && state.layout().first_unit() == 0 &&
                state.layout().last_unit() == m.num_units() - 1,
            "load_gpt2: a whole-model state");
  std::vector<float> hf;
  auto load = [&](const Gpt2Tensor& t, std::int64_t unit, int tensor) {
    hf.resize(static_cast<std::size_t>(std::max<std::int64_t>(1, [&] {
      std::int64_t n = 1;
      for (std::int64_t d : t.hf_shape) n *= d;
      return n;
    }())));
    src.weights->read_f32(t.hf_name, hf.data());
    gpt2_to_eth(m, t, hf.data(), state.params() + state.layout().offset(unit, tensor));
  };
  for (const Gpt2Tensor& t : src.tensors) {
    load(t, t.unit, t.tensor);
    // Tied: the one wte tensor is also ETH's LM head, whose layout is the same (V, C).
    if (t.unit == 0 && t.tensor == kWte && src.config.tied) load(t, m.layers + 1, kLmHeadW);
  }
  std::fill(state.adam_m(), state.adam_m() + state.numel(), 0.0f);
  std::fill(state.adam_v(), state.adam_v() + state.numel(), 0.0f);
  state.refresh_compute_copy();
}

ConvertReport convert_from_hf(const std::filesystem::path& dir, const std::filesystem::path& out,
                              bool overwrite) {
  check_import_output(out, overwrite);
  const Gpt2Source src = open_gpt2(dir);
  const ModelSpec& m = src.config.model;
  ModelState state(m, 0, m.num_units() - 1);
  load_gpt2(src, state);
  return write_hf_import(out, state, src.config.raw, src.dtype, src.config.tied,
                         src.tensors.size(), src.weights->files());
}

ConvertReport convert_to_hf(const std::filesystem::path& checkpoint,
                            const std::filesystem::path& dir, const std::string& dtype_arg,
                            bool overwrite) {
  const CheckpointMeta meta = read_checkpoint_meta(checkpoint);
  const HfExportChoice choice =
      choose_hf_export(meta, dtype_arg, [](const Json&) { return true; });
  check_export_dir(dir, overwrite);
  const ModelSpec& m = meta.model;
  ModelState state(m, 0, m.num_units() - 1);
  load_checkpoint(checkpoint, state);
  const float* wte = state.params() + state.layout().offset(0, kWte);
  const float* head = state.params() + state.layout().offset(m.layers + 1, kLmHeadW);
  const bool tied = std::memcmp(wte, head, static_cast<std::size_t>(m.vocab * m.hidden) * 4) == 0;
  const std::vector<Gpt2Tensor> tensors = gpt2_tensors(m, tied);
  std::vector<TensorOut> outs;
  for (const Gpt2Tensor& t : tensors) outs.push_back({t.hf_name, choice.dtype, t.hf_shape});
  const Json config = gpt2_config_json(m, tied, torch_dtype_name(choice.dtype), choice.base);
  return write_hf_export(checkpoint, dir, m, tied, choice.dtype, outs, config,
                         [&](std::size_t i, std::span<float> values) {
                           const Gpt2Tensor& t = tensors[i];
                           eth_to_gpt2(m, t,
                                       state.params() + state.layout().offset(t.unit, t.tensor),
                                       values.data());
                         });
}

}  // namespace eth::hf
