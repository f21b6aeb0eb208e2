// Llama config.json: the fixtures' dimensions as transformers wrote them (both rotary
// spellings), every field ETH cannot honour refused by name, and the export config read back
// to the same model.
#include "hf/llama_config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_file.h"
#include "hf_test_util.h"
#include "test_util.h"

namespace eth::hf::llama_config_test {
namespace {

namespace fs = std::filesystem;
const fs::path kData = test::hf_data();
const fs::path kGqa = kData / "llama_f32" / "config.json";
const fs::path kTied = kData / "llama_bf16_tied" / "config.json";

TEST(LlamaConfig, FixturesGiveTheModelsTransformersBuilt) {
  const ModelSpec m = read_llama_config(kGqa).model;
  EXPECT_EQ(m.layers, 2);
  EXPECT_EQ(m.hidden, 32);
  EXPECT_EQ(m.heads, 4);
  EXPECT_EQ(m.num_kv_heads(), 2);
  EXPECT_EQ(m.ffn, 64);
  EXPECT_EQ(m.vocab, 128);
  EXPECT_EQ(m.seq_len, 64);
  EXPECT_EQ(m.norm, NormKind::RmsNorm);
  EXPECT_EQ(m.positions, PositionKind::Rope);
  EXPECT_EQ(m.mlp, MlpKind::Swiglu);
  EXPECT_FALSE(m.bias);
  EXPECT_DOUBLE_EQ(m.norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(m.rope_theta, 10000.0);
  EXPECT_FALSE(m.tied_embeddings);
  EXPECT_TRUE(is_llama_family(m));
  const ModelSpec t = read_llama_config(kTied).model;
  EXPECT_EQ(t.kv_heads, 0);  // 4 of 4: multi-head attention, ETH's one spelling of it
  EXPECT_DOUBLE_EQ(t.norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(t.rope_theta, 500000.0);
  EXPECT_TRUE(t.tied_embeddings);
}

TEST(LlamaConfig, ReadsTheOlderRotarySpellingAndTransformersDefaults) {
  Json j = read_json_file(kTied, "test");
  j.erase("rope_parameters");
  j["rope_theta"] = 500000;
  j["rope_scaling"] = nullptr;
  EXPECT_DOUBLE_EQ(parse_llama_config(j, "c").model.rope_theta, 500000.0);
  // transformers' LlamaConfig defaults when a field is absent: eps 1e-6, base 10000, untied,
  // as many kv heads as heads.
  for (const char* k : {"rope_theta", "rms_norm_eps", "tie_word_embeddings",
                        "num_key_value_heads", "head_dim", "hidden_act"}) {
    j.erase(k);
  }
  const ModelSpec m = parse_llama_config(j, "c").model;
  EXPECT_DOUBLE_EQ(m.rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(m.norm_eps, 1e-6);
  EXPECT_FALSE(m.tied_embeddings);
  EXPECT_EQ(m.num_kv_heads(), 4);
  // Dropout and tensor-parallel pretraining slices do not change the function.
  j["attention_dropout"] = 0.1;
  j["pretraining_tp"] = 2;
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e4}};
  EXPECT_EQ(parse_llama_config(j, "c").model, m);
}

TEST(LlamaConfig, RefusesWhatEthCannotComputeNamingTheField) {
  const Json base = read_json_file(kGqa, "hf");
  const std::vector<test::JsonRefusal> cases = {
      {"missing hidden", [](Json& j) { j.erase("hidden_size"); }, "hidden_size", "missing"},
      {"missing ffn", [](Json& j) { j.erase("intermediate_size"); }, "intermediate_size",
       "missing"},
      {"missing positions", [](Json& j) { j.erase("max_position_embeddings"); },
       "max_position_embeddings", "missing"},
      {"heads do not divide", [](Json& j) { j["num_attention_heads"] = 5; },
       "num_attention_heads", "must divide hidden_size"},
      {"odd head size", [](Json& j) {
         j["num_attention_heads"] = 32;
         j["num_key_value_heads"] = 32;
         j.erase("head_dim");
       }, "num_attention_heads", "odd head size"},
      {"kv heads do not divide", [](Json& j) { j["num_key_value_heads"] = 3; },
       "num_key_value_heads", "must divide num_attention_heads"},
      {"head_dim", [](Json& j) { j["head_dim"] = 16; }, "head_dim",
       "must equal hidden_size / num_attention_heads (8)"},
      {"activation", [](Json& j) { j["hidden_act"] = "gelu"; }, "hidden_act",
       "unsupported activation \"gelu\""},
      {"attention bias", [](Json& j) { j["attention_bias"] = true; }, "attention_bias",
       "must be false"},
      {"mlp bias", [](Json& j) { j["mlp_bias"] = true; }, "mlp_bias", "must be false"},
      {"rope scaling (transformers 4)", [](Json& j) {
         j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
       }, "rope_scaling", "unsupported rope scaling \"linear\""},
      {"rope type (transformers 5)", [](Json& j) {
         j["rope_parameters"] = {{"rope_type", "llama3"}, {"rope_theta", 5e5}, {"factor", 8}};
       }, "rope_parameters", "unsupported rope scaling \"llama3\""},
      {"rope factor under default", [](Json& j) { j["rope_parameters"]["factor"] = 2.0; },
       "rope_parameters.factor", "unknown field"},
      {"contradictory bases", [](Json& j) { j["rope_theta"] = 500000.0; }, "rope_theta",
       "contradicts rope_parameters.rope_theta"},
      {"zero epsilon", [](Json& j) { j["rms_norm_eps"] = 0; }, "rms_norm_eps", "> 0"},
      {"model type", [](Json& j) { j["model_type"] = "mistral"; }, "model_type",
       "unsupported model_type \"mistral\""},
      {"architecture", [](Json& j) { j["architectures"] = {"LlamaForSequenceClassification"}; },
       "architectures[0]", "unsupported architecture \"LlamaForSequenceClassification\""},
      {"tie not bool", [](Json& j) { j["tie_word_embeddings"] = 1; }, "tie_word_embeddings",
       "expected"},
      {"string dim", [](Json& j) { j["hidden_size"] = "32"; }, "hidden_size", "an integer"},
  };
  test::expect_json_refusals(base, cases, [](const Json& j, const std::string& source) {
    return parse_llama_config(j, source);
  });
}

TEST(LlamaConfig, ExportKeepsTheSourceAndReadsBackToTheSameModel) {
  for (const fs::path& p : {kGqa, kTied}) {
    const LlamaConfig g = read_llama_config(p);
    // The import's own config, dtype as read: every field unchanged.
    const std::string dtype = g.raw["dtype"].get<std::string>();
    EXPECT_EQ(llama_config_json(g.model, dtype, g.raw), g.raw) << p;
    // Without a recorded config (a model trained by ETH from scratch): defaults that parse
    // to the same model.
    const Json fresh = llama_config_json(g.model, "float32", Json());
    EXPECT_EQ(parse_llama_config(fresh, "fresh").model, g.model) << fresh.dump();
    EXPECT_EQ(fresh["rope_parameters"]["rope_theta"], fresh["rope_theta"]);
    // A changed model changes the fields in the base's spelling.
    ModelSpec m = g.model;
    m.rope_theta = 1234.0;
    m.tied_embeddings = !m.tied_embeddings;
    const Json changed = llama_config_json(m, "float32", g.raw);
    EXPECT_FALSE(changed.contains("rope_theta"));
    EXPECT_EQ(parse_llama_config(changed, "changed").model, m);
  }
}

}  // namespace
}  // namespace eth::hf::llama_config_test
