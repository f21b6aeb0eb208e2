// Llama tensor mapping and the two conversions. See llama_convert.h.
#include "hf/llama_convert.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "hf/convert_io.h"
#include "hf/tensor_check.h"
#include "train/checkpoint.h"

namespace eth::hf {

namespace {

constexpr const char* kConfig = "config.json";

// Old transformers saved the rotary frequencies as a buffer: not a parameter, recomputed.
bool is_rotary_buffer(const std::string& name) { return name.ends_with("rotary_emb.inv_freq"); }

std::int64_t numel(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

// Index of `name` in unit_tensors(unit): the Llama family's units have no biases and no
// position table, so the indices are not GPT's (model_state.h's enums).
int tensor_index(const ModelSpec& m, std::int64_t unit, const char* name) {
  const std::vector<TensorDesc> ts = unit_tensors(m, unit);
  for (std::size_t i = 0; i < ts.size(); ++i) {
    if (ts[i].name == name) return static_cast<int>(i);
  }
  ETH_CHECK(false, std::string("llama: unit has no tensor ") + name);
  return -1;
}

// ETH qkv_w row of row `r` of the HF q (part 0), k (1) or v (2) projection.
std::int64_t qkv_row(const ModelSpec& m, int part, std::int64_t r) {
  const std::int64_t hd = m.head_dim(), G = m.heads / m.num_kv_heads();
  const std::int64_t group = (G + 2) * hd, d = r % hd, head = r / hd;
  if (part == 0) return (head / G) * group + (head % G) * hd + d;
  return head * group + (G + part - 1) * hd + d;
}

// One loop for both directions: kToEth copies src (HF) -> dst (ETH), else src (ETH) -> dst (HF).
template <bool kToEth>
void map_values(const ModelSpec& m, const LlamaTensor& t, const float* src, float* dst) {
  auto move = [&](std::int64_t hi, std::int64_t ei, std::int64_t count) {
    if constexpr (kToEth) {
      std::copy(src + hi, src + hi + count, dst + ei);
    } else {
      std::copy(src + ei, src + ei + count, dst + hi);
    }
  };
  using M = LlamaTensor::Map;
  switch (t.map) {
    case M::Copy:
      move(0, 0, numel(t.hf_shape));
      return;
    case M::Transpose: {
      const std::int64_t a = t.hf_shape[0], b = t.hf_shape[1];
      for (std::int64_t i = 0; i < a; ++i) {
        for (std::int64_t j = 0; j < b; ++j) move(i * b + j, j * a + i, 1);
      }
      return;
    }
    case M::Q:
    case M::K:
    case M::V: {
      const int part = t.map == M::Q ? 0 : t.map == M::K ? 1 : 2;
      const std::int64_t C = m.hidden;
      for (std::int64_t r = 0; r < t.hf_shape[0]; ++r) move(r * C, qkv_row(m, part, r) * C, C);
      return;
    }
  }
}

}  // namespace

std::vector<LlamaTensor> llama_tensors(const ModelSpec& m, const std::string& prefix) {
  ETH_CHECK(is_llama_family(m), "llama_tensors: a Llama-family model");
  const std::int64_t C = m.hidden, F = m.ffn, V = m.vocab, KV = m.kv_dim();
  using M = LlamaTensor::Map;
  std::vector<LlamaTensor> out = {
      {prefix + "embed_tokens.weight", {V, C}, 0, tensor_index(m, 0, "wte"), M::Copy}};
  for (std::int64_t l = 0; l < m.layers; ++l) {
    const std::string h = prefix + "layers." + std::to_string(l) + ".";
    const std::int64_t u = l + 1;
    const int qkv = tensor_index(m, u, "qkv_w");
    const std::vector<LlamaTensor> block = {
        {h + "input_layernorm.weight", {C}, u, tensor_index(m, u, "ln1_w"), M::Copy},
        {h + "self_attn.q_proj.weight", {C, C}, u, qkv, M::Q},
        {h + "self_attn.k_proj.weight", {KV, C}, u, qkv, M::K},
        {h + "self_attn.v_proj.weight", {KV, C}, u, qkv, M::V},
        {h + "self_attn.o_proj.weight", {C, C}, u, tensor_index(m, u, "proj_w"), M::Transpose},
        {h + "post_attention_layernorm.weight", {C}, u, tensor_index(m, u, "ln2_w"), M::Copy},
        {h + "mlp.gate_proj.weight", {F, C}, u, tensor_index(m, u, "gate_w"), M::Copy},
        {h + "mlp.up_proj.weight", {F, C}, u, tensor_index(m, u, "up_w"), M::Copy},
        {h + "mlp.down_proj.weight", {C, F}, u, tensor_index(m, u, "down_w"), M::Transpose}};
    out.insert(out.end(), block.begin(), block.end());
  }
  const std::int64_t head = m.layers + 1;
  out.push_back({prefix + "norm.weight", {C}, head, tensor_index(m, head, "lnf_w"), M::Copy});
  if (!m.tied_embeddings) {
    out.push_back({"lm_head.weight", {V, C}, head, tensor_index(m, head, "lm_head_w"), M::Copy});
  }
  std::sort(out.begin(), out.end(),
            [](const LlamaTensor& a, const LlamaTensor& b) { return a.hf_name < b.hf_name; });
  return out;
}

void llama_to_eth(const ModelSpec& model, const LlamaTensor& t, const float* hf, float* eth) {
  map_values<true>(model, t, hf, eth);
}

void eth_to_llama(const ModelSpec& model, const LlamaTensor& t, const float* eth, float* hf) {
  map_values<false>(model, t, eth, hf);
}

LlamaSource open_llama(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    throw InputError("hf", dir.string(), "", "not a folder (expected a Hugging Face model folder)");
  }
  LlamaSource src;
  src.dir = dir;
  src.config = read_llama_config(dir / kConfig);
  src.weights = std::make_unique<SafetensorsModel>(dir);
  const SafetensorsModel& w = *src.weights;
  // LlamaForCausalLM names its body "model."; a bare LlamaModel's files have no prefix.
  const std::string prefix =
      w.find("model.embed_tokens.weight") || !w.find("embed_tokens.weight") ? "model." : "";
  const ModelSpec& m = src.config.model;
  src.tensors = llama_tensors(m, prefix);
  src.dtype =
      check_hf_tensors(w, src.tensors, m.tied_embeddings, is_rotary_buffer, "LlamaForCausalLM");
  return src;
}

void load_llama(const LlamaSource& src, ModelState& state) {
  const ModelSpec& m = src.config.model;
  ETH_CHECK(state.model() == m && state.layout().tp() == 1 &&
                state.layout().first_unit() == 0 &&
                state.layout().last_unit() == m.num_units() - 1,
            "load_llama: a whole-model state of the config's model");
  const std::int64_t head = m.layers + 1;
  const int head_w = tensor_index(m, head, "lm_head_w");
  std::vector<float> hf;
  for (const LlamaTensor& t : src.tensors) {
    hf.resize(static_cast<std::size_t>(std::max<std::int64_t>(1, numel(t.hf_shape))));
    src.weights->read_f32(t.hf_name, hf.data());
    llama_to_eth(m, t, hf.data(), state.params() + state.layout().offset(t.unit, t.tensor));
    // Tied: the one embedding is also ETH's LM head, of the same (V, C) layout.
    if (t.unit == 0 && m.tied_embeddings) {
      llama_to_eth(m, t, hf.data(), state.params() + state.layout().offset(head, head_w));
    }
  }
  std::fill(state.adam_m(), state.adam_m() + state.numel(), 0.0f);
  std::fill(state.adam_v(), state.adam_v() + state.numel(), 0.0f);
  state.refresh_compute_copy();
}

ConvertReport convert_llama_from_hf(const std::filesystem::path& dir,
                                    const std::filesystem::path& out, bool overwrite) {
  check_import_output(out, overwrite);
  const LlamaSource src = open_llama(dir);
  const ModelSpec& m = src.config.model;
  ModelState state(m, 0, m.num_units() - 1);
  load_llama(src, state);
  return write_hf_import(out, state, src.config.raw, src.dtype, m.tied_embeddings,
                         src.tensors.size(), src.weights->files());
}

ConvertReport convert_llama_to_hf(const std::filesystem::path& checkpoint,
                                  const std::filesystem::path& dir, const std::string& dtype_arg,
                                  bool overwrite) {
  const CheckpointMeta meta = read_checkpoint_meta(checkpoint);
  const ModelSpec& m = meta.model;
  if (!is_llama_family(m)) {
    throw InputError("convert", checkpoint.string(), "model",
                     "not a Llama-family model (RMSNorm, rotary positions, SwiGLU, no biases)");
  }
  // Only a Llama config is a base: another family's fields would not describe this model.
  const HfExportChoice choice = choose_hf_export(meta, dtype_arg, [](const Json& config) {
    return config.is_object() && config.value("model_type", Json()) == "llama";
  });
  check_export_dir(dir, overwrite);
  ModelState state(m, 0, m.num_units() - 1);
  load_checkpoint(checkpoint, state);
  const std::vector<LlamaTensor> tensors = llama_tensors(m);
  std::vector<TensorOut> outs;
  for (const LlamaTensor& t : tensors) outs.push_back({t.hf_name, choice.dtype, t.hf_shape});
  const Json config = llama_config_json(m, torch_dtype_name(choice.dtype), choice.base);
  return write_hf_export(checkpoint, dir, m, m.tied_embeddings, choice.dtype, outs, config,
                         [&](std::size_t i, std::span<float> values) {
                           const LlamaTensor& t = tensors[i];
                           eth_to_llama(m, t,
                                        state.params() + state.layout().offset(t.unit, t.tensor),
                                        values.data());
                         });
}

}  // namespace eth::hf
