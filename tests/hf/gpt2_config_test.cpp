// GPT-2 config.json: the fixture's dimensions, and every field ETH cannot honour refused by
// name (missing, contradictory, unsupported), since a model converted anyway would compute
// something else than its source.
#include "hf/gpt2_config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_file.h"
#include "hf_test_util.h"
#include "test_util.h"

namespace eth::hf::gpt2_config_test {
namespace {

namespace fs = std::filesystem;
const fs::path kConfig = test::hf_data() / "gpt2_f32" / "config.json";

TEST(HfConfig, FixtureGivesTheModelTransformersBuilt) {
  const Gpt2Config g = read_gpt2_config(kConfig);
  EXPECT_EQ(g.model.layers, 2);
  EXPECT_EQ(g.model.hidden, 32);
  EXPECT_EQ(g.model.heads, 4);
  EXPECT_EQ(g.model.seq_len, 64);
  EXPECT_EQ(g.model.vocab, 300);
  EXPECT_EQ(g.model.ffn, 128);  // n_inner null: 4 x n_embd
  EXPECT_TRUE(g.tied);
  const Gpt2Config u =
      read_gpt2_config(test::hf_data() / "gpt2_f16_untied" / "config.json");
  EXPECT_FALSE(u.tied);
}

TEST(HfConfig, RefusesWhatEthCannotComputeNamingTheField) {
  const Json base = read_json_file(kConfig, "hf");
  const std::vector<test::JsonRefusal> cases = {
      {"missing n_embd", [](Json& j) { j.erase("n_embd"); }, "n_embd", "missing"},
      {"missing vocab", [](Json& j) { j.erase("vocab_size"); }, "vocab_size", "missing"},
      {"n_head does not divide", [](Json& j) { j["n_head"] = 5; }, "n_head", "must divide n_embd"},
      {"n_ctx contradicts", [](Json& j) { j["n_ctx"] = 128; }, "n_ctx", "contradicts n_positions"},
      {"zero layers", [](Json& j) { j["n_layer"] = 0; }, "n_layer", "expected"},
      {"string dim", [](Json& j) { j["n_embd"] = "32"; }, "n_embd", "an integer"},
      {"architecture", [](Json& j) { j["architectures"] = {"GPT2ForSequenceClassification"}; },
       "architectures[0]", "unsupported architecture \"GPT2ForSequenceClassification\""},
      {"model type", [](Json& j) { j["model_type"] = "llama"; }, "model_type",
       "unsupported model_type \"llama\""},
      {"activation", [](Json& j) { j["activation_function"] = "relu"; }, "activation_function",
       "unsupported activation \"relu\""},
      {"exact gelu", [](Json& j) { j["activation_function"] = "gelu"; }, "activation_function",
       "tanh GELU"},
      {"inverse layer idx", [](Json& j) { j["scale_attn_by_inverse_layer_idx"] = true; },
       "scale_attn_by_inverse_layer_idx", "must be false"},
      {"unscaled attention", [](Json& j) { j["scale_attn_weights"] = false; },
       "scale_attn_weights", "must be true"},
      {"epsilon", [](Json& j) { j["layer_norm_epsilon"] = 1e-6; }, "layer_norm_epsilon",
       "epsilon 1e-05"},
      {"cross attention", [](Json& j) { j["add_cross_attention"] = true; },
       "add_cross_attention", "must be false"},
      {"tie not bool", [](Json& j) { j["tie_word_embeddings"] = 1; }, "tie_word_embeddings",
       "expected"},
  };
  test::expect_json_refusals(base, cases, [](const Json& j, const std::string& source) {
    return parse_gpt2_config(j, source);
  });
}

TEST(HfConfig, AcceptsWhatDoesNotChangeTheFunction) {
  Json j = read_json_file(kConfig, "hf");
  j["activation_function"] = "gelu_pytorch_tanh";  // the same tanh formula
  j["reorder_and_upcast_attn"] = true;              // only where fp16 attention upcasts
  j["resid_pdrop"] = 0.3;                           // dropout: training only
  j["n_inner"] = 96;
  j["n_ctx"] = 64;
  const Gpt2Config g = parse_gpt2_config(j, "cfg.json");
  EXPECT_EQ(g.model.ffn, 96);
}

TEST(HfConfig, ExportKeepsTheSourceFieldsAndStatesTheDimensions) {
  const Gpt2Config g = read_gpt2_config(kConfig);
  const Json out = gpt2_config_json(g.model, false, "bfloat16", g.raw);
  const Gpt2Config back = parse_gpt2_config(out, "out.json");
  EXPECT_EQ(back.model.layers, g.model.layers);
  EXPECT_EQ(back.model.hidden, g.model.hidden);
  EXPECT_EQ(back.model.heads, g.model.heads);
  EXPECT_EQ(back.model.vocab, g.model.vocab);
  EXPECT_EQ(back.model.seq_len, g.model.seq_len);
  EXPECT_EQ(back.model.ffn, g.model.ffn);
  EXPECT_FALSE(back.tied);
  EXPECT_EQ(out["bos_token_id"], g.raw["bos_token_id"]);
  // Without a recorded config (a model trained by ETH from scratch) the defaults parse too.
  const Gpt2Config fresh = parse_gpt2_config(gpt2_config_json(g.model, true, "float32", Json()), "x");
  EXPECT_EQ(fresh.model.hidden, 32);
  EXPECT_TRUE(fresh.tied);
}

}  // namespace
}  // namespace eth::hf::gpt2_config_test
