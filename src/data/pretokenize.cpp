// Hand-coded matchers for the pre-tokenizer regexes of pretokenize.h. Each reproduces what a
// backtracking regex engine (Oniguruma, as `tokenizers` uses) returns: at each position the first
// alternative that matches, quantifiers greedy, backtracking only where the lookahead (?!\S) or
// the trailing [\r\n]+ forces it.
#include "data/pretokenize.h"

#include <algorithm>
#include <array>
#include <iterator>

namespace eth {

namespace {

struct ClassRange {
  char32_t first;
  char32_t last;
  std::uint8_t cls;  // 1 letter, 2 number
};

constexpr ClassRange kRanges[] = {
#include "data/unicode_table.inc"
};

bool is_white_space(char32_t c) {
  return (c >= 0x9 && c <= 0xD) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

CharClass lookup_class(char32_t c) {
  if (is_white_space(c)) return CharClass::Space;
  const auto* it = std::upper_bound(std::begin(kRanges), std::end(kRanges), c,
                                    [](char32_t v, const ClassRange& r) { return v < r.first; });
  if (it == std::begin(kRanges)) return CharClass::Other;
  --it;
  if (c > it->last) return CharClass::Other;
  return it->cls == 1 ? CharClass::Letter : CharClass::Number;
}


// The valid range of the second byte of a sequence led by `lead` (the later ones are 80..BF).
struct Lead {
  std::uint8_t length;  // 0: not a lead byte
  std::uint8_t second_lo, second_hi;
};
Lead lead_of(unsigned char b) {
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// How many bytes of the sequence at text[i] are valid (the lead included), and whether they make
// a whole code point.
std::size_t valid_prefix(std::string_view text, std::size_t i, const Lead& lead) {
  std::size_t k = 1;
  for (; k < lead.length && i + k < text.size(); ++k) {
    const auto b = static_cast<unsigned char>(text[i + k]);
    const unsigned char lo = k == 1 ? lead.second_lo : 0x80;
    const unsigned char hi = k == 1 ? lead.second_hi : 0xBF;
    if (b < lo || b > hi) break;
  }
  return k;
}

bool is_cr_lf(char32_t c) { return c == '\r' || c == '\n'; }

// Lengths of the contraction after an apostrophe at text[i - 1]: s t m d re ve ll, or 0.
// Case-insensitive matching folds U+017F (long s) to s, as Unicode case folding does.
std::size_t contraction(std::string_view text, std::size_t i, bool ignore_case) {
  auto at = [&](std::size_t k) -> char {
    if (i + k >= text.size()) return '\0';
    const char c = text[i + k];
    return ignore_case && c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  };
  const char a = at(0), b = at(1);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 2;
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 1;
  if (ignore_case && a == '\xC5' && b == '\xBF') return 2;  // U+017F
  return 0;
}

// A cursor over the code points of one text.
class Scanner {
 public:
  explicit Scanner(std::string_view t) : t_(t) {}
  std::size_t size() const { return t_.size(); }
  CodePoint at(std::size_t i) const { return decode_utf8(t_, i); }
  // End of the run of characters of class `cls` starting at i (i itself when none).
  std::size_t run(std::size_t i, CharClass cls, std::size_t* last_start = nullptr,
                  std::size_t max_chars = SIZE_MAX) const {
    std::size_t n = 0;
    while (i < t_.size() && n < max_chars) {
      const CodePoint c = at(i);
      if (c.cls != cls) break;
      if (last_start != nullptr) *last_start = i;
      i += c.bytes;
      ++n;
    }
    return i;
  }
  std::size_t run_cr_lf(std::size_t i) const {
    while (i < t_.size() && is_cr_lf(static_cast<unsigned char>(t_[i]))) ++i;
    return i;
  }
  std::string_view text() const { return t_; }

 private:
  std::string_view t_;
};

// \s+(?!\S)|\s+ at a whitespace character i: the whole run when it ends the text or is one
// character long, else the run but its last character (which the next piece starts with).
std::size_t white_space_piece(const Scanner& s, std::size_t i) {
  std::size_t last = i;
  const std::size_t end = s.run(i, CharClass::Space, &last);
  return end == s.size() || last == i ? end : last;
}

std::size_t gpt2_piece(const Scanner& s, std::size_t i) {
  const CodePoint c = s.at(i);
  if (c.cp == '\'') {
    const std::size_t k = contraction(s.text(), i + 1, false);
    if (k > 0) return i + 1 + k;
  }
  std::size_t j = i;
  CharClass cls = c.cls;
  if (c.cp == ' ' && i + 1 < s.size()) {
    const CodePoint d = s.at(i + 1);
    if (d.cls != CharClass::Space) {
      j = i + 1;
      cls = d.cls;
    }
  }
  // ` ?\p{L}+`, ` ?\p{N}+` and ` ?[^\s\p{L}\p{N}]+` are each a run of one class.
  if (cls != CharClass::Space) return s.run(j, cls);
  return white_space_piece(s, i);
}

std::size_t llama3_piece(const Scanner& s, std::size_t i, std::size_t max_digits) {
  const CodePoint c = s.at(i);
  if (c.cp == '\'') {
    const std::size_t k = contraction(s.text(), i + 1, true);
    if (k > 0) return i + 1 + k;
  }
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (c.cls == CharClass::Letter) return s.run(i, CharClass::Letter);
  const std::size_t next = i + c.bytes;
  const bool has_next = next < s.size();
  const CodePoint d = has_next ? s.at(next) : CodePoint{};
  if (c.cls != CharClass::Number && !is_cr_lf(c.cp) && has_next && d.cls == CharClass::Letter) {
    return s.run(next, CharClass::Letter);
  }
  // \p{N}{1,3}
  if (c.cls == CharClass::Number) return s.run(i, CharClass::Number, nullptr, max_digits);
  // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
  if (c.cls == CharClass::Other) return s.run_cr_lf(s.run(i, CharClass::Other));
  if (c.cp == ' ' && has_next && d.cls == CharClass::Other) {
    return s.run_cr_lf(s.run(next, CharClass::Other));
  }
  // \s*[\r\n]+: through the run's last CR or LF, when it has one.
  const std::size_t end = s.run(i, CharClass::Space);
  for (std::size_t k = end; k > i; --k) {
    if (is_cr_lf(static_cast<unsigned char>(s.text()[k - 1]))) return k;
  }
  return white_space_piece(s, i);
}

}  // namespace

CharClass char_class(char32_t cp) {
  return cp < 128 ? ascii_class(static_cast<unsigned char>(cp)) : lookup_class(cp);
}

CodePoint decode_utf8_multibyte(std::string_view text, std::size_t i) {
  const auto b = static_cast<unsigned char>(text[i]);
  const Lead lead = lead_of(b);
  if (lead.length == 0 || valid_prefix(text, i, lead) != lead.length) return {b, 1, CharClass::Other};
  char32_t cp = b & (0xFF >> (lead.length + 1));
  for (std::size_t k = 1; k < lead.length; ++k) {
    cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
  }
  return {cp, lead.length, lookup_class(cp)};
}

std::int64_t repair_utf8(std::string_view in, std::string& out) {
  out.reserve(out.size() + in.size());
  std::int64_t replaced = 0;
  std::size_t i = 0;
  while (i < in.size()) {
    std::size_t j = i;
    while (j < in.size() && static_cast<unsigned char>(in[j]) < 0x80) ++j;
    out.append(in.substr(i, j - i));
    if (j == in.size()) break;
    i = j;
    const Lead lead = lead_of(static_cast<unsigned char>(in[i]));
    const std::size_t k = lead.length == 0 ? 1 : valid_prefix(in, i, lead);
    if (lead.length != 0 && k == lead.length) {
      out.append(in.substr(i, k));
    } else {
      out.append("\xEF\xBF\xBD");
      ++replaced;
    }
    i += k;
  }
  return replaced;
}

namespace {
constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
}  // namespace

std::optional<SplitPattern> find_split_pattern(std::string_view regex) {
  for (const SplitPattern p : {SplitPattern::Gpt2, SplitPattern::Llama3, SplitPattern::Qwen2}) {
    if (regex == split_pattern_regex(p)) return p;
  }
  return std::nullopt;
}

std::string_view split_pattern_regex(SplitPattern p) {
  switch (p) {
    case SplitPattern::Gpt2: return kGpt2Regex;
    case SplitPattern::Llama3: return kLlama3Regex;
    case SplitPattern::Qwen2: return kQwen2Regex;
  }
  return {};
}

std::string_view split_pattern_name(SplitPattern p) {
  switch (p) {
    case SplitPattern::Gpt2: return "gpt2";
    case SplitPattern::Llama3: return "llama3";
    case SplitPattern::Qwen2: return "qwen2";
  }
  return {};
}

void split_text(SplitPattern p, std::string_view text, std::vector<std::string_view>& pieces) {
  const Scanner s(text);
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t end = 0;
    switch (p) {
      case SplitPattern::Gpt2: end = gpt2_piece(s, i); break;
      case SplitPattern::Llama3: end = llama3_piece(s, i, 3); break;
      case SplitPattern::Qwen2: end = llama3_piece(s, i, 1); break;
    }
    if (end <= i) end = i + s.at(i).bytes;  // never stall (every branch above advances)
    pieces.push_back(text.substr(i, end - i));
    i = end;
  }
}

}  // namespace eth
