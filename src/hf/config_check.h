// What every Hugging Face config reader (hf/gpt2_config.h, hf/llama_config.h) checks first of a
// config.json: not quantized, the family's model_type, and, when the list is there, the one
// architecture ETH converts; each refusal names the field.
#pragma once

#include <string>

#include "core/json_cursor.h"

namespace eth::hf {

// `c`: the config's root object. `type_hint` ends the model_type refusal ("unsupported
// model_type \"<got>\": <type_hint>").
void check_hf_family(const JsonCursor& c, const std::string& model_type,
                     const std::string& architecture, const std::string& type_hint);

}  // namespace eth::hf
