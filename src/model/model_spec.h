// Decoder model description (ModelSpec): dimensions and architecture (GPT or Llama family), the
// built-in presets, and the JSON form of a model. Pure data: arithmetic on it lives in
// model/arithmetic.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/json_cursor.h"

namespace eth {

enum class NormKind : std::uint8_t { LayerNorm, RmsNorm };
enum class PositionKind : std::uint8_t { Learned, Rope };
enum class MlpKind : std::uint8_t { Gelu, Swiglu };

// A decoder. Units (the planning granule): 0 = token (+ learned position) embedding,
// 1..layers = transformer blocks, layers + 1 = final norm + LM head. Defaults are GPT's
// (layer norm with biases, learned positions, GELU MLP, multi-head attention, untied
// embeddings); the Llama family sets RMSNorm, RoPE, SwiGLU, grouped-query attention, no biases.
// A tied LM head shares the embedding's matrix: the first and the last unit both hold it.
struct ModelSpec {
  std::string name;      // preset name, or "custom"
  std::int64_t layers = 0;
  std::int64_t hidden = 0;  // C
  std::int64_t heads = 0;   // NH
  std::int64_t seq_len = 0; // T: maximum sequence length (position table size)
  std::int64_t vocab = 0;   // V
  std::int64_t ffn = 0;     // FFN inner size, 4 * hidden unless given
  // Architecture; the defaults are GPT's, and model_to_json writes only what differs from them.
  NormKind norm = NormKind::LayerNorm;
  double norm_eps = 1e-5;
  PositionKind positions = PositionKind::Learned;
  double rope_theta = 10000.0;  // only meaningful under RoPE
  MlpKind mlp = MlpKind::Gelu;
  std::int64_t kv_heads = 0;  // key/value heads (grouped-query attention); 0: as many as heads
  bool bias = true;           // biases on every linear layer and on the layer norms
  bool tied_embeddings = false;

  std::int64_t num_units() const { return layers + 2; }
  std::int64_t head_dim() const { return hidden / heads; }
  std::int64_t num_kv_heads() const { return kv_heads == 0 ? heads : kv_heads; }
  std::int64_t kv_dim() const { return num_kv_heads() * head_dim(); }  // width of K (and of V)
  // GPT as ETH has always trained it: what the kernels and the runtime implement today.
  bool is_gpt() const;
  // Tensor parallelism splits query heads, key/value heads (no replication of kv heads) and
  // the MLP's inner size evenly.
  bool tp_splits(std::int64_t tp) const;
  bool operator==(const ModelSpec&) const = default;
};

const std::vector<ModelSpec>& model_presets();
// Preset by name; throws InputError listing the presets when unknown.
ModelSpec model_preset(const std::string& name);

// A model is a preset name or an object
// {"layers", "hidden", "heads", "seq_len", "vocab", ["ffn"], ["name"], ["kv_heads"],
//  ["norm": "layernorm"|"rmsnorm"], ["norm_eps"], ["positions": "learned"|"rope"],
//  ["rope_theta"], ["mlp": "gelu"|"swiglu"], ["bias"], ["tied_embeddings"]}.
// Absent architecture fields take GPT's defaults; "ffn" is required under swiglu.
ModelSpec parse_model(const JsonCursor& c);
// Writes the architecture fields only where they differ from GPT's defaults, so a GPT model's
// JSON (in plans, profiles, checkpoints) is what it was before the Llama family existed.
Json model_to_json(const ModelSpec& m);
const char* norm_name(NormKind k);
const char* positions_name(PositionKind k);
const char* mlp_name(MlpKind k);
// `--model` takes a preset name or a path to a JSON file holding the object form.
ModelSpec load_model(const std::string& name_or_path);

}  // namespace eth
