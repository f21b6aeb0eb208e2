// Model specs and their arithmetic: the presets carry the paper's Table 2 figures, JSON round
// trips, and parameter / FLOP / activation counts match hand counts written out below.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_file.h"
#include "model/arithmetic.h"
#include "model/model_spec.h"
#include "model/recompute.h"
#include "test_util.h"

namespace eth {
namespace {

using test::error_of;
using test::write;
std::filesystem::path scratch(const std::string& name) { return test::scratch("model_test", name); }

TEST(ModelPresets, PaperTable2AndCpuModels) {
  struct Row {
    const char* name;
    std::int64_t layers, hidden, heads, seq, vocab;
  };
  // Table 2 of the paper (sequence 2048, vocabulary 51200) and the two CPU models of issue 2.
  const Row rows[] = {{"gpt3-350m", 24, 1024, 16, 2048, 51200},
                      {"gpt3-1.3b", 24, 2048, 16, 2048, 51200},
                      {"gpt3-2.6b", 32, 2560, 32, 2048, 51200},
                      {"gpt3-6.7b", 32, 4096, 32, 2048, 51200},
                      {"gpt3-13b", 40, 5120, 40, 2048, 51200},
                      {"gpt3-70b", 80, 8192, 64, 2048, 51200},
                      {"tiny", 4, 64, 4, 64, 256},
                      {"gpt2-small", 12, 768, 12, 1024, 50257}};
  // The six Llama presets follow (tests/model/llama_test.cpp).
  ASSERT_EQ(model_presets().size(), std::size(rows) + 6);
  for (const Row& r : rows) {
    SCOPED_TRACE(r.name);
    const ModelSpec m = load_model(r.name);
    EXPECT_EQ(m.name, r.name);
    EXPECT_EQ(m.layers, r.layers);
    EXPECT_EQ(m.hidden, r.hidden);
    EXPECT_EQ(m.heads, r.heads);
    EXPECT_EQ(m.seq_len, r.seq);
    EXPECT_EQ(m.vocab, r.vocab);
    EXPECT_EQ(m.ffn, 4 * r.hidden);
    EXPECT_EQ(m.num_units(), r.layers + 2);
    EXPECT_EQ(model_preset(r.name), m);
  }
}

TEST(ModelPresets, ParameterCountsMatchTheirNames) {
  // 13B: 40 blocks of 12C^2 + 13C, embedding (V + T) C, head VC + 2C, C = 5120.
  const double C = 5120, V = 51200, T = 2048;
  const double expected = 40 * (12 * C * C + 13 * C) + (V + T) * C + V * C + 2 * C;
  EXPECT_EQ(static_cast<double>(total_params(model_preset("gpt3-13b"))), expected);
  EXPECT_NEAR(expected / 1e9, 13.1, 0.1);
  EXPECT_NEAR(static_cast<double>(total_params(model_preset("gpt3-350m"))) / 1e6, 406, 10);
}

TEST(ModelPresets, UnknownNameListsPresets) {
  const std::string msg = error_of([] { load_model("gpt5"); });
  EXPECT_NE(msg.find("unknown model preset \"gpt5\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("gpt3-13b"), std::string::npos) << msg;
  EXPECT_EQ(error_of([] { load_model("dir/model.json"); }),
            "[model] dir/model.json: cannot read: no such file");
}

TEST(ModelJson, RoundTripsPresetsAndCustom) {
  std::vector<ModelSpec> models = model_presets();
  models.push_back(ModelSpec{"custom", 3, 96, 6, 128, 1000, 200});  // ffn not 4C
  for (const ModelSpec& m : models) {
    const Json j = model_to_json(m);
    const std::string text = j.dump();
    const Json back = Json::parse(text);
    EXPECT_EQ(parse_model(JsonCursor(back, {"model", "mem", ""})), m) << text;
  }
}

TEST(ModelJson, FileFormDefaultsFfnToFourHidden) {
  const auto dir = scratch("file");
  const std::string path = write(
      dir / "m.json", R"({"layers": 4, "hidden": 64, "heads": 4, "seq_len": 64, "vocab": 256})");
  const ModelSpec m = load_model(path);
  EXPECT_EQ(m.name, "custom");
  EXPECT_EQ(m.ffn, 4 * 64);
  EXPECT_EQ(m.num_units(), 6);
  std::filesystem::remove_all(dir);
}

TEST(ModelJson, BadFilesNameFileAndPath) {
  const auto dir = scratch("bad");
  struct Case {
    const char* text;
    const char* path_and_detail;  // what follows "[model] <file>: "
  };
  const Case cases[] = {
      {R"({"layers": 4, "hidden": 64,)", "invalid JSON at line 1"},
      {R"({"layers": "4", "hidden": 64, "heads": 4, "seq_len": 64, "vocab": 256})",
       "layers: expected an integer, got \"4\""},
      {R"({"layers": 4, "hidden": -64, "heads": 4, "seq_len": 64, "vocab": 256})",
       "hidden: expected an integer in [1, 131072], got -64"},
      {R"({"layers": 4, "hidden": 64, "heads": 4, "seq_len": 64, "vocab": 256, "dropout": 0.1})",
       "dropout: unknown field; expected one of: name, layers, hidden, heads, seq_len, vocab, ffn"},
      {R"({"layers": 4, "hidden": 64, "heads": 5, "seq_len": 64, "vocab": 256})",
       "heads: must divide hidden (64), got 5"},
      {R"({"layers": 4, "hidden": 64, "heads": 4, "vocab": 256})",
       "seq_len: missing required field"},
      {R"([4, 64])", "(root): expected a model preset name or an object, got [4,64]"},
  };
  int i = 0;
  for (const Case& c : cases) {
    const std::string path = write(dir / ("m" + std::to_string(i++) + ".json"), c.text);
    const std::string msg = error_of([&] { load_model(path); });
    SCOPED_TRACE(c.text);
    const std::string head = "[model] " + path + ": ";
    ASSERT_EQ(msg.rfind(head, 0), 0u) << msg;
    EXPECT_EQ(msg.substr(head.size(), std::string(c.path_and_detail).size()), c.path_and_detail);
  }
  std::filesystem::remove_all(dir);
}

TEST(ModelArithmetic, BlockParamsAreTwelveCSquaredPlusThirteenC) {
  for (const char* name : {"gpt3-350m", "gpt3-13b", "tiny"}) {
    const ModelSpec m = model_preset(name);
    const std::int64_t C = m.hidden;
    // ln1 2C, qkv 3C^2 + 3C, proj C^2 + C, ln2 2C, fc 4C^2 + 4C, fcproj 4C^2 + C.
    EXPECT_EQ(unit_params(m, 1), 12 * C * C + 13 * C) << name;
    EXPECT_EQ(unit_params(m, m.layers), 12 * C * C + 13 * C) << name;
    // Embedding (V + T) C; head: final norm 2C + LM head VC.
    EXPECT_EQ(unit_params(m, 0), (m.vocab + m.seq_len) * C) << name;
    EXPECT_EQ(unit_params(m, m.layers + 1), 2 * C + m.vocab * C) << name;
  }
}

TEST(ModelArithmetic, TensorParallelShardsTheRightTensors) {
  const ModelSpec m = model_preset("gpt3-350m");
  const std::int64_t C = m.hidden, t = 4;
  // Sharded: qkv (3C^2 + 3C), proj_w C^2, fc (4C^2 + 4C), fcproj_w 4C^2. Replicated: 2 norms
  // (4C) and the two biases after the row-parallel matmuls (2C).
  EXPECT_EQ(unit_params(m, 1, t), (12 * C * C + 7 * C) / t + 6 * C);
  EXPECT_EQ(unit_params(m, 0, t), m.vocab * C / t + m.seq_len * C);
}

TEST(ModelArithmetic, TpRowRangesCoverEveryRowOnceAndUnitParamsCountTheLargestShard) {
  // An uneven vocabulary: 50257 rows over tp 4 are 12564, 12564, 12564, 12565 rows.
  ModelSpec m = model_preset("gpt3-350m");
  m.vocab = 50257;
  const std::int64_t C = m.hidden;
  for (std::int64_t t : {1, 2, 3, 4, 8}) {
    std::int64_t next = 0, largest = 0;
    for (std::int64_t r = 0; r < t; ++r) {
      const RowRange rows = tp_rows(m.vocab, t, r);
      EXPECT_EQ(rows.begin, next) << "tp " << t << " rank " << r;
      EXPECT_GE(rows.size(), m.vocab / t);
      EXPECT_LE(rows.size(), m.vocab / t + 1);
      largest = std::max(largest, rows.size());
      next = rows.end;
    }
    EXPECT_EQ(next, m.vocab) << "tp " << t;
    // The embedding's wte is sharded, wpe replicated; the head's lm_head_w sharded.
    EXPECT_EQ(unit_params(m, 0, t), largest * C + m.seq_len * C) << "tp " << t;
    EXPECT_EQ(unit_params(m, m.layers + 1, t), largest * C + 2 * C) << "tp " << t;
  }
  // Heads divide by tp: qkv rows split at head boundaries (3 * head_dim rows per head).
  const RowRange qkv = tp_rows(3 * C, 4, 1);
  EXPECT_EQ(qkv.begin % (3 * m.head_dim()), 0);
  EXPECT_EQ(qkv.size(), 3 * C / 4);
}

TEST(ModelArithmetic, BlockFlopsMatchHandCount) {
  const ModelSpec m = model_preset("gpt3-350m");
  const double T = 2048, C = 1024, F = 4096;
  // Per sample, 2 FLOPs per multiply-add: qkv T*C*3C, proj T*C*C, fc T*C*F, fcproj T*F*C,
  // QK^T T*T*C and score x V T*T*C.
  const double hand =
      2 * (T * C * 3 * C + T * C * C + T * C * F + T * F * C) + 2 * (T * T * C + T * T * C);
  EXPECT_EQ(hand, 2 * T * (4 * C * C + 2 * C * F) + 4 * T * T * C);  // the issue's closed form
  EXPECT_DOUBLE_EQ(unit_forward_flops(m, 1, 1, 2048), hand);
  EXPECT_DOUBLE_EQ(unit_forward_flops(m, 7, 3, 2048), 3 * hand);  // linear in batch
  // Head: LM head matmul 2 T C V; the embedding is a lookup.
  EXPECT_DOUBLE_EQ(unit_forward_flops(m, 25, 1, 2048), 2 * T * C * 51200);
  EXPECT_EQ(unit_forward_flops(m, 0, 1, 2048), 0.0);
  EXPECT_DOUBLE_EQ(model_forward_flops(m, 2, 2048), 2 * (24 * hand + 2 * T * C * 51200));
}

TEST(ModelArithmetic, ActivationSplitSumsToKorthikantiFormula) {
  const ModelSpec m = model_preset("gpt3-13b");
  const double s = 2048, h = 5120, a = 40;
  for (std::int64_t b : {1, 4}) {
    const double sbh = s * static_cast<double>(b) * h;
    const ActivationBytes t1 = activation_bytes_16bit(m, 3, b, 2048, 1);
    EXPECT_DOUBLE_EQ(t1.total(), sbh * (34 + 5 * a * s / h)) << b;
    for (std::int64_t tp : {2, 8}) {
      const double t = static_cast<double>(tp);
      const ActivationBytes at = activation_bytes_16bit(m, 3, b, 2048, tp);
      EXPECT_DOUBLE_EQ(at.total(), sbh * (10 + 24 / t + 5 * a * s / (h * t))) << b << " " << tp;
    }
  }
}

TEST(ModelArithmetic, RecomputeDropsTheNamedClasses) {
  const ModelSpec m = model_preset("gpt3-350m");
  const double s = 2048, b = 2, h = 1024, a = 16;
  const ActivationBytes act = activation_bytes_16bit(m, 1, 2, 2048, 1);
  // Recomputing the attention core (score, softmax, dropout) drops all 5 a s^2 b bytes.
  RecomputeSet attn;
  for (auto op : {RecomputeOp::AttnScore, RecomputeOp::AttnSoftmax, RecomputeOp::AttnDropout})
    attn.add(op);
  EXPECT_DOUBLE_EQ(act.held(attn), s * b * h * 34);
  EXPECT_DOUBLE_EQ(act.total() - act.held(attn), 5 * a * s * s * b);
  EXPECT_DOUBLE_EQ(act.held(RecomputeSet{}), act.total());
  RecomputeSet unit;
  unit.add(RecomputeOp::Unit);
  EXPECT_DOUBLE_EQ(act.held(unit), 2 * s * b * h);  // only the 16-bit unit input stays
  EXPECT_LT(act.held(RecomputeSet::all_ops()), act.held(attn));
}

TEST(Recompute, NamesRoundTrip) {
  for (int i = 0; i < kNumRecomputeOps; ++i) {
    const auto op = static_cast<RecomputeOp>(i);
    EXPECT_EQ(parse_recompute_op(recompute_op_name(op)), op);
  }
  EXPECT_EQ(parse_recompute_op("attention"), std::nullopt);
  EXPECT_EQ(recompute_op_names(), "qkv, attn_score, attn_softmax, attn_dropout, mlp_act, unit");
  RecomputeSet s;
  s.add(RecomputeOp::MlpAct);
  s.add(RecomputeOp::Qkv);
  EXPECT_EQ(s.names(), (std::vector<std::string>{"qkv", "mlp_act"}));
}

}  // namespace
}  // namespace eth
