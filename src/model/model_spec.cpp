#include "model/model_spec.h"

#include <filesystem>

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
}  // namespace

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
  c.allow_only({"name", "layers", "hidden", "heads", "seq_len", "vocab", "ffn", "params"});
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
