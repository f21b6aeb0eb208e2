// Byte-level BPE tokenizers read from Hugging Face tokenizer.json files (GPT-2's and Llama-3's
// styles, and Qwen2's regex): added tokens are matched in the text first, the pieces between
// them are split by the pre-tokenizer (pretokenize.h), and each piece's bytes are merged by
// rank. The ids are
// exactly those `tokenizers` gives with add_special_tokens=False (no post-processor: ETH encodes
// a whole corpus, and documents carry whatever separators their text holds). Anything a file
// asks for that this does not do (another model type, a normalizer, an unknown regex, lstrip on
// an added token) is refused by name, with the file and the JSON path, before any text is read.
// Not a trainer (bpe_train.h) and not the byte tokenizer (tokenize.h).
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/json_cursor.h"
#include "data/pretokenize.h"

namespace eth {

// One step of the pre-tokenizer: a regex split or the byte-level step (with its own GPT-2 regex
// when use_regex). Each step splits every piece the one before produced.
struct PreTokenizerStep {
  bool byte_level = false;  // false: a Split with `pattern`
  SplitPattern pattern = SplitPattern::Gpt2;
  bool use_regex = false;         // byte_level only
  bool add_prefix_space = false;  // byte_level only: a piece not starting with ' ' gets one
};

// Hash and equality for string-keyed maps looked up by string_view without a copy.
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <class V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

struct AddedToken {
  std::uint32_t id = 0;
  std::string content;
  bool normalized = false;  // matched in a second pass, after the non-normalized ones
  bool special = false;
};

class BpeTokenizer {
 public:
  // Throws InputError("data", path, JSON path, ...) for anything refused (see above).
  static BpeTokenizer load(const std::filesystem::path& path);
  // The same from a parsed document; `source` names it in errors.
  static BpeTokenizer from_json(const Json& doc, const std::string& source);

  // One more than the largest id (vocabulary and added tokens).
  std::uint32_t vocab_size() const { return vocab_size_; }
  const std::vector<AddedToken>& added_tokens() const { return added_; }
  const std::vector<PreTokenizerStep>& pre_tokenizer() const { return steps_; }
  std::size_t num_merges() const { return merges_.size(); }

  // The token's bytes (an added token's content as written); empty for an id not in use.
  std::string_view token_bytes(std::uint32_t id) const;
  // Concatenated bytes of the tokens: the exact inverse of encode. Throws InputError("data",
  // "", "ids[i]", ...) for an id outside the vocabulary.
  std::string decode(std::span<const std::uint32_t> ids) const;

  // Appends the ids of `text` (valid UTF-8: see repair_utf8) to `out`. Convenience for one
  // call; BpeEncoder keeps a cache across calls.
  void encode(std::string_view text, std::vector<std::uint32_t>& out) const;

 private:
  friend class BpeEncoder;
  struct MergeTarget {
    std::uint32_t rank;
    std::uint32_t id;
  };
  void read_merges(const JsonCursor& merges, const StringMap<std::uint32_t>& ids);
  void read_added_tokens(const std::vector<JsonCursor>& list, const StringMap<std::uint32_t>& ids,
                         std::int64_t max_id);
  static std::uint64_t pair_key(std::uint32_t a, std::uint32_t b) {
    return (std::uint64_t{a} << 32) | b;
  }
  std::vector<PreTokenizerStep> steps_;
  std::vector<AddedToken> added_;
  bool ignore_merges_ = false;
  std::uint32_t vocab_size_ = 0;
  std::uint32_t byte_id_[256] = {};
  std::unordered_map<std::uint64_t, MergeTarget> merges_;
  StringMap<std::uint32_t> whole_;    // token bytes -> id (ignore_merges)
  std::vector<std::string> bytes_of_;  // id -> bytes
  // Per pass (normalized false, true) and first byte: indices into added_, longest first.
  std::array<std::array<std::vector<std::uint32_t>, 256>, 2> added_by_first_;
  std::array<std::array<bool, 256>, 2> added_starts_{};  // whether that list is not empty
};

// Encoding with a cache of the pieces already seen (most words repeat), scratch buffers and the
// pre-tokenizer's piece lists. Not thread-safe; one per thread. The tokenizer must outlive it.
class BpeEncoder {
 public:
  // A candidate merge of the symbol at `pos` with the next. operator< is inverted because
  // std::push_heap keeps the largest on top: the top is the lowest rank, then the leftmost.
  struct HeapEntry {
    std::uint32_t rank;
    std::int32_t pos;
    bool operator<(const HeapEntry& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };

  explicit BpeEncoder(const BpeTokenizer& tok) : tok_(tok) {}
  void encode(std::string_view text, std::vector<std::uint32_t>& out);

 private:
  void encode_ordinary(std::string_view text, std::vector<std::uint32_t>& out);
  void pre_tokenize(std::string_view text, std::size_t step, std::vector<std::uint32_t>& out);
  void encode_piece(std::string_view piece, std::vector<std::uint32_t>& out);
  void merge(std::string_view piece, std::vector<std::uint32_t>& out);

  struct Symbol {
    std::uint32_t id;
    std::int32_t prev, next;  // -1 at the ends
    bool alive;
  };
  const BpeTokenizer& tok_;
  StringMap<std::pair<std::uint32_t, std::uint32_t>> cache_;  // piece -> offset, count
  std::vector<HeapEntry> heap_;
  std::vector<std::uint32_t> cache_ids_;
  std::vector<Symbol> symbols_;
  std::vector<std::vector<std::string_view>> pieces_;  // per pre-tokenizer step
  std::vector<std::string> prefixed_;                  // per step: the piece with its ' '
};

// The byte <-> character map of byte-level BPE: printable bytes stand for themselves, the rest
// for U+0100 upward in byte order (so a token's text is always printable).
char32_t byte_level_char(unsigned char b);
// The byte a character stands for, or -1 when it stands for none.
int byte_level_byte(char32_t c);
// `bytes` as the byte-level text tokenizer.json stores (UTF-8).
std::string byte_level_text(std::string_view bytes);

}  // namespace eth
