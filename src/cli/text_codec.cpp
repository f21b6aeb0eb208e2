// The text codecs of `eth sample`. See text_codec.h.
#include "cli/text_codec.h"

#include "data/bpe_tokenizer.h"
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

namespace {

// A tokenizer.json: BpeTokenizer's ids (uint32) as the model's int32 ids.
class BpeCodec final : public TextCodec {
 public:
  explicit BpeCodec(const std::string& path) : tok_(BpeTokenizer::load(path)), path_(path) {}
  std::string name() const override { return path_; }
  std::vector<std::int32_t> encode(std::string_view text) const override {
    std::vector<std::uint32_t> ids;
    tok_.encode(text, ids);
    return {ids.begin(), ids.end()};
  }
  std::string decode(std::span<const std::int32_t> ids) const override {
    const std::vector<std::uint32_t> wide(ids.begin(), ids.end());
    return tok_.decode(wide);
  }

 private:
  BpeTokenizer tok_;
  std::string path_;
};

}  // namespace

std::unique_ptr<TextCodec> make_text_codec(const std::string& tokenizer) {
  if (tokenizer.empty()) return std::make_unique<ByteCodec>();
  return std::make_unique<BpeCodec>(tokenizer);
}

}  // namespace eth::cli
