// Byte-level BPE (data/bpe_tokenizer.h, data/pretokenize.h): the input is split by every
// pre-tokenizer pattern (the pieces must cover it exactly) and repaired as UTF-8 (a repaired text
// repairs to itself); then read as a tokenizer.json, and when it loads, its own repaired bytes
// are encoded and must decode back exactly.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/json_file.h"
#include "data/bpe_tokenizer.h"
#include "data/pretokenize.h"
#include "fuzz_util.h"

using namespace eth;
using namespace eth::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in = bytes(data, size);
  std::vector<std::string_view> pieces;
  for (const SplitPattern p : {SplitPattern::Gpt2, SplitPattern::Llama3, SplitPattern::Qwen2}) {
    pieces.clear();
    split_text(p, in, pieces);
    std::string joined;
    for (const std::string_view s : pieces) {
      if (s.empty()) std::abort();
      joined += s;
    }
    if (joined != in) std::abort();
  }
  std::string fixed, again;
  repair_utf8(in, fixed);
  if (repair_utf8(fixed, again) != 0 || again != fixed) std::abort();
  expect_input_errors_only([&] {
    const Json doc = parse_json_text(std::string(in), "tokenizer.json", "data");
    const BpeTokenizer t = BpeTokenizer::from_json(doc, "tokenizer.json");
    std::vector<std::uint32_t> ids;
    BpeEncoder(t).encode(fixed, ids);
    for (const std::uint32_t id : ids) {
      if (id >= t.vocab_size()) std::abort();
    }
    if (t.decode(ids) != fixed) std::abort();
  });
  return 0;
}
