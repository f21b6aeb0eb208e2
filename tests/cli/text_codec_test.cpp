// eth sample's text codecs (cli/text_codec.h): the byte codec is the identity on bytes both ways
// and spells ids outside them out; the tokenizer.json codec round-trips text through the BPE and
// is named by its file; a missing tokenizer file is an input error naming it.
#include "cli/text_codec.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "test_util.h"

namespace eth::text_codec_test {
namespace {

const std::string kGpt2Style =
    (std::filesystem::path(ETH_TEST_DATA_DIR) / "tokenizer" / "gpt2_style.json").string();

TEST(TextCodec, BytesAreIdsBothWays) {
  const auto codec = cli::make_text_codec("");
  EXPECT_EQ(codec->name(), "bytes");
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const std::vector<std::int32_t> ids = codec->encode(all);
  ASSERT_EQ(ids.size(), 256u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(ids[static_cast<std::size_t>(b)], b);
  EXPECT_EQ(codec->decode(ids), all);
}

TEST(TextCodec, IdsOutsideTheBytesAreSpelledOut) {
  const cli::ByteCodec codec;
  const std::vector<std::int32_t> ids{104, 256, 105, -1, 50000};
  EXPECT_EQ(codec.decode(ids), "h<|256|>i<|-1|><|50000|>");
}

TEST(TextCodec, TokenizerJsonRoundTripsText) {
  const auto codec = cli::make_text_codec(kGpt2Style);
  EXPECT_EQ(codec->name(), kGpt2Style);
  for (const std::string text : {"Hello, world! It's 2024.", "  spaces\tand\nlines  ",
                                 "caf\xC3\xA9 \xE4\xB8\xAD\xE6\x96\x87"}) {
    const std::vector<std::int32_t> ids = codec->encode(text);
    EXPECT_LT(ids.size(), text.size() + 1);
    EXPECT_EQ(codec->decode(ids), text);
  }
  const std::string e = test::error_of([] { cli::make_text_codec("/nonexistent/tok.json"); });
  EXPECT_NE(e.find("/nonexistent/tok.json"), std::string::npos) << e;
}

}  // namespace
}  // namespace eth::text_codec_test
