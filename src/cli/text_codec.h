// Text to token ids and back for `eth sample`: the one seam a tokenizer plugs into. The byte
// tokenizer of data/tokenize.h (token = byte, what `eth data --text` writes) by default; with
// --tokenizer tokenizer.json, the byte-level BPE of data/bpe_tokenizer.h.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace eth::cli {

class TextCodec {
 public:
  virtual ~TextCodec() = default;
  virtual std::string name() const = 0;
  virtual std::vector<std::int32_t> encode(std::string_view text) const = 0;
  // The exact bytes the ids stand for (may be partial UTF-8 when cut mid-character).
  virtual std::string decode(std::span<const std::int32_t> ids) const = 0;
};

// Ids 0..255 are bytes; an id outside them (a model of a larger vocabulary sampled without its
// tokenizer) decodes as "<|id|>" so nothing is dropped silently.
class ByteCodec final : public TextCodec {
 public:
  std::string name() const override { return "bytes"; }
  std::vector<std::int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const std::int32_t> ids) const override;
};

// `tokenizer`: empty for the byte codec, else a tokenizer.json path (InputError naming
// --tokenizer in a build without the BPE tokenizer).
std::unique_ptr<TextCodec> make_text_codec(const std::string& tokenizer);

}  // namespace eth::cli
