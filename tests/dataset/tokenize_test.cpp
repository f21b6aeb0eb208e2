// The byte tokenizer, the synthetic sequences' defining properties (checked on the tokens, not
// against the generator's own output) and splitmix64 against the reference generator's published
// first outputs.
#include "data/tokenize.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "core/error.h"
#include "test_util.h"

namespace eth::tokenize_test {
namespace {

using test::error_of;

TEST(Tokenize, BytesAreTokens) {
  const std::vector<std::uint16_t> t = tokenize_bytes("A\xff\n");
  EXPECT_EQ(t, (std::vector<std::uint16_t>{65, 255, 10}));
  EXPECT_TRUE(tokenize_bytes("").empty());
}

// Every byte value, in order, reads back as the text it came from.
TEST(Tokenize, EveryByteRoundTrips) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const std::vector<std::uint16_t> t = tokenize_bytes(all);
  ASSERT_EQ(t.size(), 256u);
  std::string back;
  for (std::size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(t[i], i);
    EXPECT_LT(t[i], kByteVocab);
    back.push_back(static_cast<char>(t[i]));
  }
  EXPECT_EQ(back, all);
}

TEST(Synthetic, SuccessorIsAFunctionOfThePreviousTokenAndBalanced) {
  SyntheticSpec spec;
  spec.num_tokens = 5000;
  spec.vocab = 50;
  spec.seed = 3;
  const auto t = synthetic_tokens(spec);
  ASSERT_EQ(t.size(), 5000u);
  std::map<std::uint16_t, std::uint16_t> succ;
  std::map<std::uint16_t, int> count;
  for (std::size_t i = 0; i + 1 < t.size(); ++i) {
    auto [it, fresh] = succ.emplace(t[i], t[i + 1]);
    EXPECT_EQ(it->second, t[i + 1]) << "token " << t[i] << " has two successors";
    (void)fresh;
  }
  for (auto x : t) ++count[x];
  // One cycle through all 50 tokens: 5000 / 50 = 100 visits each.
  ASSERT_EQ(count.size(), 50u);
  for (auto [tok, n] : count) EXPECT_EQ(n, 100) << tok;
  EXPECT_EQ(synthetic_tokens(spec), t);
  spec.seed = 4;
  EXPECT_NE(synthetic_tokens(spec), t);
}

// The largest vocabulary: tokens use all 16 bits, each exactly once in one cycle.
TEST(Synthetic, SuccessorCoversTheWholeSixteenBitVocabulary) {
  SyntheticSpec spec;
  spec.num_tokens = 65536;
  spec.vocab = 65536;
  const auto t = synthetic_tokens(spec);
  const std::set<std::uint16_t> distinct(t.begin(), t.end());
  EXPECT_EQ(distinct.size(), 65536u);
}

TEST(Synthetic, PeriodicRepeats) {
  SyntheticSpec spec;
  spec.pattern = SyntheticPattern::Periodic;
  spec.num_tokens = 100;
  spec.period = 7;
  spec.vocab = 1000;
  const auto t = synthetic_tokens(spec);
  ASSERT_EQ(t.size(), 100u);
  for (std::size_t i = 0; i + 7 < t.size(); ++i) EXPECT_EQ(t[i], t[i + 7]);
  for (auto x : t) EXPECT_LT(x, 1000);
  // Within a period the block is random: 7 draws from 1000 are not all one token.
  EXPECT_GT(std::set<std::uint16_t>(t.begin(), t.begin() + 7).size(), 1u);
}

TEST(Synthetic, OutOfRangeFieldsNameTheField) {
  SyntheticSpec spec;
  spec.num_tokens = 100;
  spec.vocab = 1;
  EXPECT_NE(error_of([&] { synthetic_tokens(spec); }).find("vocab"), std::string::npos);
  spec.vocab = 65537;
  EXPECT_NE(error_of([&] { synthetic_tokens(spec); }).find("expected 2..65536, got 65537"),
            std::string::npos);
  spec.vocab = 256;
  spec.num_tokens = 0;
  EXPECT_NE(error_of([&] { synthetic_tokens(spec); }).find("num_tokens"), std::string::npos);
  spec.num_tokens = 10;
  spec.pattern = SyntheticPattern::Periodic;
  spec.period = 11;  // longer than the sequence
  EXPECT_NE(error_of([&] { synthetic_tokens(spec); }).find("period"), std::string::npos);
  spec.period = 0;
  EXPECT_NE(error_of([&] { synthetic_tokens(spec); }).find("period"), std::string::npos);
}

TEST(Synthetic, PatternNames) {
  EXPECT_EQ(parse_synthetic_pattern("successor"), SyntheticPattern::Successor);
  EXPECT_EQ(parse_synthetic_pattern("periodic"), SyntheticPattern::Periodic);
  EXPECT_NE(error_of([&] { parse_synthetic_pattern("zigzag"); }).find("successor, periodic"),
            std::string::npos);
  EXPECT_NE(error_of([&] { parse_synthetic_pattern("Successor"); }).find("--pattern"),
            std::string::npos);
}

// The reference splitmix64 (Vigna's splitmix64.c) from state 0 begins with these three values.
TEST(SplitMix64, MatchesTheReferenceSequence) {
  SplitMix64 g(0);
  EXPECT_EQ(g.next(), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(g.next(), 0x6E789E6AA1B965F4ull);
  EXPECT_EQ(g.next(), 0x06C45D188009454Full);
}

TEST(SplitMix64, BelowIsInRangeAndCoversItEvenly) {
  SplitMix64 g(7);
  constexpr std::uint64_t kN = 10;
  std::vector<int> count(kN, 0);
  for (int i = 0; i < 100000; ++i) {
    const std::uint64_t x = g.below(kN);
    ASSERT_LT(x, kN);
    ++count[x];
  }
  // 10,000 expected per value; the standard deviation is about 95, so 600 is over six of them.
  for (std::uint64_t v = 0; v < kN; ++v) EXPECT_NEAR(count[v], 10000, 600) << v;
  SplitMix64 one(3);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(one.below(1), 0u);
  // A bound near 2^64, where modulo without rejection would favour the low half most.
  SplitMix64 big(5);
  const std::uint64_t n = (UINT64_MAX / 3) * 2;
  for (int i = 0; i < 1000; ++i) EXPECT_LT(big.below(n), n);
}

}  // namespace
}  // namespace eth::tokenize_test
