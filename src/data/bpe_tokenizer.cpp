// Byte-level BPE encoding and decoding. See bpe_tokenizer.h; the loader is bpe_tokenizer_io.cpp.
#include "data/bpe_tokenizer.h"

#include <algorithm>
#include <array>

#include "core/error.h"

namespace eth {

namespace {

// Pieces longer than this are merged every time rather than cached (long runs of whitespace or
// punctuation are rare and would fill the cache with one-off keys).
constexpr std::size_t kMaxCachedPieceBytes = 64;
constexpr std::size_t kMaxCacheEntries = std::size_t{1} << 18;

const std::array<char32_t, 256> kByteChar = [] {
  std::array<char32_t, 256> t{};
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    t[static_cast<std::size_t>(b)] = printable ? static_cast<char32_t>(b) : next++;
  }
  return t;
}();

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

}  // namespace

char32_t byte_level_char(unsigned char b) { return kByteChar[b]; }

int byte_level_byte(char32_t c) {
  static const std::array<std::int16_t, 324> inverse = [] {
    std::array<std::int16_t, 324> t{};
    t.fill(-1);
    for (int b = 0; b < 256; ++b) t[kByteChar[static_cast<std::size_t>(b)]] = static_cast<std::int16_t>(b);
    return t;
  }();
  return c < inverse.size() ? inverse[c] : -1;
}

std::string byte_level_text(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char b : bytes) append_utf8(out, byte_level_char(static_cast<unsigned char>(b)));
  return out;
}

std::string_view BpeTokenizer::token_bytes(std::uint32_t id) const {
  return id < bytes_of_.size() ? std::string_view(bytes_of_[id]) : std::string_view();
}

std::string BpeTokenizer::decode(std::span<const std::uint32_t> ids) const {
  std::string out;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= bytes_of_.size() || bytes_of_[ids[i]].empty()) {
      throw InputError("data", "", "ids[" + std::to_string(i) + "]",
                       "token id " + std::to_string(ids[i]) +
                           " is not in the tokenizer's vocabulary (size " +
                           std::to_string(vocab_size_) + ")");
    }
    out += bytes_of_[ids[i]];
  }
  return out;
}

void BpeTokenizer::encode(std::string_view text, std::vector<std::uint32_t>& out) const {
  BpeEncoder(*this).encode(text, out);
}

void BpeEncoder::encode(std::string_view text, std::vector<std::uint32_t>& out) {
  // Added tokens are found in two passes, as `tokenizers` does: those with normalized=false in
  // the text, then those with normalized=true in the gaps (with no normalizer, the same text).
  // Each pass takes the leftmost match, the longest there.
  auto pass = [&](auto&& self, std::string_view t, int which) -> void {
    if (which == 2) {
      encode_ordinary(t, out);
      return;
    }
    const auto& first = tok_.added_by_first_[which];
    const auto& starts = tok_.added_starts_[which];
    std::size_t gap = 0;
    for (std::size_t i = 0; i < t.size(); ++i) {
      if (!starts[static_cast<unsigned char>(t[i])]) continue;
      const auto& cands = first[static_cast<unsigned char>(t[i])];
      for (const std::uint32_t k : cands) {
        const AddedToken& a = tok_.added_[k];
        if (t.compare(i, a.content.size(), a.content) != 0) continue;
        if (i > gap) self(self, t.substr(gap, i - gap), which + 1);
        out.push_back(a.id);
        i += a.content.size() - 1;
        gap = i + 1;
        break;
      }
    }
    if (gap < t.size()) self(self, t.substr(gap), which + 1);
  };
  pass(pass, text, 0);
}

void BpeEncoder::encode_ordinary(std::string_view text, std::vector<std::uint32_t>& out) {
  pieces_.resize(tok_.steps_.size());
  prefixed_.resize(tok_.steps_.size());
  pre_tokenize(text, 0, out);
}

