// GPT model dimensions (ModelSpec), the built-in presets, and the JSON form of a model.
// Pure data: arithmetic on these dimensions lives in model/arithmetic.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/json_cursor.h"

namespace eth {

// A GPT-style decoder. Units (the planning granule): 0 = token + position embedding,
// 1..layers = transformer blocks, layers + 1 = final layer norm + LM head (not tied to the
// embedding, so every unit owns its parameters and plans may cut anywhere).
struct ModelSpec {
  std::string name;      // preset name, or "custom"
  std::int64_t layers = 0;
  std::int64_t hidden = 0;  // C
  std::int64_t heads = 0;   // NH
  std::int64_t seq_len = 0; // T: maximum sequence length (position table size)
  std::int64_t vocab = 0;   // V
  std::int64_t ffn = 0;     // FFN inner size, 4 * hidden unless given

  std::int64_t num_units() const { return layers + 2; }
  std::int64_t head_dim() const { return hidden / heads; }
  bool operator==(const ModelSpec&) const = default;
};

const std::vector<ModelSpec>& model_presets();
// Preset by name; throws InputError listing the presets when unknown.
ModelSpec model_preset(const std::string& name);

// A model is a preset name or an object
// {"layers", "hidden", "heads", "seq_len", "vocab", ["ffn"], ["name"]}.
ModelSpec parse_model(const JsonCursor& c);
Json model_to_json(const ModelSpec& m);
// `--model` takes a preset name or a path to a JSON file holding the object form.
ModelSpec load_model(const std::string& name_or_path);

}  // namespace eth
