// LlamaForCausalLM folders <-> ETH checkpoints: the tensor mapping both ways, and the two
// conversions `eth convert` runs for the Llama family (hf/convert.h picks the family).
//
// The mapping (C hidden, F intermediate, hd head size, NH query and NKV key/value heads,
// G = NH / NKV; HF Linear weights are stored (out, in)):
//   model.embed_tokens.weight (V,C)       -> unit0.wte (V,C)
//   model.layers.l.input_layernorm.weight -> unit(l+1).ln1_w    (post_attention_layernorm -> ln2_w)
//   model.layers.l.self_attn.{q,k,v}_proj.weight (NH hd,C), (NKV hd,C), (NKV hd,C)
//                                         -> qkv_w (C + 2 NKV hd, C), rows GROUPED: per kv head g
//                                            its G query heads, then k_g, then v_g, hd rows each:
//                                            q row h hd + d -> (h/G)(G+2)hd + (h%G)hd + d,
//                                            k row g hd + d -> g(G+2)hd + G hd + d, v: + (G+1)hd.
//                                            No rotary permutation: ETH rotates halves within a
//                                            head (element i with i + hd/2), as transformers does.
//   model.layers.l.self_attn.o_proj.weight (C,C) -> proj_w (C,C), transposed (ETH: (in, out))
//   model.layers.l.mlp.gate_proj.weight (F,C)    -> gate_w (F,C), as is  (up_proj -> up_w)
//   model.layers.l.mlp.down_proj.weight (C,F)    -> down_w (F,C), transposed
//   model.norm.weight                     -> unit(L+1).lnf_w
//   lm_head.weight (V,C), or embed_tokens when tied -> unit(L+1).lm_head_w
// Every permutation is a bijection on the values, so import then export returns the same bits.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "hf/gpt2_convert.h"  // ConvertReport
#include "hf/llama_config.h"
#include "hf/safetensors.h"
#include "train/model_state.h"

namespace eth::hf {

// One HF tensor and where its values go in ETH.
struct LlamaTensor {
  enum class Map : std::uint8_t { Copy, Transpose, Q, K, V };
  std::string hf_name;
  std::vector<std::int64_t> hf_shape;
  std::int64_t unit = 0;
  int tensor = 0;  // index in unit_tensors(unit)
  Map map = Map::Copy;
};

// The HF tensors of `model` (is_llama_family) sorted by name, as save_pretrained writes them;
// lm_head.weight only when the model is untied; `prefix` ("model.") on all but lm_head.
std::vector<LlamaTensor> llama_tensors(const ModelSpec& model,
                                       const std::string& prefix = "model.");

// HF values (t.hf_shape) -> the ETH unit tensor `eth` (its whole shape), and back. Q, K and V
// each fill (or read) their own rows of qkv_w.
void llama_to_eth(const ModelSpec& model, const LlamaTensor& t, const float* hf, float* eth);
void eth_to_llama(const ModelSpec& model, const LlamaTensor& t, const float* eth, float* hf);

// A checked HF folder: config, weights and the tensor list, ready to load. Every problem
// (config fields, a missing, misshapen or unexpected tensor) is refused here, before any
// output is touched.
struct LlamaSource {
  std::filesystem::path dir;
  LlamaConfig config;
  std::unique_ptr<SafetensorsModel> weights;
  std::vector<LlamaTensor> tensors;  // as the files name them
  std::string dtype;                 // "F32", "BF16" or "F16" when all tensors share one, else ""
};
LlamaSource open_llama(const std::filesystem::path& dir);

// Reads every tensor into `state` (all units, tp 1; its model must be src.config.model), a
// tensor at a time; a tied model's embedding goes to both wte and lm_head_w; zeroes the AdamW
// moments; refreshes the compute copy.
void load_llama(const LlamaSource& src, ModelState& state);

// As convert_from_hf / convert_to_hf (hf/gpt2_convert.h) for LlamaForCausalLM. The export
// writes lm_head.weight only when the model is untied (ModelSpec::tied_embeddings).
ConvertReport convert_llama_from_hf(const std::filesystem::path& dir,
                                    const std::filesystem::path& out, bool overwrite);
ConvertReport convert_llama_to_hf(const std::filesystem::path& checkpoint,
                                  const std::filesystem::path& dir, const std::string& dtype,
                                  bool overwrite);

}  // namespace eth::hf