void BpeEncoder::pre_tokenize(std::string_view text, std::size_t step,
                              std::vector<std::uint32_t>& out) {
  if (step == tok_.steps_.size()) {
    encode_piece(text, out);
    return;
  }
  const PreTokenizerStep& s = tok_.steps_[step];
  std::string_view t = text;
  if (s.byte_level && s.add_prefix_space && !text.starts_with(' ')) {
    prefixed_[step].assign(1, ' ');
    prefixed_[step].append(text);
    t = prefixed_[step];
  }
  if (s.byte_level && !s.use_regex) {
    pre_tokenize(t, step + 1, out);
    return;
  }
  auto& pieces = pieces_[step];
  pieces.clear();
  split_text(s.byte_level ? SplitPattern::Gpt2 : s.pattern, t, pieces);
  for (const std::string_view p : pieces) pre_tokenize(p, step + 1, out);
}

void BpeEncoder::encode_piece(std::string_view piece, std::vector<std::uint32_t>& out) {
  const bool cacheable = piece.size() <= kMaxCachedPieceBytes;
  if (cacheable) {
    const auto it = cache_.find(piece);
    if (it != cache_.end()) {
      out.insert(out.end(), cache_ids_.begin() + it->second.first,
                 cache_ids_.begin() + it->second.first + it->second.second);
      return;
    }
  }
  const std::size_t before = out.size();
  const auto whole = tok_.ignore_merges_ ? tok_.whole_.find(piece) : tok_.whole_.end();
  if (whole != tok_.whole_.end()) {
    out.push_back(whole->second);
  } else {
    merge(piece, out);
  }
  if (cacheable && cache_.size() < kMaxCacheEntries) {
    const auto offset = static_cast<std::uint32_t>(cache_ids_.size());
    cache_ids_.insert(cache_ids_.end(), out.begin() + static_cast<std::ptrdiff_t>(before),
                      out.end());
    cache_.emplace(std::string(piece),
                   std::pair{offset, static_cast<std::uint32_t>(out.size() - before)});
  }
}

// The merges `tokenizers` applies: repeatedly the adjacent pair of lowest rank, the leftmost of
// equals, found with a heap of candidate pairs whose stale entries are skipped when popped.
void BpeEncoder::merge(std::string_view piece, std::vector<std::uint32_t>& out) {
  const auto n = static_cast<std::int32_t>(piece.size());
  symbols_.resize(piece.size());
  for (std::int32_t i = 0; i < n; ++i) {
    symbols_[static_cast<std::size_t>(i)] = {
        tok_.byte_id_[static_cast<unsigned char>(piece[static_cast<std::size_t>(i)])], i - 1,
        i + 1 < n ? i + 1 : -1, true};
  }
  auto& heap = heap_;
  heap.clear();
  auto consider = [&](std::int32_t left) {
    const Symbol& a = symbols_[static_cast<std::size_t>(left)];
    if (a.next < 0) return;
    const auto it = tok_.merges_.find(
        BpeTokenizer::pair_key(a.id, symbols_[static_cast<std::size_t>(a.next)].id));
    if (it == tok_.merges_.end()) return;
    heap.push_back({it->second.rank, left});
    std::push_heap(heap.begin(), heap.end());
  };
  for (std::int32_t i = 0; i + 1 < n; ++i) consider(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    const BpeEncoder::HeapEntry top = heap.back();
    heap.pop_back();
    Symbol& a = symbols_[static_cast<std::size_t>(top.pos)];
    if (!a.alive || a.next < 0) continue;
    Symbol& b = symbols_[static_cast<std::size_t>(a.next)];
    const auto it = tok_.merges_.find(BpeTokenizer::pair_key(a.id, b.id));
    if (it == tok_.merges_.end() || it->second.rank != top.rank) continue;  // stale
    a.id = it->second.id;
    b.alive = false;
    a.next = b.next;
    if (b.next >= 0) symbols_[static_cast<std::size_t>(b.next)].prev = top.pos;
    if (a.prev >= 0) consider(a.prev);
    consider(top.pos);
  }
  for (std::int32_t i = 0; i >= 0 && i < n; i = symbols_[static_cast<std::size_t>(i)].next) {
    out.push_back(symbols_[static_cast<std::size_t>(i)].id);
  }
}

}  // namespace eth
