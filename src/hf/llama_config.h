// A Hugging Face Llama config.json (LlamaForCausalLM) as ETH's model description, and back.
// ETH's Llama family computes exactly LlamaForCausalLM's function where the config says:
// pre-norm blocks of RMSNorm (eps rms_norm_eps, weight only), rotary positions of base
// rope_theta in the rotate-half convention, no scaling of the rotary frequencies, grouped-query
// attention scaled by 1/sqrt(head size), a SwiGLU MLP (silu), no biases, the LM head tied to
// the embedding or not. Anything else a config may ask for (another architecture or model_type,
// another activation, a rope scaling mode, attention or MLP biases, a head size other than
// hidden / heads, a quantization config) is refused by field. Rotary parameters are read in
// both spellings transformers writes: rope_parameters {rope_type, rope_theta} (transformers 5)
// and rope_theta + rope_scaling (before). Fields that do not change the function (dropouts,
// token ids, initializer_range, pretraining_tp, ...) are kept verbatim for the export and
// otherwise ignored.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>  // Json members by value

#include "core/json_cursor.h"
#include "model/model_spec.h"

namespace eth::hf {

struct LlamaConfig {
  // name "hf-llama", seq_len = max_position_embeddings, ffn = intermediate_size,
  // tied_embeddings = tie_word_embeddings (default false, as transformers').
  ModelSpec model;
  Json raw;  // the whole config as read
};

// True when the ETH model description is one LlamaForCausalLM computes (RMSNorm, rotary
// positions, SwiGLU, no biases).
bool is_llama_family(const ModelSpec& m);

// Throws InputError("hf", source, field, ...) naming the config field.
LlamaConfig parse_llama_config(const Json& j, const std::string& source);
LlamaConfig read_llama_config(const std::filesystem::path& config_json);

// The config.json of `model` (is_llama_family) for export: `base` (a config read at import; may
// be null or empty) with the dimensions, epsilon, rotary base, tie and dtype replaced in the
// spelling the base uses, else a config with transformers' LlamaConfig defaults for everything
// ETH does not describe (both rotary spellings, which every transformers version reads).
Json llama_config_json(const ModelSpec& model, const std::string& torch_dtype, const Json& base);

}  // namespace eth::hf
