// Learning a byte-level BPE from the user's own text and writing it as a Hugging Face
// tokenizer.json (that `tokenizers` loads and that BpeTokenizer reads back). The vocabulary is
// the special tokens, then the 256 bytes, then one token per merge. Each merge joins the most
// frequent adjacent pair over the text's pre-tokenized words (ties: the pair of lower ids), so
// the result is a deterministic function of the text and the config. Not the encoder
// (bpe_tokenizer.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>  // Json members by value

#include "core/json_cursor.h"
#include "data/pretokenize.h"

namespace eth {

struct BpeTrainConfig {
  std::uint32_t vocab_size = 0;  // in all: special tokens, 256 bytes, merges
  std::vector<std::string> special_tokens = {"<|endoftext|>"};
  // Gpt2: GPT-2's file shape (a ByteLevel pre-tokenizer with its regex); Llama3 and Qwen2: a
  // Split with that regex, then ByteLevel without one.
  SplitPattern pattern = SplitPattern::Gpt2;
  std::int64_t min_frequency = 2;  // a pair seen fewer times is never merged
};

struct BpeTrainResult {
  Json tokenizer;               // the tokenizer.json document
  std::uint32_t vocab_size = 0;  // smaller than asked when the text ran out of frequent pairs
  std::size_t num_merges = 0;
  std::size_t num_distinct_words = 0;
};

// Throws InputError("data", "--vocab" or "--special", "", ...) for a vocabulary smaller than the
// special tokens plus 256, or an empty or repeated special token.
BpeTrainResult train_bpe(std::string_view text, const BpeTrainConfig& config);

}  // namespace eth
