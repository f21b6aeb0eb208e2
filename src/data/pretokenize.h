// The pre-tokenizers of byte-level BPE tokenizer.json files, hand-coded: the regexes they use
// need Unicode categories and a lookahead (std::regex has neither), and only a few patterns are
// in use, so each known pattern string is recognised and matched by code written for it. An
// unknown pattern is refused by the loader (bpe_tokenizer.cpp). Also the UTF-8 decoding and
// repair the tokenizer needs. Not a regex engine, and not the BPE itself (bpe_tokenizer.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace eth {

// The classes the patterns test: \p{L}, \p{N}, \s (Unicode White_Space) and everything else.
enum class CharClass : std::uint8_t { Other, Letter, Number, Space };
CharClass char_class(char32_t cp);

// One decoded code point of a text. Bytes that are not UTF-8 decode as one Other unit each (the
// text is normally repaired first, see repair_utf8), so splitting never fails.
struct CodePoint {
  char32_t cp = 0;
  std::uint8_t bytes = 1;  // its length in the text, 1-4
  CharClass cls = CharClass::Other;
};
CodePoint decode_utf8_multibyte(std::string_view text, std::size_t i);

// The class of an ASCII character, inline: most text is ASCII, and this is the inner loop.
constexpr CharClass ascii_class(unsigned char b) {
  if ((b | 0x20) >= 'a' && (b | 0x20) <= 'z') return CharClass::Letter;
  if (b >= '0' && b <= '9') return CharClass::Number;
  if (b == ' ' || (b >= '\t' && b <= '\r')) return CharClass::Space;
  return CharClass::Other;
}

inline CodePoint decode_utf8(std::string_view text, std::size_t i) {  // i < text.size()
  const auto b = static_cast<unsigned char>(text[i]);
  if (b < 0x80) return {b, 1, ascii_class(b)};
  return decode_utf8_multibyte(text, i);
}

// Appends `in` to `out` with each maximal invalid UTF-8 subpart replaced by U+FFFD (the
// Unicode "maximal subpart" practice, as Python's errors="replace" and Rust's from_utf8_lossy
// do). Returns the number of replacements.
std::int64_t repair_utf8(std::string_view in, std::string& out);

enum class SplitPattern : std::uint8_t {
  Gpt2,    // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  Llama3,  // (?i:'s|...|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|...
  Qwen2,   // Llama3's with \p{N} (one digit per piece) for \p{N}{1,3}
};
// The pattern whose regex text (as tokenizer.json holds it, after JSON unescaping) is `regex`.
std::optional<SplitPattern> find_split_pattern(std::string_view regex);
std::string_view split_pattern_regex(SplitPattern p);
std::string_view split_pattern_name(SplitPattern p);  // "gpt2", "llama3", "qwen2"

// Appends to `pieces` the matches of the pattern in `text`, in order. The patterns match every
// character, so the pieces cover the text exactly (their concatenation is `text`).
void split_text(SplitPattern p, std::string_view text, std::vector<std::string_view>& pieces);

}  // namespace eth
