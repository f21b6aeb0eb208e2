// Byte-level BPE against Hugging Face `tokenizers` (an independent implementation): the ids the
// library gave for English, odd Unicode with special tokens, and invalid UTF-8, in GPT-2's and
// Llama-3's styles (tests/data/tokenizer, made by tools/make_tokenizer_fixtures.py). Decoding
// inverts encoding; both merge spellings of tokenizer.json read the same.
#include "data/bpe_tokenizer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "core/json_file.h"
#include "test_util.h"

namespace eth {
namespace {

const std::filesystem::path kDir = std::filesystem::path(ETH_TEST_DATA_DIR) / "tokenizer";

std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::string fixture_text(const std::string& name) {
  const std::string raw = read_all(kDir / (name == "invalid_utf8" ? name + ".bin" : name + ".txt"));
  std::string text;
  repair_utf8(raw, text);
  return text;
}

std::vector<std::uint32_t> fixture_ids(const std::string& style, const std::string& name) {
  const Json ids = read_json_file(kDir / "ids.json", "test");
  return ids.at(style).at(name).get<std::vector<std::uint32_t>>();
}

std::vector<std::uint32_t> encode(const BpeTokenizer& t, std::string_view text) {
  std::vector<std::uint32_t> out;
  BpeEncoder enc(t);
  enc.encode(text, out);
  return out;
}

class Fixture : public ::testing::TestWithParam<std::string> {};

TEST_P(Fixture, IdsEqualTokenizersLibrary) {
  const BpeTokenizer t = BpeTokenizer::load(kDir / (GetParam() + "_style.json"));
  for (const std::string name : {"english", "unicode", "invalid_utf8"}) {
    const std::string text = fixture_text(name);
    const std::vector<std::uint32_t> want = fixture_ids(GetParam(), name);
    EXPECT_EQ(encode(t, text), want) << GetParam() << " " << name;
    // tokenizers decoded `want` to the text it was given (the script checks), so this also
    // checks the U+FFFD repair against Python's errors="replace".
    EXPECT_EQ(t.decode(want), text) << GetParam() << " " << name;
  }
}

TEST_P(Fixture, EncodingInPiecesWithOneCacheIsTheSame) {
  // A second encode hits the word cache; it must give what the first, uncached, gave.
  const BpeTokenizer t = BpeTokenizer::load(kDir / (GetParam() + "_style.json"));
  const std::string text = fixture_text("english");
  BpeEncoder enc(t);
  std::vector<std::uint32_t> a, b;
  enc.encode(text, a);
  enc.encode(text, b);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, fixture_ids(GetParam(), "english"));
}

TEST_P(Fixture, MergesAsStringsReadTheSame) {
  // Older tokenizer.json files spell a merge "a b", newer ones ["a", "b"].
  Json doc = read_json_file(kDir / (GetParam() + "_style.json"), "test");
  for (auto& m : doc["model"]["merges"]) {
    m = m[0].get<std::string>() + " " + m[1].get<std::string>();
  }
  const BpeTokenizer t = BpeTokenizer::from_json(doc, "strings.json");
  EXPECT_EQ(encode(t, fixture_text("unicode")), fixture_ids(GetParam(), "unicode"));
}

INSTANTIATE_TEST_SUITE_P(Styles, Fixture, ::testing::Values("gpt2", "llama3"));

TEST(BpeTokenizer, ReadsTheFixturesShape) {
  const BpeTokenizer g = BpeTokenizer::load(kDir / "gpt2_style.json");
  EXPECT_EQ(g.vocab_size(), 2000u);
  ASSERT_EQ(g.added_tokens().size(), 1u);
  EXPECT_EQ(g.added_tokens()[0].content, "<|endoftext|>");
  ASSERT_EQ(g.pre_tokenizer().size(), 1u);
  EXPECT_TRUE(g.pre_tokenizer()[0].byte_level && g.pre_tokenizer()[0].use_regex);
  const BpeTokenizer l = BpeTokenizer::load(kDir / "llama3_style.json");
  ASSERT_EQ(l.pre_tokenizer().size(), 2u);
  EXPECT_EQ(l.pre_tokenizer()[0].pattern, SplitPattern::Llama3);
  EXPECT_EQ(l.added_tokens().size(), 3u);
}

TEST(BpeTokenizer, DecodeRefusesIdsOutsideTheVocabulary) {
  const BpeTokenizer g = BpeTokenizer::load(kDir / "gpt2_style.json");
  const std::vector<std::uint32_t> ids = {5, 2000};
  const std::string e = test::error_of([&] { (void)g.decode(ids); });
  EXPECT_NE(e.find("ids[1]: token id 2000 is not in the tokenizer's vocabulary"), std::string::npos)
      << e;
}

TEST(ByteLevel, MapIsABijectionOntoPrintableCharacters) {
  std::set<char32_t> seen;
  for (int b = 0; b < 256; ++b) {
    const char32_t c = byte_level_char(static_cast<unsigned char>(b));
    EXPECT_TRUE(seen.insert(c).second);
    EXPECT_EQ(byte_level_byte(c), b);
    EXPECT_NE(char_class(c), CharClass::Space) << b;
  }
  EXPECT_EQ(byte_level_text(" "), "\xC4\xA0");  // Ġ, as in GPT-2's vocabulary
  EXPECT_EQ(byte_level_text("\n"), "\xC4\x8A");  // Ċ
}

}  // namespace
}  // namespace eth

namespace eth {
namespace {

// The pre-tokenizer alone, piece by piece, against the library's pre_tokenize_str of the odd
// Unicode text: a mismatch here names the piece, where an id mismatch only shows its effect.
TEST_P(Fixture, PiecesEqualTokenizersPreTokenizer) {
  const Json all = read_json_file(kDir / "pieces.json", "test");
  const auto want = all.at(GetParam()).get<std::vector<std::string>>();
  const BpeTokenizer t = BpeTokenizer::load(kDir / (GetParam() + "_style.json"));
  const std::string text = fixture_text("unicode");
  // Pieces between the added tokens, as the library's pre_tokenize_str (which knows no added
  // tokens) sees the text whole: split the whole text with the tokenizer's own steps.
  std::vector<std::string_view> a, b;
  a.push_back(text);
  for (const PreTokenizerStep& s : t.pre_tokenizer()) {
    if (s.byte_level && !s.use_regex) continue;
    b.clear();
    for (const std::string_view p : a) split_text(s.byte_level ? SplitPattern::Gpt2 : s.pattern, p, b);
    a.swap(b);
  }
  std::vector<std::string> got;
  for (const std::string_view p : a) got.push_back(byte_level_text(p));
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << "piece " << i;
}

}  // namespace
}  // namespace eth

namespace eth {
namespace {

TEST(BpeTokenizer, AddPrefixSpaceGivesEveryPieceASpace) {
  Json doc = read_json_file(kDir / "gpt2_style.json", "test");
  doc["pre_tokenizer"]["add_prefix_space"] = true;
  const BpeTokenizer t = BpeTokenizer::from_json(doc, "prefixed.json");
  EXPECT_EQ(encode(t, fixture_text("unicode")), fixture_ids("gpt2_prefix_space", "unicode"));
}

}  // namespace
}  // namespace eth
