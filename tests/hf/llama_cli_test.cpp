// `eth convert` of a Llama folder as a user runs it: converted and evaluated, it gives
// transformers' loss in the JSON output and the way back writes the same tensors; bad input
// exits 2 naming the file and the field, and writes nothing.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/json_file.h"
#include "eth_run.h"
#include "hf_cli_util.h"
#include "hf_test_util.h"
#include "test_util.h"

namespace eth::llama_cli_test {
namespace {

namespace fs = std::filesystem;
const fs::path kData = test::hf_data();

TEST(LlamaCli, ConvertThenEvalGivesTransformersLoss) {
  const fs::path dir = test::scratch("hf_llama_cli", "roundtrip");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string ckpt = (dir / "llama.safetensors").string();
  auto r = test::eth_convert_from_hf(kData / "llama_bf16_tied", ckpt, dir, " --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const Json conv = Json::parse(r.out);
  EXPECT_EQ(conv["family"], "llama");
  EXPECT_EQ(conv["model"]["norm"], "rmsnorm");
  EXPECT_EQ(conv["tied_embeddings"], true);
  EXPECT_EQ(conv["dtype"], "BF16");
  const Json ev = test::eth_eval_json(ckpt, kData / "llama_batch.bin", dir);
  ASSERT_FALSE(ev.is_null());
  const Json want = read_json_file(kData / "llama_expected.json", "test");
  EXPECT_NEAR(ev["loss"].get<double>(), want["models"]["llama_bf16_tied"]["loss"].get<double>(),
              1e-5);
  r = test::eth_cli("convert --to-hf --checkpoint '" + ckpt + "' --out '" +
                        (dir / "back").string() + "' --format json",
                    dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Json::parse(r.out)["tensors"], 20);  // no lm_head.weight: tied
  EXPECT_EQ(read_json_file(dir / "back" / "config.json", "test"),
            read_json_file(kData / "llama_bf16_tied" / "config.json", "test"));
}

TEST(LlamaCli, BadInputExitsTwoNamingFileAndField) {
  const fs::path dir = test::scratch("hf_llama_cli", "bad");
  const auto r = test::expect_convert_refuses_config(kData / "llama_f32", dir, [](Json& cfg) {
    cfg["rope_parameters"] = {{"rope_type", "dynamic"}, {"rope_theta", 1e4}, {"factor", 2.0}};
  });
  EXPECT_NE(r.err.find("rope_parameters"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("\"dynamic\""), std::string::npos) << r.err;
}

}  // namespace
}  // namespace eth::llama_cli_test
