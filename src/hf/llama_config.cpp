// Llama config.json <-> ModelSpec. See llama_config.h.
#include "hf/llama_config.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_file.h"
#include "core/limits.h"
#include "hf/config_check.h"

namespace eth::hf {

namespace {

// transformers' LlamaConfig defaults for the fields that change the function.
constexpr double kDefaultEps = 1e-6;
constexpr double kDefaultTheta = 10000.0;

bool present(const std::optional<JsonCursor>& c) { return c && !c->value().is_null(); }

void require_false(const JsonCursor& c, const char* key, const std::string& why) {
  if (auto v = c.find(key); present(v) && v->as_bool()) v->fail_detail("must be false: " + why);
}

// A rotary scaling mode, named by its rope_type (or the older "type").
[[noreturn]] void refuse_scaling(const JsonCursor& c) {
  std::string mode = "?";
  if (c.is_object()) {
    for (const char* k : {"rope_type", "type"}) {
      if (auto t = c.find(k); t && t->is_string()) {
        mode = t->as_string();
        break;
      }
    }
  }
  c.fail_detail("unsupported rope scaling \"" + message_text(mode, 64) +
                "\": ETH's rotary positions are unscaled (rope_type \"default\")");
}

// The rotary base from rope_parameters (transformers 5) or rope_theta (before); rope_scaling
// and any rope_type but "default" refused.
double parse_rope(const JsonCursor& c) {
  if (auto s = c.find("rope_scaling"); present(s)) refuse_scaling(*s);
  std::optional<double> theta;
  if (auto t = c.find("rope_theta"); present(t)) theta = t->as_number(1e-12, 1e12);
  auto p = c.find("rope_parameters");
  if (!present(p)) return theta.value_or(kDefaultTheta);
  p->require_object();
  if (auto type = p->find("rope_type"); present(type) && type->as_string() != "default") {
    refuse_scaling(*p);
  }
  // Any other key (a factor, partial_rotary_factor, per-layer-type parameters) changes the
  // function; refused by name.
  p->allow_only({"rope_type", "rope_theta"});
  if (auto t = p->find("rope_theta"); present(t)) {
    const double v = t->as_number(1e-12, 1e12);
    if (theta && *theta != v) {
      c.at("rope_theta").fail_detail("contradicts rope_parameters.rope_theta (" +
                                     number_text(v) + ")");
    }
    return v;
  }
  return theta.value_or(kDefaultTheta);
}

// Sets a number unless the JSON already holds that value (an integer 10000 stays an integer).
void set_number(Json& j, const char* key, double v) {
  if (j.contains(key) && j[key].is_number() && j[key].get<double>() == v) return;
  j[key] = v;
}

}  // namespace

bool is_llama_family(const ModelSpec& m) {
  return m.norm == NormKind::RmsNorm && m.positions == PositionKind::Rope &&
         m.mlp == MlpKind::Swiglu && !m.bias;
}

LlamaConfig parse_llama_config(const Json& j, const std::string& source) {
  const JsonCursor c(j, {"hf", source, ""});
  c.require_object();
  check_hf_family(c, "llama", "LlamaForCausalLM", "expected \"llama\" (LlamaForCausalLM)");
  if (auto act = c.find("hidden_act"); present(act) && act->as_string() != "silu") {
    act->fail_detail("unsupported activation \"" + message_text(act->as_string(), 64) +
                     "\": ETH's SwiGLU gates with silu");
  }
  require_false(c, "attention_bias", "ETH's Llama attention has no biases");
  require_false(c, "mlp_bias", "ETH's SwiGLU has no biases");

  LlamaConfig g;
  g.raw = j;
  ModelSpec& m = g.model;
  m.name = "hf-llama";
  m.norm = NormKind::RmsNorm;
  m.positions = PositionKind::Rope;
  m.mlp = MlpKind::Swiglu;
  m.bias = false;
  m.layers = c.at("num_hidden_layers").as_int(1, limits::kMaxLayers);
  m.hidden = c.at("hidden_size").as_int(1, limits::kMaxHidden);
  m.heads = c.at("num_attention_heads").as_int(1, limits::kMaxHeads);
  m.seq_len = c.at("max_position_embeddings").as_int(1, limits::kMaxSeqLen);
  m.vocab = c.at("vocab_size").as_int(1, limits::kMaxVocab);
  m.ffn = c.at("intermediate_size").as_int(1, limits::kMaxFfn);
  if (m.hidden % m.heads != 0) {
    c.at("num_attention_heads")
        .fail_detail("must divide hidden_size (" + std::to_string(m.hidden) + "), got " +
                     std::to_string(m.heads));
  }
  if (auto hd = c.find("head_dim"); present(hd) && hd->as_int(1, limits::kMaxHidden) !=
                                                       m.head_dim()) {
    hd->fail_detail("must equal hidden_size / num_attention_heads (" +
                    std::to_string(m.head_dim()) + "): ETH's heads split the hidden size");
  }
  if (m.head_dim() % 2 != 0) {
    c.at("num_attention_heads")
        .fail_detail("gives an odd head size (" + std::to_string(m.head_dim()) +
                     "): rotary positions rotate pairs of channels");
  }
  if (auto kv = c.find("num_key_value_heads"); present(kv)) {
    const std::int64_t n = kv->as_int(1, limits::kMaxHeads);
    if (m.heads % n != 0) {
      kv->fail_detail("must divide num_attention_heads (" + std::to_string(m.heads) +
                      "), got " + std::to_string(n));
    }
    m.kv_heads = n == m.heads ? 0 : n;  // ETH's one spelling of multi-head attention
  }
  m.norm_eps = kDefaultEps;
  if (auto eps = c.find("rms_norm_eps"); present(eps)) {
    const double v = eps->as_number();
    if (!(v > 0.0 && v <= 1.0)) eps->fail("a number > 0 and <= 1");
    m.norm_eps = v;
  }
  m.rope_theta = parse_rope(c);
  if (auto tie = c.find("tie_word_embeddings"); present(tie)) m.tied_embeddings = tie->as_bool();
  return g;
}

LlamaConfig read_llama_config(const std::filesystem::path& config_json) {
  return parse_llama_config(read_json_file(config_json, "hf"), config_json.string());
}

Json llama_config_json(const ModelSpec& model, const std::string& torch_dtype, const Json& base) {
  Json j = base.is_object() ? base : Json::object();
  if (!base.is_object() || base.empty()) {
    // transformers' LlamaConfig defaults for what ETH's model description does not hold.
    j = Json{{"attention_bias", false}, {"attention_dropout", 0.0}, {"bos_token_id", 1},
             {"eos_token_id", 2},       {"hidden_act", "silu"},     {"initializer_range", 0.02},
             {"mlp_bias", false},       {"pretraining_tp", 1},      {"use_cache", true},
             {"rope_scaling", nullptr},
             {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", model.rope_theta}}},
             {"rope_theta", model.rope_theta}};
  }
  j["architectures"] = Json::array({"LlamaForCausalLM"});
  j["model_type"] = "llama";
  j["num_hidden_layers"] = model.layers;
  j["hidden_size"] = model.hidden;
  j["num_attention_heads"] = model.heads;
  j["num_key_value_heads"] = model.num_kv_heads();
  if (j.contains("head_dim") && !j["head_dim"].is_null()) j["head_dim"] = model.head_dim();
  j["max_position_embeddings"] = model.seq_len;
  j["vocab_size"] = model.vocab;
  j["intermediate_size"] = model.ffn;
  set_number(j, "rms_norm_eps", model.norm_eps);
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
    set_number(j["rope_parameters"], "rope_theta", model.rope_theta);
  }
  if (j.contains("rope_theta") || !j.contains("rope_parameters") ||
      !j["rope_parameters"].is_object()) {
    set_number(j, "rope_theta", model.rope_theta);
  }
  j["tie_word_embeddings"] = model.tied_embeddings;
  // transformers 4.56 renamed torch_dtype to dtype and reads either: keep the base's spelling.
  j[j.contains("dtype") ? "dtype" : "torch_dtype"] = torch_dtype;
  return j;
}

}  // namespace eth::hf
