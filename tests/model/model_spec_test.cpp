// Model specs: the presets carry the paper's Table 2 figures and their names' parameter counts,
// JSON round trips, and bad files name the file and path. (The arithmetic on a spec is tested in
// arithmetic_test.cpp, recompute sets in recompute_test.cpp.)
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

}  // namespace
}  // namespace eth
