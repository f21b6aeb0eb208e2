// `eth data` through the built binary: --tokenizer gives the ids `tokenizers` gave (fixtures),
// a vocabulary past 16 bits writes 32-bit token files that --info, --decode and `eth train` read
// (train's loss on a version-2 file equals its loss on the same tokens in version 1),
// --train-tokenizer writes a tokenizer that round-trips, bad files exit 2 naming the file and
// field, and the byte tokenizer path is unchanged.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "core/json_file.h"
#include "data/token_file.h"
#include "data/tokenize.h"
#include "eth_run.h"
#include "test_util.h"

namespace eth::cmd_data_test {
namespace {

namespace fs = std::filesystem;
const fs::path kDir = fs::path(ETH_TEST_DATA_DIR) / "tokenizer";

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::vector<std::uint32_t> ids_of(const fs::path& token_file) {
  const TokenFile f = TokenFile::open(token_file);
  std::vector<std::uint32_t> v(f.tokens().size());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = f.tokens()[i];
  return v;
}

TEST(DataCli, TokenizerGivesTheLibrarysIdsAndDecodesBack) {
  const fs::path dir = test::scratch("data_cli", "encode");
  const Json want = read_json_file(kDir / "ids.json", "test");
  for (const std::string style : {"gpt2", "llama3"}) {
    const fs::path bin = dir / (style + ".bin"), back = dir / (style + ".txt");
    const std::string tok = (kDir / (style + "_style.json")).string();
    test::EthRun r =
        test::eth_cli("data --tokenizer " + tok + " --text " + (kDir / "unicode.txt").string() +
                      " --out " + bin.string() + " --format json");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(ids_of(bin), want.at(style).at("unicode").get<std::vector<std::uint32_t>>());
    EXPECT_EQ(TokenFile::open(bin).version(), 1);  // vocabulary 2000-2500: 16-bit ids
    EXPECT_EQ(Json::parse(r.out).at("invalid_utf8_replaced"), 0);
    r = test::eth_cli("data --tokenizer " + tok + " --decode " + bin.string() + " --out " +
                      back.string());
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(slurp(back), slurp(kDir / "unicode.txt"));
  }
  // Invalid UTF-8 is repaired as Python's errors="replace" and counted.
  const test::EthRun r =
      test::eth_cli("data --tokenizer " + (kDir / "gpt2_style.json").string() + " --text " +
                    (kDir / "invalid_utf8.bin").string() + " --out " + (dir / "i.bin").string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(ids_of(dir / "i.bin"),
            want.at("gpt2").at("invalid_utf8").get<std::vector<std::uint32_t>>());
  EXPECT_NE(r.out.find("invalid UTF-8 sequences were replaced by U+FFFD"), std::string::npos)
      << r.out;
}

TEST(DataCli, VocabularyPastSixteenBitsWritesVersionTwo) {
  // The GPT-2-style fixture grown past 65,536 ids: unreachable filler tokens (characters that
  // stand for no byte) and one added token at id 70000.
  const fs::path dir = test::scratch("data_cli", "wide");
  Json doc = read_json_file(kDir / "gpt2_style.json", "test");
  doc["added_tokens"].push_back({{"id", 70000}, {"content", "<|big|>"}, {"single_word", false},
                                 {"lstrip", false}, {"rstrip", false}, {"normalized", false},
                                 {"special", true}});
  // Spliced into the text: 68,000 insertions into an ordered_json object are quadratic.
  std::string filler;
  for (std::uint32_t id = 2000; id < 70000; ++id) {
    const char32_t c = 0x20000 + id;  // planes 2-3 (4 UTF-8 bytes): never byte-level characters
    filler += '"';
    filler += static_cast<char>(0xF0 | (c >> 18));
    filler += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    filler += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    filler += static_cast<char>(0x80 | (c & 0x3F));
    filler += "\":" + std::to_string(id) + ",";
  }
  std::string json = doc.dump();
  const std::size_t at = json.find("\"vocab\":{");
  ASSERT_NE(at, std::string::npos);
  json.insert(at + 9, filler);
  const fs::path tok = dir / "wide.json", text = dir / "text.txt", bin = dir / "wide.bin";
  std::ofstream(tok) << json;
  std::ofstream(text) << slurp(kDir / "english.txt") << "<|big|>";
  test::EthRun r = test::eth_cli("data --tokenizer " + tok.string() + " --text " + text.string() +
                                 " --out " + bin.string());
  ASSERT_EQ(r.code, 0) << r.err;
  auto want = read_json_file(kDir / "ids.json", "test")
                  .at("gpt2")
                  .at("english")
                  .get<std::vector<std::uint32_t>>();
  want.push_back(70000);
  EXPECT_EQ(TokenFile::open(bin).version(), 2);
  EXPECT_EQ(ids_of(bin), want);
  r = test::eth_cli("data --info " + bin.string() + " --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Json::parse(r.out).at("bytes_per_token"), 4);
  EXPECT_EQ(Json::parse(r.out).at("max_token"), 70000);
  r = test::eth_cli("data --tokenizer " + tok.string() + " --decode " + bin.string() + " --out " +
                    (dir / "back.txt").string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(slurp(dir / "back.txt"), slurp(text));
}

TEST(DataCli, TrainerReadsBothVersionsAlike) {
  SyntheticSpec s;
  s.num_tokens = 3000;
  s.vocab = 200;
  const std::vector<std::uint16_t> narrow = synthetic_tokens(s);
  const std::vector<std::uint32_t> wide(narrow.begin(), narrow.end());
  const fs::path dir = test::scratch("data_cli", "train");
  write_token_file(dir / "v1.bin", narrow);
  write_token_file(dir / "v2.bin", wide, 100000);  // 32-bit ids whatever their values
  ASSERT_EQ(TokenFile::open(dir / "v2.bin").version(), 2);
  std::vector<double> loss[2];
  for (int v = 0; v < 2; ++v) {
    const test::EthRun r = test::eth_cli(
        "train --model tiny --data " + (dir / (v == 0 ? "v1.bin" : "v2.bin")).string() +
        " --steps 2 --batch 2 --micro-batch-size 1 --print-every 0 --precision fp32 "
        "--log " +
        (dir / ("log" + std::to_string(v))).string());
    ASSERT_EQ(r.code, 0) << r.err;
    std::ifstream log(dir / ("log" + std::to_string(v)));
    for (std::string line; std::getline(log, line);) {
      const Json j = Json::parse(line);
      if (j.contains("loss")) loss[v].push_back(j["loss"].get<double>());
    }
  }
  ASSERT_EQ(loss[0].size(), 2u);
  EXPECT_EQ(loss[0], loss[1]);
}

TEST(DataCli, TrainTokenizerRoundTripsThroughTheCli) {
  const fs::path dir = test::scratch("data_cli", "learn");
  const fs::path tok = dir / "tok.json", bin = dir / "t.bin", back = dir / "back.txt";
  const std::string text = (kDir / "english.txt").string();
  test::EthRun r = test::eth_cli("data --train-tokenizer --vocab 400 --text " + text + " --out " +
                                 tok.string() + " --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Json::parse(r.out).at("vocab_size"), 400);
  EXPECT_EQ(read_json_file(tok, "test").at("model").at("vocab").size(), 400u);
  r = test::eth_cli("data --tokenizer " + tok.string() + " --text " + text + " --out " +
                    bin.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_LT(TokenFile::open(bin).size() * 2, static_cast<std::int64_t>(slurp(text).size()));
  r = test::eth_cli("data --tokenizer " + tok.string() + " --decode " + bin.string() + " --out " +
                    back.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(slurp(back), slurp(text));
}

TEST(DataCli, BadInputExitsTwoNamingTheFileAndField) {
  const fs::path dir = test::scratch("data_cli", "bad");
  Json doc = read_json_file(kDir / "gpt2_style.json", "test");
  doc["model"]["type"] = "WordPiece";
  std::ofstream(dir / "wp.json") << doc.dump();
  test::EthRun r =
      test::eth_cli("data --tokenizer " + (dir / "wp.json").string() + " --text " +
                    (kDir / "english.txt").string() + " --out " + (dir / "x.bin").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find((dir / "wp.json").string() + ": model.type: unsupported model type "
                                                     "\"WordPiece\""),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir / "x.bin"));
  r = test::eth_cli("data --train-tokenizer --vocab 100 --text " + (kDir / "english.txt").string() +
                    " --out " + (dir / "t.json").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--vocab: expected at least 257"), std::string::npos) << r.err;
  r = test::eth_cli("data --decode " + (dir / "x.bin").string() + " --out " +
                    (dir / "y.txt").string());
  EXPECT_NE(r.code, 0);
}

TEST(DataCli, ByteTokenizerPathIsUnchanged) {
  const fs::path dir = test::scratch("data_cli", "bytes");
  const test::EthRun r = test::eth_cli("data --text " + (kDir / "unicode.txt").string() +
                                       " --out " + (dir / "b.bin").string());
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string text = slurp(kDir / "unicode.txt");
  const auto ids = ids_of(dir / "b.bin");
  ASSERT_EQ(ids.size(), text.size());
  for (std::size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(ids[i], static_cast<unsigned char>(text[i]));
  EXPECT_EQ(TokenFile::open(dir / "b.bin").version(), 1);
  EXPECT_NE(r.out.find("tokens, largest token id"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace eth::cmd_data_test
