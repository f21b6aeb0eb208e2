// The text codecs of `eth sample`. See text_codec.h.
#include "cli/text_codec.h"

#include "core/error.h"
#include "data/tokenize.h"

namespace eth::cli {

std::vector<std::int32_t> ByteCodec::encode(std::string_view text) const {
  const std::vector<std::uint16_t> bytes = tokenize_bytes(text);
  return {bytes.begin(), bytes.end()};
}

std::string ByteCodec::decode(std::span<const std::int32_t> ids) const {
  std::string out;
  for (const std::int32_t id : ids) {
    if (id >= 0 && id < kByteVocab) {
      out.push_back(static_cast<char>(static_cast<unsigned char>(id)));
    } else {
      out += "<|" + std::to_string(id) + "|>";
    }
  }
  return out;
}

std::unique_ptr<TextCodec> make_text_codec(const std::string& tokenizer) {
  if (tokenizer.empty()) return std::make_unique<ByteCodec>();
  // MERGE(tokenizer): return a codec over BpeTokenizer::load(tokenizer) here: encode through
  // BpeTokenizer::encode (uint32 ids), decode through BpeTokenizer::decode.
  throw InputError("sample", "--tokenizer", "",
                   "tokenizer.json files are not read by this build yet (the BPE tokenizer is "
                   "on its own branch); leave --tokenizer out to use bytes");
}

}  // namespace eth::cli
