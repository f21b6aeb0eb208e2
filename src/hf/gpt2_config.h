// A Hugging Face GPT-2 config.json (GPT2LMHeadModel) as ETH's model description, and back.
// ETH's GPT computes exactly GPT-2's function where the config says: pre-norm blocks, learned
// positions, layer norms of epsilon 1e-5 with bias, the tanh GELU ("gelu_new"), attention scaled
// by 1/sqrt(head size), biases on every linear layer but the LM head, no vocabulary padding.
// Anything else a config may ask for (another architecture or model_type, another activation or
// epsilon, scale_attn_by_inverse_layer_idx, unscaled attention, cross-attention, a quantization
// config) is refused by field, so a converted model never computes something other than its
// source. Fields that do not change the function (dropouts, token ids, summary_*, ...) are kept
// verbatim for the export and otherwise ignored.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>  // Json members by value

#include "core/json_cursor.h"
#include "model/model_spec.h"

namespace eth::hf {

struct Gpt2Config {
  ModelSpec model;        // name "hf-gpt2", seq_len = n_positions, ffn = n_inner or 4 * n_embd
  bool tied = true;       // tie_word_embeddings (GPT-2's default: the LM head is wte)
  Json raw;               // the whole config as read
};

// Throws InputError("hf", source, field, ...) naming the config field.
Gpt2Config parse_gpt2_config(const Json& j, const std::string& source);
Gpt2Config read_gpt2_config(const std::filesystem::path& config_json);

// The config.json of `model` for export: `base` (a config read at import; may be null or
// empty) with the dimensions, the tie and the dtype replaced, else a GPT-2 config with
// transformers' defaults for everything ETH does not describe.
Json gpt2_config_json(const ModelSpec& model, bool tied, const std::string& torch_dtype,
                      const Json& base);

}  // namespace eth::hf
