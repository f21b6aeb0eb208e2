// InputError's message: "[component] source: path: detail" with empty parts left out, every
// part printable (control bytes and invalid UTF-8 escaped) and bounded, InputErrors joining
// its errors one per line; utf8_sequence_length against the RFC 3629 table written out here.
#include "core/error.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace eth::error_test {
namespace {

TEST(ErrorText, MessageNamesComponentSourceAndPathLeavingOutEmptyParts) {
  const InputError e("plan", "plan.json", "pipelines[1].stages[0].units", "expected 3, got 4");
  EXPECT_EQ(std::string(e.what()),
            "[plan] plan.json: pipelines[1].stages[0].units: expected 3, got 4");
  EXPECT_EQ(e.component(), "plan");
  EXPECT_EQ(e.source(), "plan.json");
  EXPECT_EQ(e.path(), "pipelines[1].stages[0].units");
  EXPECT_EQ(e.detail(), "expected 3, got 4");
  EXPECT_EQ(std::string(InputError("", "--gbs", "", "must be positive").what()),
            "--gbs: must be positive");
  EXPECT_EQ(std::string(InputError("c", "", "a.b", "d").what()), "[c] a.b: d");
  EXPECT_EQ(std::string(InputError("", "", "", "just this").what()), "just this");
}

TEST(ErrorText, SeveralErrorsJoinOnePerLineAndKeepEachError) {
  const std::vector<InputError> errs{InputError("s", "a.txt", "line 1", "one"),
                                     InputError("s", "b.txt", "", "two")};
  const InputErrors all(errs);
  EXPECT_EQ(std::string(all.what()), "[s] a.txt: line 1: one\n[s] b.txt: two");
  ASSERT_EQ(all.errors().size(), 2u);
  EXPECT_EQ(all.errors()[1].source(), "b.txt");
  // Caught as an InputError, it still carries the whole text.
  try {
    throw InputErrors(errs);
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("two"), std::string::npos);
  }
}

// Messages stay printable and short whatever the input holds.
TEST(ErrorText, MessagesArePrintableAndBounded) {
  const InputError nul("t", "f.json", "a", std::string("x\0y", 3));
  EXPECT_EQ(std::string(nul.what()), "[t] f.json: a: x\\0y");
  const InputError bytes("t", "f\xff.json", "p\x01", "bad \xC3 byte\nnext line");
  EXPECT_EQ(std::string(bytes.what()), "[t] f\\xFF.json: p\\x01: bad \\xC3 byte\nnext line");
  const InputError big("t", "f.json", std::string(10 << 20, 'k'), std::string(10 << 20, 'v'));
  EXPECT_LT(std::string(big.what()).size(), 5000u);
  EXPECT_NE(big.path().find("... (10485760 bytes)"), std::string::npos);
  EXPECT_EQ(big.path().substr(0, InputError::kMaxMessagePartBytes),
            std::string(InputError::kMaxMessagePartBytes, 'k'));
  EXPECT_EQ(message_text("\xE2\x82\xAC", 200), "\xE2\x82\xAC");
  EXPECT_EQ(message_text("abcdef", 3), "abc... (6 bytes)");
  EXPECT_EQ(message_text("abc", 3), "abc");  // exactly the limit: nothing cut
}

TEST(ErrorText, ControlCharactersAreEscapedAndNewlinesKeptOnlyWhenAsked) {
  EXPECT_EQ(message_text("a\tb\nc\x7F\x1B"), "a\\tb\\nc\\x7F\\x1B");
  EXPECT_EQ(message_text("a\nb", 200, true), "a\nb");
  // A path or source never spans lines; a detail may.
  const InputError e("t", "f\nx", "p\nq", "d\ne");
  EXPECT_EQ(std::string(e.what()), "[t] f\\nx: p\\nq: d\ne");
}

TEST(ErrorText, Utf8SequencesFollowTheRfc3629Table) {
  // Well-formed: 1 to 4 bytes, at the edges of each row of the table.
  EXPECT_EQ(utf8_sequence_length("A", 0), 1u);
  EXPECT_EQ(utf8_sequence_length("\xC2\x80", 0), 2u);          // U+0080
  EXPECT_EQ(utf8_sequence_length("\xDF\xBF", 0), 2u);          // U+07FF
  EXPECT_EQ(utf8_sequence_length("\xE0\xA0\x80", 0), 3u);      // U+0800
  EXPECT_EQ(utf8_sequence_length("\xED\x9F\xBF", 0), 3u);      // U+D7FF
  EXPECT_EQ(utf8_sequence_length("\xEF\xBF\xBF", 0), 3u);      // U+FFFF
  EXPECT_EQ(utf8_sequence_length("\xF0\x90\x80\x80", 0), 4u);  // U+10000
  EXPECT_EQ(utf8_sequence_length("\xF4\x8F\xBF\xBF", 0), 4u);  // U+10FFFF
  // Ill-formed: overlong forms, surrogates, above U+10FFFF, stray continuation bytes,
  // truncated sequences, bytes never used.
  EXPECT_EQ(utf8_sequence_length("\xC0\x80", 0), 0u);
  EXPECT_EQ(utf8_sequence_length("\xC1\xBF", 0), 0u);
  EXPECT_EQ(utf8_sequence_length("\xE0\x9F\xBF", 0), 0u);
  EXPECT_EQ(utf8_sequence_length("\xED\xA0\x80", 0), 0u);      // U+D800
  EXPECT_EQ(utf8_sequence_length("\xF0\x8F\xBF\xBF", 0), 0u);
  EXPECT_EQ(utf8_sequence_length("\xF4\x90\x80\x80", 0), 0u);  // U+110000
  EXPECT_EQ(utf8_sequence_length("\xF5\x80\x80\x80", 0), 0u);
  EXPECT_EQ(utf8_sequence_length("\x80", 0), 0u);
  EXPECT_EQ(utf8_sequence_length("\xE2\x82", 0), 0u);
  EXPECT_EQ(utf8_sequence_length("\xE2\x28\xA1", 0), 0u);
  EXPECT_EQ(utf8_sequence_length("\xFF", 0), 0u);
  // At an offset inside a string.
  EXPECT_EQ(utf8_sequence_length("ab\xE2\x82\xAC", 2), 3u);
  // message_text escapes every byte of an ill-formed sequence and keeps well-formed ones.
  EXPECT_EQ(message_text("\xED\xA0\x80 \xC3\xA9"), "\\xED\\xA0\\x80 \xC3\xA9");
}

}  // namespace
}  // namespace eth::error_test
