// GPT-2 config.json <-> ModelSpec. See gpt2_config.h.
#include "hf/gpt2_config.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_file.h"
#include "core/limits.h"
#include "hf/config_check.h"

namespace eth::hf {

namespace {

// The kernels' layer-norm epsilon (kernels/README.md).
constexpr double kLayerNormEps = 1e-5;

bool bool_or(const JsonCursor& c, const char* key, bool dflt) {
  auto v = c.find(key);
  if (!v || v->value().is_null()) return dflt;
  return v->as_bool();
}

void require_bool(const JsonCursor& c, const char* key, bool dflt, bool want,
                  const std::string& why) {
  if (bool_or(c, key, dflt) != want) c.at(key).fail_detail(why);
}

}  // namespace

Gpt2Config parse_gpt2_config(const Json& j, const std::string& source) {
  const JsonCursor c(j, {"hf", source, ""});
  c.require_object();
  check_hf_family(c, "gpt2", "GPT2LMHeadModel", "ETH converts \"gpt2\" (GPT2LMHeadModel)");
  if (auto act = c.find("activation_function"); act) {
    const std::string a = act->as_string();
    if (a != "gelu_new" && a != "gelu_pytorch_tanh") {
      act->fail_detail("unsupported activation \"" + message_text(a, 64) +
                       "\": ETH's MLP computes the tanh GELU (\"gelu_new\")");
    }
  }
  if (auto eps = c.find("layer_norm_epsilon"); eps && eps->as_number(0, 1) != kLayerNormEps) {
    eps->fail_detail("ETH's layer norms use epsilon 1e-05, got " +
                     number_text(eps->as_number()));
  }
  require_bool(c, "scale_attn_weights", true, true,
               "must be true: ETH scales attention scores by 1/sqrt(head size)");
  require_bool(c, "scale_attn_by_inverse_layer_idx", false, false,
               "must be false: ETH does not scale attention by 1/(layer index + 1)");
  require_bool(c, "add_cross_attention", false, false,
               "must be false: ETH's blocks have no cross-attention");

  Gpt2Config g;
  g.raw = j;
  ModelSpec& m = g.model;
  m.name = "hf-gpt2";
  m.layers = c.at("n_layer").as_int(1, limits::kMaxLayers);
  m.hidden = c.at("n_embd").as_int(1, limits::kMaxHidden);
  m.heads = c.at("n_head").as_int(1, limits::kMaxHeads);
  m.seq_len = c.at("n_positions").as_int(1, limits::kMaxSeqLen);
  m.vocab = c.at("vocab_size").as_int(1, limits::kMaxVocab);
  if (m.hidden % m.heads != 0) {
    c.at("n_head").fail_detail("must divide n_embd (" + std::to_string(m.hidden) + "), got " +
                               std::to_string(m.heads));
  }
  if (auto ctx = c.find("n_ctx"); ctx && ctx->as_int(1, limits::kMaxSeqLen) != m.seq_len) {
    ctx->fail_detail("contradicts n_positions (" + std::to_string(m.seq_len) +
                     "): both are the position table's length");
  }
  m.ffn = 4 * m.hidden;
  if (auto inner = c.find("n_inner"); inner && !inner->value().is_null()) {
    m.ffn = inner->as_int(1, limits::kMaxFfn);
  } else if (m.ffn > limits::kMaxFfn) {
    c.at("n_embd").fail_detail("gives an MLP of 4 x n_embd = " + std::to_string(m.ffn) +
                               ", more than ETH's limit of " + std::to_string(limits::kMaxFfn));
  }
  g.tied = bool_or(c, "tie_word_embeddings", true);
  return g;
}

Gpt2Config read_gpt2_config(const std::filesystem::path& config_json) {
  return parse_gpt2_config(read_json_file(config_json, "hf"), config_json.string());
}

Json gpt2_config_json(const ModelSpec& model, bool tied, const std::string& torch_dtype,
                      const Json& base) {
  Json j = base.is_object() ? base : Json::object();
  if (!base.is_object() || base.empty()) {
    // transformers' GPT2Config defaults for what ETH's model description does not hold.
    j = Json{{"activation_function", "gelu_new"},
             {"attn_pdrop", 0.1},
             {"embd_pdrop", 0.1},
             {"initializer_range", 0.02},
             {"layer_norm_epsilon", kLayerNormEps},
             {"resid_pdrop", 0.1},
             {"scale_attn_weights", true},
             {"use_cache", true}};
  }
  j["architectures"] = Json::array({"GPT2LMHeadModel"});
  j["model_type"] = "gpt2";
  j["n_layer"] = model.layers;
  j["n_embd"] = model.hidden;
  j["n_head"] = model.heads;
  j["n_positions"] = model.seq_len;
  if (j.contains("n_ctx")) j["n_ctx"] = model.seq_len;
  j["vocab_size"] = model.vocab;
  if (model.ffn == 4 * model.hidden) {
    j["n_inner"] = nullptr;
  } else {
    j["n_inner"] = model.ffn;
  }
  j["tie_word_embeddings"] = tied;
  // transformers 4.56 renamed torch_dtype to dtype and reads either: keep the base's spelling.
  j[j.contains("dtype") ? "dtype" : "torch_dtype"] = torch_dtype;
  return j;
}

}  // namespace eth::hf
