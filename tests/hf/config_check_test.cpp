// The checks every Hugging Face config reader makes first (hf/config_check.h), on a made-up
// family: a quantized model, another model_type and an architecture list other than the one
// supported are each refused naming the JSON path under the cursor it was given (so a config
// nested in another document is named by its full path), the file, and what was expected; a
// list that is absent or null is no refusal; quoted values in messages stay short.
#include "hf/config_check.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "hf_test_util.h"
#include "test_util.h"

namespace eth::hf::config_check_test {
namespace {

const Json kGood = {{"model_type", "fam"}, {"architectures", {"FamForCausalLM"}}, {"x", 1}};

// check_hf_family of family "fam" (FamForCausalLM) on `j` read from cfg.json, at `path`.
void check_fam(const Json& j, const std::string& path = "") {
  check_hf_family(JsonCursor(j, {"hf", "cfg.json", path}), "fam", "FamForCausalLM",
                  "ETH converts \"fam\"");
}

TEST(ConfigCheck, AcceptsTheFamilyWithOrWithoutTheArchitectureList) {
  check_fam(kGood);
  Json j = kGood;
  j.erase("architectures");
  check_fam(j);
  j["architectures"] = nullptr;  // transformers writes null for a config built by hand
  check_fam(j);
}

TEST(ConfigCheck, RefusesEachBadFieldNamingItsPath) {
  const std::vector<test::JsonRefusal> cases = {
      {"quantized", [](Json& j) { j["quantization_config"] = {{"quant_method", "gptq"}}; },
       "quantization_config", "a quantized model"},
      // Quantization is named first: converting another family would not help it.
      {"quantized, other family",
       [](Json& j) {
         j["quantization_config"] = {{"quant_method", "awq"}};
         j["model_type"] = "other";
       },
       "quantization_config", "unquantized F32, BF16 or F16"},
      {"no model_type", [](Json& j) { j.erase("model_type"); }, "model_type", "missing"},
      {"model_type not a string", [](Json& j) { j["model_type"] = 3; }, "model_type", "string"},
      {"other model_type", [](Json& j) { j["model_type"] = "other"; }, "model_type",
       "unsupported model_type \"other\": ETH converts \"fam\""},
      {"list not a list", [](Json& j) { j["architectures"] = "FamForCausalLM"; },
       "architectures", "[\"FamForCausalLM\"]"},
      {"empty list", [](Json& j) { j["architectures"] = Json::array(); }, "architectures",
       "[\"FamForCausalLM\"]"},
      {"two architectures",
       [](Json& j) { j["architectures"] = {"FamForCausalLM", "FamModel"}; }, "architectures",
       "[\"FamForCausalLM\"]"},
      {"architecture not a string", [](Json& j) { j["architectures"] = {7}; },
       "architectures[0]", "string"},
      {"other architecture", [](Json& j) { j["architectures"] = {"FamModel"}; },
       "architectures[0]", "unsupported architecture \"FamModel\": ETH converts FamForCausalLM"},
  };
  test::expect_json_refusals(kGood, cases, [](const Json& j, const std::string& source) {
    check_hf_family(JsonCursor(j, {"hf", source, ""}), "fam", "FamForCausalLM",
                    "ETH converts \"fam\"");
  });
}

// A config under another document's field (say a multimodal model's text_config) is named by
// its whole path.
TEST(ConfigCheck, NamesTheFullPathOfANestedConfig) {
  Json j = kGood;
  j["architectures"] = {"FamModel"};
  test::expect_refused("nested", [&] { check_fam(j, "text_config"); }, "cfg.json",
                       "text_config.architectures[0]", "FamModel");
  j = kGood;
  j["model_type"] = "other";
  test::expect_refused("nested type", [&] { check_fam(j, "text_config"); }, "cfg.json",
                       "text_config.model_type", "other");
}

// A hostile model_type is quoted cut short, not echoed whole into the message.
TEST(ConfigCheck, QuotesLongValuesShort) {
  Json j = kGood;
  j["model_type"] = std::string(5000, 'm');
  const std::string err = test::error_of([&] { check_fam(j); });
  EXPECT_NE(err.find("unsupported model_type"), std::string::npos) << err;
  EXPECT_LT(err.size(), 400u) << err;
  j = kGood;
  j["architectures"] = {std::string(5000, 'a')};
  EXPECT_LT(test::error_of([&] { check_fam(j); }).size(), 400u);
}

}  // namespace
}  // namespace eth::hf::config_check_test
