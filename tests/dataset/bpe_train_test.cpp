// BPE training: the file it writes has tokenizer.json's shape and reads back; the learned
// tokenizer round-trips text and compresses it; the first merge is the most frequent pair
// (counted here independently); and a tokenizer ETH trained, loaded by `tokenizers`, gave the
// ids ETH gives (tests/data/tokenizer/eth_trained*.json, checked by the tools script).
#include "data/bpe_train.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "core/json_file.h"
#include "data/bpe_tokenizer.h"
#include "test_util.h"

namespace eth::bpe_train_test {
namespace {

const std::filesystem::path kDir = std::filesystem::path(ETH_TEST_DATA_DIR) / "tokenizer";

std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::vector<std::uint32_t> encode(const BpeTokenizer& t, std::string_view text) {
  std::vector<std::uint32_t> out;
  BpeEncoder(t).encode(text, out);
  return out;
}

std::string training_text() { return read_all(kDir / "english.txt") + read_all(kDir / "unicode.txt"); }

TEST(BpeTrain, WritesATokenizerJsonThatReadsBackAndRoundTrips) {
  for (const SplitPattern p : {SplitPattern::Gpt2, SplitPattern::Llama3}) {
    BpeTrainConfig cfg;
    cfg.vocab_size = 600;
    cfg.special_tokens = {"<|endoftext|>", "<|pad|>"};
    cfg.pattern = p;
    const std::string text = training_text();
    const BpeTrainResult r = train_bpe(text, cfg);
    EXPECT_EQ(r.vocab_size, 600u);
    EXPECT_EQ(r.num_merges, 600u - 258u);  // no byte string was reached twice in this text
    const Json& j = r.tokenizer;
    EXPECT_EQ(j.at("model").at("type"), "BPE");
    EXPECT_EQ(j.at("model").at("vocab").size(), 600u);
    EXPECT_EQ(j.at("model").at("merges").size(), r.num_merges);
    EXPECT_EQ(j.at("added_tokens").at(1).at("content"), "<|pad|>");
    EXPECT_EQ(j.at("added_tokens").at(1).at("id"), 1);
    EXPECT_EQ(j.at("model").at("vocab").at("<|pad|>"), 1);
    std::set<std::uint32_t> ids;
    for (const auto& [k, v] : j.at("model").at("vocab").items()) ids.insert(v.get<std::uint32_t>());
    EXPECT_EQ(ids.size(), 600u);
    EXPECT_EQ(*ids.rbegin(), 599u);  // dense

    const BpeTokenizer t = BpeTokenizer::from_json(j, "trained.json");
    EXPECT_EQ(t.vocab_size(), 600u);
    const auto got = encode(t, text);
    EXPECT_EQ(t.decode(got), text);
    EXPECT_LT(got.size() * 2, text.size());  // 342 merges on their own text halve it at least
    const auto special = encode(t, "a<|pad|>b");
    ASSERT_EQ(special.size(), 3u);
    EXPECT_EQ(special[1], 1u);
    // Deterministic: the same text and config give the same file.
    EXPECT_EQ(train_bpe(text, cfg).tokenizer.dump(), j.dump());
  }
}

TEST(BpeTrain, FirstMergeIsTheMostFrequentPair) {
  const std::string text = training_text();
  std::vector<std::string_view> pieces;
  split_text(SplitPattern::Gpt2, text, pieces);
  std::map<std::pair<unsigned char, unsigned char>, int> count;
  for (const std::string_view p : pieces) {
    for (std::size_t i = 0; i + 1 < p.size(); ++i) {
      ++count[{static_cast<unsigned char>(p[i]), static_cast<unsigned char>(p[i + 1])}];
    }
  }
  std::pair<unsigned char, unsigned char> best{};
  int most = 0;
  for (const auto& [pair, n] : count) {
    if (n > most) most = n, best = pair;  // the first of equals: the lower ids
  }
  BpeTrainConfig cfg;
  cfg.vocab_size = 258;
  cfg.special_tokens = {"<|endoftext|>"};
  const BpeTrainResult r = train_bpe(text, cfg);
  ASSERT_EQ(r.num_merges, 1u);
  const std::string want = byte_level_text(std::string(1, static_cast<char>(best.first))) + " " +
                           byte_level_text(std::string(1, static_cast<char>(best.second)));
  EXPECT_EQ(r.tokenizer.at("model").at("merges").at(0), want);
}

TEST(BpeTrain, EthTrainedTokenizerGivesTheIdsTokenizersGave) {
  // GPT-2's shape (ByteLevel with its regex) and Llama-3's (Split, then ByteLevel).
  for (const std::string file : {"eth_trained", "eth_trained_llama3"}) {
    const BpeTokenizer t = BpeTokenizer::load(kDir / (file + ".json"));
    const Json ids = read_json_file(kDir / (file + "_ids.json"), "test");
    for (const std::string name : {"english", "unicode"}) {
      const std::string text = read_all(kDir / (name + ".txt"));
      const auto want = ids.at(name).get<std::vector<std::uint32_t>>();
      EXPECT_EQ(encode(t, text), want) << file << " " << name;
      EXPECT_EQ(t.decode(want), text) << file << " " << name;
    }
  }
}

TEST(BpeTrain, RefusesVocabulariesTooSmallAndBadSpecialTokens) {
  BpeTrainConfig cfg;
  cfg.vocab_size = 256;
  std::string e = test::error_of([&] { (void)train_bpe("abc", cfg); });
  EXPECT_NE(e.find("--vocab: expected at least 257 (the 1 special tokens and the 256 bytes), got "
                   "256"),
            std::string::npos)
      << e;
  cfg.vocab_size = 1000;
  cfg.special_tokens = {"<s>", "<s>"};
  e = test::error_of([&] { (void)train_bpe("abc", cfg); });
  EXPECT_NE(e.find("--special: \"<s>\" is given twice"), std::string::npos) << e;
  cfg.special_tokens = {""};
  e = test::error_of([&] { (void)train_bpe("abc", cfg); });
  EXPECT_NE(e.find("cannot be empty"), std::string::npos) << e;
  // A text with too few pairs stops early rather than inventing tokens.
  cfg.special_tokens = {};
  const BpeTrainResult r = train_bpe("abab", cfg);
  EXPECT_EQ(r.num_merges, 1u);  // "ab" occurs twice; "ba" once, below min_frequency
  EXPECT_EQ(r.vocab_size, 257u);
}

}  // namespace
}  // namespace eth::bpe_train_test
