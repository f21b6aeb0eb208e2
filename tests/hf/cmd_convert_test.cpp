// `eth convert` as a user runs it: the fixture's model stated in the JSON output, an existing
// output kept unless --force, the way back writing a folder, and bad input exiting 2 naming the
// file and the field. (The converted checkpoint's loss against transformers': cmd_eval_test.)
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "eth_run.h"
#include "hf_cli_util.h"
#include "hf_test_util.h"
#include "test_util.h"

namespace eth::hf_cli_test {
namespace {

namespace fs = std::filesystem;
const fs::path kData = test::hf_data();

TEST(HfCli, ConvertStatesTheModelKeepsOutputsAndGoesBack) {
  const fs::path dir = test::scratch("hf_cli", "roundtrip");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string ckpt = (dir / "new" / "gpt2.safetensors").string();  // folder created
  auto r = test::eth_convert_from_hf(kData / "gpt2_f32", ckpt, dir, " --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const Json conv = Json::parse(r.out);
  EXPECT_EQ(conv["model"]["layers"], 2);
  EXPECT_EQ(conv["tied_embeddings"], true);
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
}

}  // namespace
}  // namespace eth::hf_cli_test
