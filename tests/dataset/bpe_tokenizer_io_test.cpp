// tokenizer.json files ETH cannot encode exactly as `tokenizers` would are refused, each naming
// the file and the JSON path of what is wrong, before any text is read.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "core/json_file.h"
#include "data/bpe_tokenizer.h"
#include "test_util.h"

namespace eth::bpe_tokenizer_io_test {
namespace {

const std::filesystem::path kDir = std::filesystem::path(ETH_TEST_DATA_DIR) / "tokenizer";

// The error of loading the GPT-2-style (or Llama-3-style) fixture after `edit`, named "bad.json".
std::string refusal(const std::function<void(Json&)>& edit, const char* style = "gpt2") {
  Json doc = read_json_file(kDir / (std::string(style) + "_style.json"), "test");
  edit(doc);
  return test::error_of([&] { (void)BpeTokenizer::from_json(doc, "bad.json"); });
}

void expect_refused(const std::string& e, const std::string& path, const std::string& detail) {
  EXPECT_NE(e.find("bad.json"), std::string::npos) << e;
  EXPECT_NE(e.find(path + ":"), std::string::npos) << "want path " << path << " in: " << e;
  EXPECT_NE(e.find(detail), std::string::npos) << "want \"" << detail << "\" in: " << e;
}

TEST(BpeBadInput, UnsupportedModelTypes) {
  for (const char* type : {"WordPiece", "Unigram", "WordLevel"}) {
    expect_refused(refusal([&](Json& d) { d["model"]["type"] = type; }), "model.type",
                   std::string("unsupported model type \"") + type + "\"");
  }
  expect_refused(refusal([](Json& d) { d["model"].erase("type"); }), "model", "missing \"type\"");
  expect_refused(refusal([](Json& d) { d["model"]["byte_fallback"] = true; }),
                 "model.byte_fallback", "expected false or null");
  expect_refused(refusal([](Json& d) { d["model"]["dropout"] = 0.1; }), "model.dropout",
                 "expected 0 or null");
}

TEST(BpeBadInput, UnknownNormalizersAndPreTokenizers) {
  expect_refused(refusal([](Json& d) { d["normalizer"] = {{"type", "NFC"}}; }), "normalizer",
                 "unsupported normalizer \"NFC\"");
  expect_refused(refusal([](Json& d) { d["pre_tokenizer"] = {{"type", "Whitespace"}}; }),
                 "pre_tokenizer.type", "unsupported pre-tokenizer \"Whitespace\"");
  expect_refused(refusal([](Json& d) { d["pre_tokenizer"] = nullptr; }), "(root)",
                 "needs a ByteLevel pre-tokenizer");
  expect_refused(
      refusal([](Json& d) {
        d["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\p{L}+|\\s+";
      }, "llama3"),
      "pre_tokenizer.pretokenizers[0].pattern.Regex", "unknown pre-tokenizer regex");
  expect_refused(refusal([](Json& d) {
                   d["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed";
                 }, "llama3"),
                 "pre_tokenizer.pretokenizers[0].behavior", "\"Isolated\"");
  // ByteLevel before a Split: the Split would see byte-level characters.
  expect_refused(refusal([](Json& d) {
                   auto& list = d["pre_tokenizer"]["pretokenizers"];
                   std::swap(list[0], list[1]);
                 }, "llama3"),
                 "pre_tokenizer.pretokenizers[0]", "ByteLevel must be the last");
  expect_refused(refusal([](Json& d) { d["decoder"] = {{"type", "WordPiece"}}; }),
                 "decoder.type", "unsupported decoder \"WordPiece\"");
}

TEST(BpeBadInput, MalformedMergesAndMissingVocabulary) {
  expect_refused(refusal([](Json& d) { d["model"]["merges"][5] = "abc"; }), "model.merges[5]",
                 "two tokens separated by one space");
  expect_refused(refusal([](Json& d) { d["model"]["merges"][6] = {"a"}; }), "model.merges[6]",
                 "a pair of tokens");
  expect_refused(refusal([](Json& d) { d["model"]["merges"][7] = 42; }), "model.merges[7]",
                 "\"a b\" or [\"a\", \"b\"]");
  expect_refused(refusal([](Json& d) { d["model"]["merges"][3] = {"t", "zzqq"}; }),
                 "model.merges[3]", "token \"zzqq\" is not in model.vocab");
  // The first merge's result removed from the vocabulary.
  expect_refused(refusal([](Json& d) {
                   const auto& m = d["model"]["merges"][0];
                   d["model"]["vocab"].erase(m[0].get<std::string>() + m[1].get<std::string>());
                 }),
                 "model.merges[0]", "the merged token \"\xC4\xA0t\" is not in model.vocab");
  expect_refused(refusal([](Json& d) { d["model"]["vocab"].erase("a"); }), "model.vocab",
                 "no token for byte 97");
  expect_refused(refusal([](Json& d) { d["model"]["vocab"]["a"] = 5000000; }), "model.vocab.a",
                 "expected");
  expect_refused(refusal([](Json& d) { d["model"]["vocab"]["a"] = d["model"]["vocab"]["b"]; }),
                 "model.vocab.b", "id 66 is given to two tokens");
}

TEST(BpeBadInput, AddedTokenOptionsEthDoesNotImplement) {
  for (const char* flag : {"lstrip", "rstrip", "single_word"}) {
    expect_refused(refusal([&](Json& d) { d["added_tokens"][0][flag] = true; }),
                   std::string("added_tokens[0].") + flag, "ETH does not support added tokens");
  }
  expect_refused(refusal([](Json& d) { d["added_tokens"][0]["content"] = ""; }),
                 "added_tokens[0].content", "a non-empty string");
  expect_refused(refusal([](Json& d) { d["added_tokens"][0]["surprise"] = 1; }),
                 "added_tokens[0].surprise", "unknown field");
}

TEST(BpeBadInput, FilesThatAreNotJsonNameTheFile) {
  const auto dir = test::scratch("bpe_bad_input", "files");
  const auto p = dir / "broken.json";
  {
    std::ofstream(p) << "{\"model\": ";
  }
  const std::string e = test::error_of([&] { (void)BpeTokenizer::load(p); });
  EXPECT_NE(e.find(p.string()), std::string::npos) << e;
}

}  // namespace
}  // namespace eth::bpe_tokenizer_io_test
