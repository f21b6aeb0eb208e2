// Token sources: the byte-level tokenizer (token = byte value, vocabulary 256) and synthetic,
// learnable sequences for tests and demos. Not a BPE tokenizer: files tokenized elsewhere (for
// example llm.c's GPT-2 shards) are read as they are.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace eth {

inline constexpr std::int64_t kByteVocab = 256;

// One token per byte of `text`.
std::vector<std::uint16_t> tokenize_bytes(std::string_view text);

enum class SyntheticPattern : std::uint8_t {
  // next = succ[current] for a fixed random cyclic permutation succ of [0, vocab): every token
  // is a deterministic function of the one before it, while every token is equally frequent, so
  // a model that ignores its input cannot beat ln(vocab) but one that reads it can reach 0.
  Successor,
  // A fixed random block of `period` tokens repeated: predictable only by looking back `period`
  // positions (an induction task for attention).
  Periodic,
};

struct SyntheticSpec {
  SyntheticPattern pattern = SyntheticPattern::Successor;
  std::int64_t num_tokens = 0;
  std::int64_t vocab = 256;  // tokens are in [0, vocab), vocab <= 65536
  std::int64_t period = 16;  // Periodic only
  std::uint64_t seed = 1;
};

// Deterministic in the spec (same spec, same tokens on every machine). Throws InputError
// ("data", "--synthetic", ...) on out-of-range fields.
std::vector<std::uint16_t> synthetic_tokens(const SyntheticSpec& spec);
SyntheticPattern parse_synthetic_pattern(std::string_view name);  // "successor" | "periodic"

// A small, portable, seedable generator (splitmix64) for data shuffles and synthetic data;
// model randomness uses kernels/rng.h instead.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next();
  // Uniform in [0, n), n > 0, without modulo bias (rejection).
  std::uint64_t below(std::uint64_t n);

 private:
  std::uint64_t state_;
};

}  // namespace eth
