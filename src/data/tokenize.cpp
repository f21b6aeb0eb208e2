// Byte tokenizer, synthetic sequences and the splitmix64 generator. See tokenize.h.
#include "data/tokenize.h"

#include <numeric>

#include "core/error.h"

namespace eth {

std::uint64_t SplitMix64::next() {
  std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::uint64_t SplitMix64::below(std::uint64_t n) {
  ETH_CHECK(n > 0, "SplitMix64::below needs n > 0");
  // Reject the top partial copy of [0, n) so every residue is equally likely.
  const std::uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  for (;;) {
    const std::uint64_t x = next();
    if (x < limit) return x % n;
  }
}

std::vector<std::uint16_t> tokenize_bytes(std::string_view text) {
  std::vector<std::uint16_t> out(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) out[i] = static_cast<unsigned char>(text[i]);
  return out;
}

SyntheticPattern parse_synthetic_pattern(std::string_view name) {
  if (name == "successor") return SyntheticPattern::Successor;
  if (name == "periodic") return SyntheticPattern::Periodic;
  throw InputError(
      "data", "--pattern", "",
      "unknown pattern \"" + std::string(name) + "\"; expected one of: successor, periodic");
}

std::vector<std::uint16_t> synthetic_tokens(const SyntheticSpec& spec) {
  auto fail = [](const std::string& field, const std::string& detail) {
    throw InputError("data", "--synthetic", field, detail);
  };
  if (spec.num_tokens < 1 || spec.num_tokens > INT32_MAX) {
    fail("num_tokens", "expected 1..2^31-1, got " + std::to_string(spec.num_tokens));
  }
  if (spec.vocab < 2 || spec.vocab > 65536) {
    fail("vocab", "expected 2..65536, got " + std::to_string(spec.vocab));
  }
  SplitMix64 rng(spec.seed);
  std::vector<std::uint16_t> out(static_cast<std::size_t>(spec.num_tokens));
  if (spec.pattern == SyntheticPattern::Successor) {
    // A random order of all tokens, closed into one cycle: succ[order[i]] = order[i + 1].
    std::vector<std::uint16_t> order(static_cast<std::size_t>(spec.vocab));
    std::iota(order.begin(), order.end(), std::uint16_t{0});
    for (std::size_t i = order.size() - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
    std::vector<std::uint16_t> succ(order.size());
    for (std::size_t i = 0; i < order.size(); ++i) succ[order[i]] = order[(i + 1) % order.size()];
    std::uint16_t t = order[0];
    for (auto& x : out) {
      x = t;
      t = succ[t];
    }
    return out;
  }
  if (spec.period < 1 || spec.period > spec.num_tokens) {
    fail("period", "expected 1..num_tokens, got " + std::to_string(spec.period));
  }
  std::vector<std::uint16_t> block(static_cast<std::size_t>(spec.period));
  for (auto& x : block)
    x = static_cast<std::uint16_t>(rng.below(static_cast<std::uint64_t>(spec.vocab)));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = block[i % block.size()];
  return out;
}

}  // namespace eth
