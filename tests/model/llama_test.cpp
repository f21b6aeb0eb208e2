// The Llama family (issue 25): presets with their published dimensions and parameter counts,
// the architecture fields' JSON form (absent for GPT, so GPT files stay byte-for-byte what they
// were) and refusal of bad combinations by field. (llama-tiny's arithmetic counted by hand is in
// arithmetic_test.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/arithmetic.h"
#include "model/model_spec.h"
#include "test_util.h"

namespace eth {
namespace {

using test::error_of;

ModelSpec parse(const std::string& text) {
  const Json j = Json::parse(text);
  return parse_model(JsonCursor(j, {"model", "m.json", ""}));
}

std::string parse_error(const std::string& text) {
  return error_of([&] { parse(text); });
}

TEST(LlamaPresets, PublishedDimensions) {
  struct Row {
    const char* name;
    std::int64_t layers, hidden, heads, kv, ffn, vocab, seq;
    double theta;
  };
  const Row rows[] = {{"llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096, 1e4},
                      {"llama2-13b", 40, 5120, 40, 40, 13824, 32000, 4096, 1e4},
                      {"llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096, 1e4},
                      {"llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192, 5e5},
                      {"llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192, 5e5},
                      {"llama-tiny", 2, 64, 4, 2, 128, 256, 64, 1e4}};
  for (const Row& r : rows) {
    SCOPED_TRACE(r.name);
    const ModelSpec m = model_preset(r.name);
    EXPECT_EQ(m.layers, r.layers);
    EXPECT_EQ(m.hidden, r.hidden);
    EXPECT_EQ(m.heads, r.heads);
    EXPECT_EQ(m.num_kv_heads(), r.kv);
    EXPECT_EQ(m.ffn, r.ffn);
    EXPECT_EQ(m.vocab, r.vocab);
    EXPECT_EQ(m.seq_len, r.seq);
    EXPECT_EQ(m.rope_theta, r.theta);
    EXPECT_EQ(m.norm, NormKind::RmsNorm);
    EXPECT_EQ(m.norm_eps, 1e-5);
    EXPECT_EQ(m.positions, PositionKind::Rope);
    EXPECT_EQ(m.mlp, MlpKind::Swiglu);
    EXPECT_FALSE(m.bias);
    EXPECT_FALSE(m.tied_embeddings);
    EXPECT_FALSE(m.is_gpt());
  }
  for (const char* gpt : {"gpt3-13b", "tiny", "gpt2-small"}) {
    EXPECT_TRUE(model_preset(gpt).is_gpt()) << gpt;
  }
}

TEST(LlamaPresets, ParameterCountsMatchThePublishedOnes) {
  // Hugging Face's parameter counts of the released checkpoints (model.num_parameters()).
  EXPECT_EQ(total_params(model_preset("llama2-7b")), 6738415616);
  EXPECT_EQ(total_params(model_preset("llama3-8b")), 8030261248);
  EXPECT_EQ(total_params(model_preset("llama2-70b")), 68976648192);
  // And within 0.5% of the rounded figures the papers quote.
  auto near = [](const char* name, double billions) {
    const double p = static_cast<double>(total_params(model_preset(name))) / 1e9;
    EXPECT_LT(std::abs(p - billions) / billions, 0.005) << name << ": " << p;
  };
  near("llama2-7b", 6.74);
  near("llama3-8b", 8.03);
  near("llama2-70b", 68.98);
  near("llama2-13b", 13.02);
  near("llama3-70b", 70.55);
}

TEST(LlamaJson, GptJsonHasNoArchitectureFields) {
  for (const char* name : {"gpt3-13b", "tiny", "gpt2-small"}) {
    const Json j = model_to_json(model_preset(name));
    EXPECT_EQ(j.size(), 7u) << j.dump();  // name, layers, hidden, heads, seq_len, vocab, ffn
  }
  const Json tiny = model_to_json(model_preset("llama-tiny"));
  EXPECT_EQ(tiny.at("kv_heads"), 2);
  EXPECT_EQ(tiny.at("norm"), "rmsnorm");
  EXPECT_EQ(tiny.at("positions"), "rope");
  EXPECT_EQ(tiny.at("mlp"), "swiglu");
  EXPECT_EQ(tiny.at("bias"), false);
  EXPECT_FALSE(tiny.contains("norm_eps"));    // 1e-5 is the default
  EXPECT_FALSE(tiny.contains("rope_theta"));  // 10000 is the default
  EXPECT_EQ(model_to_json(model_preset("llama3-8b")).at("rope_theta"), 500000.0);
  // Every preset and a custom tied, biased, layer-norm Llama round-trip.
  ModelSpec custom = model_preset("llama-tiny");
  custom.norm = NormKind::LayerNorm;
  custom.norm_eps = 1e-6;
  custom.bias = true;
  custom.tied_embeddings = true;
  custom.rope_theta = 123.5;
  std::vector<ModelSpec> models = model_presets();
  models.push_back(custom);
  for (const ModelSpec& m : models) {
    const Json back = Json::parse(model_to_json(m).dump());
    EXPECT_EQ(parse_model(JsonCursor(back, {"model", "mem", ""})), m) << back.dump();
  }
  // kv_heads equal to heads is multi-head attention: the same model as without it.
  EXPECT_EQ(parse(R"({"layers":1,"hidden":64,"heads":4,"seq_len":8,"vocab":16,"kv_heads":4})"),
            parse(R"({"layers":1,"hidden":64,"heads":4,"seq_len":8,"vocab":16})"));
}

TEST(LlamaJson, BadCombinationsAreRefusedByField) {
  const std::string base = R"("layers":1,"hidden":64,"heads":4,"seq_len":8,"vocab":16)";
  struct Case {
    const char* fields;
    const char* expected;  // what follows "[model] m.json: "
  };
  const Case cases[] = {
      {R"("kv_heads":3)", "kv_heads: must divide heads (4), got 3"},
      {R"("kv_heads":0)", "kv_heads: expected an integer in [1, 4096], got 0"},
      {R"("norm":"batchnorm")", "norm: expected \"layernorm\" or \"rmsnorm\", got \"batchnorm\""},
      {R"("norm_eps":0)", "norm_eps: expected a number > 0"},
      {R"("norm_eps":-1e-5)", "norm_eps: expected a number > 0"},
      {R"("positions":"alibi")", "positions: expected \"learned\" or \"rope\", got \"alibi\""},
      {R"("mlp":"relu")", "mlp: expected \"gelu\" or \"swiglu\", got \"relu\""},
      {R"("mlp":"swiglu")", "mlp: \"swiglu\" needs its inner size: give \"ffn\""},
      {R"("rope_theta":10000)", "rope_theta: is only used with positions \"rope\""},
      {R"("positions":"rope","rope_theta":0)", "rope_theta: expected a number > 0"},
      {R"("bias":1)", "bias: expected"},
      {R"("tied_embeddings":"yes")", "tied_embeddings: expected"},
  };
  for (const Case& c : cases) {
    const std::string msg = parse_error("{" + base + "," + c.fields + "}");
    SCOPED_TRACE(c.fields);
    const std::string head = "[model] m.json: ";
    ASSERT_EQ(msg.rfind(head, 0), 0u) << msg;
    EXPECT_EQ(msg.substr(head.size(), std::string(c.expected).size()), c.expected) << msg;
  }
  // An odd head size under RoPE: hidden 60 = 4 heads of 15.
  const std::string odd = parse_error(
      R"({"layers":1,"hidden":60,"heads":4,"seq_len":8,"vocab":16,"positions":"rope"})");
  EXPECT_NE(odd.find("positions: \"rope\" rotates pairs of channels: needs an even head size "
                     "(hidden / heads), got 15"),
            std::string::npos)
      << odd;
}

TEST(LlamaTp, TpMustDivideKvHeads) {
  const ModelSpec m = model_preset("llama2-70b");  // 64 heads, 8 kv heads, ffn 28672
  EXPECT_TRUE(m.tp_splits(8));
  EXPECT_FALSE(m.tp_splits(16));  // divides the 64 query heads, not the 8 kv heads
  const ModelSpec gpt = model_preset("gpt3-70b");
  EXPECT_TRUE(gpt.tp_splits(16));
}

}  // namespace
}  // namespace eth
