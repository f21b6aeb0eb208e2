// `eth convert` and `eth eval` as a user runs them: the fixture converted and evaluated gives
// transformers' loss in the JSON output, the way back writes a loadable folder, and bad input
// exits 2 naming the file and the field.
#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "core/json_file.h"
#include "eth_run.h"
#include "hf_cli_util.h"
#include "test_util.h"

namespace eth::hf_cli_test {
namespace {

namespace fs = std::filesystem;
const fs::path kData = fs::path(ETH_TEST_DATA_DIR) / "hf";

TEST(HfCli, ConvertThenEvalGivesTransformersLoss) {
  const fs::path dir = test::scratch("hf_cli", "roundtrip");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string ckpt = (dir / "new" / "gpt2.safetensors").string();  // folder created
  auto r = test::eth_convert_from_hf(kData / "gpt2_f32", ckpt, dir, " --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const Json conv = Json::parse(r.out);
  EXPECT_EQ(conv["model"]["layers"], 2);
  EXPECT_EQ(conv["tied_embeddings"], true);
  const Json ev = test::eth_eval_json(ckpt, kData / "batch.bin", dir);
  ASSERT_FALSE(ev.is_null());
  const Json want = read_json_file(kData / "expected.json", "test");
  EXPECT_NEAR(ev["loss"].get<double>(), want["models"]["gpt2_f32"]["loss"].get<double>(), 1e-5);
  EXPECT_EQ(ev["tokens"], 128);
  EXPECT_NEAR(ev["perplexity"].get<double>(), std::exp(ev["loss"].get<double>()), 1e-9);
  // Converting again over the same file needs --force.
  r = test::eth_convert_from_hf(kData / "gpt2_f32", ckpt, dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--force"), std::string::npos) << r.err;
  r = test::eth_cli(
      "convert --to-hf --checkpoint '" + ckpt + "' --out '" + (dir / "back").string() + "'", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir / "back" / "model.safetensors"));
  EXPECT_TRUE(fs::exists(dir / "back" / "config.json"));
}

TEST(HfCli, BadInputExitsTwoNamingFileAndField) {
  const fs::path dir = test::scratch("hf_cli", "bad");
  auto r = test::expect_convert_refuses_config(kData / "gpt2_f32", dir,
                                               [](Json& cfg) { cfg["n_head"] = 3; });
  EXPECT_NE(r.err.find("n_head"), std::string::npos) << r.err;
  r = test::eth_cli("convert --out x", dir);
  EXPECT_EQ(r.code, 1) << r.err;
  r = test::eth_cli("eval --checkpoint '" + (dir / "nope").string() + "' --data '" +
                        (kData / "batch.bin").string() + "'",
                    dir);
  EXPECT_EQ(r.code, 2) << r.err;
}

}  // namespace
}  // namespace eth::hf_cli_test
