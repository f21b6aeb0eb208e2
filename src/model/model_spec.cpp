#include "model/model_spec.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_file.h"
#include "core/limits.h"
#include "model/arithmetic.h"

namespace eth {

namespace {
ModelSpec make(const char* name, std::int64_t layers, std::int64_t hidden, std::int64_t heads,
               std::int64_t seq, std::int64_t vocab) {
  return ModelSpec{name, layers, hidden, heads, seq, vocab, 4 * hidden};
}

// A Llama-family decoder: RMSNorm, rotary positions, SwiGLU, no biases, untied embeddings.
ModelSpec llama(const char* name, std::int64_t layers, std::int64_t hidden, std::int64_t heads,
                std::int64_t kv_heads, std::int64_t ffn, std::int64_t vocab, std::int64_t seq,
                double theta) {
  ModelSpec m{name, layers, hidden, heads, seq, vocab, ffn};
  m.norm = NormKind::RmsNorm;
  m.norm_eps = 1e-5;
  m.positions = PositionKind::Rope;
  m.rope_theta = theta;
  m.mlp = MlpKind::Swiglu;
  m.kv_heads = kv_heads == heads ? 0 : kv_heads;
  m.bias = false;
  return m;
}

template <typename Kind, std::size_t N>
Kind parse_kind(const JsonCursor& c, const char* const (&names)[N]) {
  const std::string v = c.as_string();
  std::string expected;
  for (std::size_t i = 0; i < N; ++i) {
    if (v == names[i]) return static_cast<Kind>(i);
    expected += std::string(i == 0 ? "" : " or ") + "\"" + names[i] + "\"";
  }
  c.fail(expected);
}

constexpr const char* kNormNames[] = {"layernorm", "rmsnorm"};
constexpr const char* kPositionNames[] = {"learned", "rope"};
constexpr const char* kMlpNames[] = {"gelu", "swiglu"};

// A positive finite number, e.g. an epsilon or a RoPE base.
double positive(const JsonCursor& c, double max, const char* max_text) {
  const double v = c.as_number();
  if (!(v > 0.0 && v <= max)) c.fail(std::string("a number > 0 and <= ") + max_text);
  return v;
}

// The architecture fields of the object form; the dimensions are already parsed into m.
void parse_architecture(const JsonCursor& c, ModelSpec& m) {
  if (auto f = c.find("norm")) m.norm = parse_kind<NormKind>(*f, kNormNames);
  if (auto f = c.find("norm_eps")) m.norm_eps = positive(*f, 1.0, "1");
  if (auto f = c.find("positions")) m.positions = parse_kind<PositionKind>(*f, kPositionNames);
  if (auto f = c.find("rope_theta")) {
    if (m.positions != PositionKind::Rope) f->fail_detail("is only used with positions \"rope\"");
    m.rope_theta = positive(*f, 1e12, "1e12");
  }
  if (auto f = c.find("mlp")) m.mlp = parse_kind<MlpKind>(*f, kMlpNames);
  if (m.mlp == MlpKind::Swiglu && !c.find("ffn")) {
    c.at("mlp").fail_detail("\"swiglu\" needs its inner size: give \"ffn\"");
  }
  if (auto f = c.find("kv_heads")) {
    const std::int64_t kv = f->as_int(1, limits::kMaxHeads);
    if (m.heads % kv != 0) {
      f->fail_detail("must divide heads (" + std::to_string(m.heads) + "), got " +
                     std::to_string(kv));
    }
    m.kv_heads = kv == m.heads ? 0 : kv;  // one spelling of multi-head attention
  }
  if (m.positions == PositionKind::Rope && m.head_dim() % 2 != 0) {
    c.at("positions").fail_detail("\"rope\" rotates pairs of channels: needs an even head size "
                                  "(hidden / heads), got " + std::to_string(m.head_dim()));
  }
  if (auto f = c.find("bias")) m.bias = f->as_bool();
  if (auto f = c.find("tied_embeddings")) m.tied_embeddings = f->as_bool();
}
}  // namespace

const char* norm_name(NormKind k) { return kNormNames[static_cast<std::size_t>(k)]; }
const char* positions_name(PositionKind k) { return kPositionNames[static_cast<std::size_t>(k)]; }
const char* mlp_name(MlpKind k) { return kMlpNames[static_cast<std::size_t>(k)]; }

bool ModelSpec::is_gpt() const {
  const ModelSpec gpt;
  return norm == gpt.norm && norm_eps == gpt.norm_eps && positions == gpt.positions &&
         mlp == gpt.mlp && kv_heads == 0 && bias == gpt.bias &&
         tied_embeddings == gpt.tied_embeddings;
}

bool ModelSpec::tp_splits(std::int64_t tp) const {
  return tp >= 1 && heads % tp == 0 && num_kv_heads() % tp == 0 && ffn % tp == 0;
}

const std::vector<ModelSpec>& model_presets() {
  // GPT-3 family after the paper's Table 2 (sequence 2048, vocabulary 51200), plus two models
  // small enough to train on a CPU.
  static const std::vector<ModelSpec> presets = {
      make("gpt3-350m", 24, 1024, 16, 2048, 51200),
      make("gpt3-1.3b", 24, 2048, 16, 2048, 51200),
      make("gpt3-2.6b", 32, 2560, 32, 2048, 51200),
      make("gpt3-6.7b", 32, 4096, 32, 2048, 51200),
      make("gpt3-13b", 40, 5120, 40, 2048, 51200),
      make("gpt3-70b", 80, 8192, 64, 2048, 51200),
      make("tiny", 4, 64, 4, 64, 256),
      make("gpt2-small", 12, 768, 12, 1024, 50257),
      // Llama 2 (Touvron et al., 2023) and Llama 3 (Meta, 2024) as published: layers, hidden,
      // heads, kv heads, FFN, vocabulary, context, RoPE base.
      llama("llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096, 10000.0),
      llama("llama2-13b", 40, 5120, 40, 40, 13824, 32000, 4096, 10000.0),
      llama("llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096, 10000.0),
      llama("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192, 500000.0),
      llama("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192, 500000.0),
      llama("llama-tiny", 2, 64, 4, 2, 128, 256, 64, 10000.0),
  };
  return presets;
}

ModelSpec model_preset(const std::string& name) {
  std::string names;
  for (const auto& m : model_presets()) {
    if (m.name == name) return m;
    names += (names.empty() ? "" : ", ") + m.name;
  }
  throw InputError("model", "", "",
                   "unknown model preset \"" + message_text(name, 64) +
                       "\"; expected one of: " + names + ", or a JSON file");
}

ModelSpec parse_model(const JsonCursor& c) {
  if (c.is_string()) {
    try {
      return model_preset(c.as_string());
    } catch (const InputError& e) {
      c.fail_detail(e.detail());  // already bounded: model_preset quotes names via message_text
    }
  }
  if (!c.is_object()) c.fail("a model preset name or an object");
  // "params" is what `eth models --format json` prints beside a preset: accepted when it agrees.
  c.allow_only({"name", "layers", "hidden", "heads", "seq_len", "vocab", "ffn", "params",
                "kv_heads", "norm", "norm_eps", "positions", "rope_theta", "mlp", "bias",
                "tied_embeddings"});
  ModelSpec m;
  m.name = c.find("name") ? c.at("name").as_string() : "custom";
  if (m.name.empty() || m.name.size() > static_cast<std::size_t>(limits::kMaxNameBytes)) {
    c.at("name").fail("a name of 1 to " + std::to_string(limits::kMaxNameBytes) + " bytes");
  }
  m.layers = c.at("layers").as_int(1, limits::kMaxLayers);
  m.hidden = c.at("hidden").as_int(1, limits::kMaxHidden);
  m.heads = c.at("heads").as_int(1, limits::kMaxHeads);
  m.seq_len = c.at("seq_len").as_int(1, limits::kMaxSeqLen);
  m.vocab = c.at("vocab").as_int(1, limits::kMaxVocab);
  m.ffn = c.find("ffn") ? c.at("ffn").as_int(1, limits::kMaxFfn) : 4 * m.hidden;
  if (m.ffn > limits::kMaxFfn) {
    c.at("hidden").fail_detail("gives a default ffn of 4 x hidden = " + std::to_string(m.ffn) +
                               ", more than " + std::to_string(limits::kMaxFfn) +
                               "; give ffn explicitly");
  }
  if (m.hidden % m.heads != 0) {
    c.at("heads").fail_detail("must divide hidden (" + std::to_string(m.hidden) + "), got " +
                              std::to_string(m.heads));
  }
  parse_architecture(c, m);
  if (auto p = c.find("params"); p && p->as_int() != total_params(m)) {
    p->fail("the model's parameter count (" + std::to_string(total_params(m)) + ")");
  }
  return m;
}

Json model_to_json(const ModelSpec& m) {
  Json j;
  j["name"] = m.name;
  j["layers"] = m.layers;
  j["hidden"] = m.hidden;
  j["heads"] = m.heads;
  j["seq_len"] = m.seq_len;
  j["vocab"] = m.vocab;
  j["ffn"] = m.ffn;
  const ModelSpec gpt;
  if (m.kv_heads != 0) j["kv_heads"] = m.kv_heads;
  if (m.norm != gpt.norm) j["norm"] = norm_name(m.norm);
  if (m.norm_eps != gpt.norm_eps) j["norm_eps"] = m.norm_eps;
  if (m.positions != gpt.positions) j["positions"] = positions_name(m.positions);
  if (m.positions == PositionKind::Rope && m.rope_theta != gpt.rope_theta) {
    j["rope_theta"] = m.rope_theta;
  }
  if (m.mlp != gpt.mlp) j["mlp"] = mlp_name(m.mlp);
  if (m.bias != gpt.bias) j["bias"] = m.bias;
  if (m.tied_embeddings != gpt.tied_embeddings) j["tied_embeddings"] = m.tied_embeddings;
  return j;
}

ModelSpec load_model(const std::string& name_or_path) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(name_or_path, ec)) {
    Json j = read_json_file(name_or_path, "model");
    return parse_model(JsonCursor(j, JsonOrigin{"model", name_or_path, ""}));
  }
  for (const auto& m : model_presets()) {
    if (m.name == name_or_path) return m;
  }
  if (name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".json")) {
    throw InputError("model", name_or_path, "", "cannot read: no such file");
  }
  return model_preset(name_or_path);  // throws with the list of presets
}

}  // namespace eth
