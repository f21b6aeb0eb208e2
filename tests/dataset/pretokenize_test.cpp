// The hand-coded pre-tokenizer matchers (data/pretokenize.h) against splits written out by hand
// for the strings where a regex engine's choices are easy to get wrong: contractions (and their
// case), digit runs, non-ASCII letters and numbers, combining marks, and whitespace runs that the
// lookahead (?!\S) cuts short. Every expected split was also checked with Python's `regex` module
// (the patterns' own text, an independent engine). Also the UTF-8 decoding and repair.
#include "data/pretokenize.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace eth::pretokenize_test {
namespace {

using Pieces = std::vector<std::string>;

Pieces split(SplitPattern p, std::string_view text) {
  std::vector<std::string_view> views;
  split_text(p, text, views);
  return Pieces(views.begin(), views.end());
}

struct Case {
  std::string text;
  Pieces want;
};

void expect_splits(SplitPattern p, const std::vector<Case>& cases) {
  for (const Case& c : cases) EXPECT_EQ(split(p, c.text), c.want) << "text \"" << c.text << "\"";
}

TEST(Pretokenize, Gpt2SplitsTrickyStringsAsTheRegexDoes) {
  expect_splits(SplitPattern::Gpt2, {
      {"I'm don't", {"I", "'m", " don", "'t"}},
      // GPT-2's contractions are lower case only: 'LL is punctuation then a word.
      {"we'LL they're", {"we", "'", "LL", " they", "'re"}},
      // The lookahead leaves the last space of a run to the word after it.
      {"  hello", {" ", " hello"}},
      {"a   \n", {"a", "   \n"}},
      {"x123 45", {"x", "123", " 45"}},
      {"Hello!!! ?", {"Hello", "!!!", " ?"}},
      {"caf\xC3\xA9 \xC3\xBC" "ber", {"caf\xC3\xA9", " \xC3\xBC" "ber"}},
      // Only a plain space joins the word after it; a tab stays alone.
      {"\t\tx", {"\t", "\t", "x"}},
      // Arabic-Indic digits are \p{N}, CJK ideographs \p{L}.
      {"\xD9\xA3\xD9\xA4 \xE4\xB8\xAD\xE6\x96\x87", {"\xD9\xA3\xD9\xA4", " \xE4\xB8\xAD\xE6\x96\x87"}},
      // NBSP is white space but not the space the patterns' " ?" names.
      {"a\xC2\xA0" "b", {"a", "\xC2\xA0", "b"}},
      // A combining mark is neither letter nor number: it goes with the punctuation after it.
      {"e\xCC\x81!", {"e", "\xCC\x81!"}},
      {"' ''s", {"'", " ''", "s"}},
  });
}

TEST(Pretokenize, Llama3SplitsTrickyStringsAsTheRegexDoes) {
  expect_splits(SplitPattern::Llama3, {
      {"I'M HE'LL", {"I", "'M", " HE", "'LL"}},  // contractions in any case
      {"12345", {"123", "45"}},                  // at most three digits a piece
      {"hello\n\nworld", {"hello", "\n\n", "world"}},
      {" !!\n\nx", {" !!\n\n", "x"}},  // punctuation takes the line breaks after it
      {"(abc", {"(abc"}},              // one non-letter may lead a word
      {"  a", {" ", " a"}},
      {"x  \n  y", {"x", "  \n", " ", " y"}},
      {"\nabc", {"\n", "abc"}},        // but never a line break
      {"a1b", {"a", "1", "b"}},
      {"   ", {"   "}},
  });
}

TEST(Pretokenize, Qwen2TakesOneDigitAPiece) {
  expect_splits(SplitPattern::Qwen2, {
      {"12345", {"1", "2", "3", "4", "5"}},
      {"I'M x", {"I", "'M", " x"}},
      {"v2.0", {"v", "2", ".", "0"}},
  });
}

// Whatever the text, the pieces are non-empty and concatenate back to it (invalid UTF-8 too).
TEST(Pretokenize, PiecesCoverTheTextExactly) {
  const std::vector<std::string> texts = {
      "", "a", " \n\r\t ", "it's 2024!\n\n  Done.", "\xFF\xFE" "abc\x80", "\xE4\xB8", "''''",
      "x \xE2\x80\xA8 y"};
  for (const SplitPattern p : {SplitPattern::Gpt2, SplitPattern::Llama3, SplitPattern::Qwen2}) {
    for (const std::string& t : texts) {
      std::string joined;
      for (const std::string& piece : split(p, t)) {
        EXPECT_FALSE(piece.empty());
        joined += piece;
      }
      EXPECT_EQ(joined, t) << split_pattern_name(p);
    }
  }
}

TEST(Pretokenize, PatternsAreFoundByTheirRegexTextOnly) {
  for (const SplitPattern p : {SplitPattern::Gpt2, SplitPattern::Llama3, SplitPattern::Qwen2}) {
    EXPECT_EQ(find_split_pattern(split_pattern_regex(p)), p) << split_pattern_name(p);
  }
  EXPECT_EQ(split_pattern_name(SplitPattern::Gpt2), "gpt2");
  EXPECT_EQ(split_pattern_name(SplitPattern::Llama3), "llama3");
  EXPECT_EQ(split_pattern_name(SplitPattern::Qwen2), "qwen2");
  // A regex that differs by one character is not one of them.
  std::string almost(split_pattern_regex(SplitPattern::Gpt2));
  almost.back() = '*';
  EXPECT_FALSE(find_split_pattern(almost).has_value());
  EXPECT_FALSE(find_split_pattern("").has_value());
}

TEST(Utf8, DecodesEachLengthAndTakesInvalidBytesOneByOne) {
  const std::string text = "A\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80";
  const std::vector<std::pair<char32_t, int>> want = {
      {U'A', 1}, {0xE9, 2}, {0x4E2D, 3}, {0x1F600, 4}};
  std::size_t i = 0;
  for (const auto& [cp, bytes] : want) {
    const CodePoint c = decode_utf8(text, i);
    EXPECT_EQ(c.cp, cp);
    EXPECT_EQ(c.bytes, bytes);
    i += c.bytes;
  }
  EXPECT_EQ(i, text.size());
  // A surrogate (ED A0 80), an overlong form (C0 AF), a cut sequence and a stray continuation
  // byte: each first byte alone, as Other.
  for (const std::string bad : {"\xED\xA0\x80", "\xC0\xAF", "\xE4\xB8", "\x80"}) {
    const CodePoint c = decode_utf8(bad, 0);
    EXPECT_EQ(c.bytes, 1);
    EXPECT_EQ(c.cp, static_cast<unsigned char>(bad[0]));
    EXPECT_EQ(c.cls, CharClass::Other);
  }
}

// The maximal-subpart repair, on cases whose answer Unicode's own examples (Table 3-8) give.
TEST(Utf8, RepairReplacesEachMaximalInvalidSubpart) {
  std::string out;
  EXPECT_EQ(repair_utf8("a\x80" "b", out), 1);
  EXPECT_EQ(out, "a\xEF\xBF\xBD" "b");
  out.clear();
  // Table 3-8: 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64 -> a, FFFD, FFFD, FFFD, b, FFFD, c, FFFD,
  // FFFD, d.
  EXPECT_EQ(repair_utf8("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64", out), 6);
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(out, "a" + r + r + r + "b" + r + "c" + r + r + "d");
  out.clear();
  EXPECT_EQ(repair_utf8("caf\xC3\xA9 \xF0\x9F\x98\x80", out), 0);
  EXPECT_EQ(out, "caf\xC3\xA9 \xF0\x9F\x98\x80");
  // Appends: what `out` held stays.
  EXPECT_EQ(repair_utf8("\xFF", out), 1);
  EXPECT_EQ(out, "caf\xC3\xA9 \xF0\x9F\x98\x80" + r);
}

// The inline ASCII classes agree with the generated Unicode table and the White_Space list.
TEST(CharClasses, AsciiFastPathAgreesWithTheTable) {
  for (char32_t c = 0; c < 128; ++c) {
    const CharClass want = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ? CharClass::Letter
                           : c >= '0' && c <= '9'                           ? CharClass::Number
                           : c == ' ' || (c >= 9 && c <= 13)                ? CharClass::Space
                                                                            : CharClass::Other;
    EXPECT_EQ(char_class(c), want) << static_cast<int>(c);
  }
  EXPECT_EQ(char_class(0x00A0), CharClass::Space);   // NBSP is White_Space
  EXPECT_EQ(char_class(0x200B), CharClass::Other);   // ZWSP is not
  EXPECT_EQ(char_class(0x0661), CharClass::Number);  // Arabic-Indic one
  EXPECT_EQ(char_class(0x2167), CharClass::Number);  // Roman numeral eight (Nl)
  EXPECT_EQ(char_class(0x0301), CharClass::Other);   // combining acute (Mn)
  EXPECT_EQ(char_class(0x4E2D), CharClass::Letter);  // CJK (Lo)
}

}  // namespace
}  // namespace eth::pretokenize_test
