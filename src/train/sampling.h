// Text generation from a checkpoint (eth sample): the next-token distribution of the model at a
// context, and the choice of a token from it (greedy, or temperature and top-k sampling with a
// seeded generator). Each token recomputes the whole window (the last seq_len tokens of the
// context) through the training forward path, blocks included: no key/value cache, so a token
// costs one forward of seq_len positions. Enough for the small models ETH trains on one machine
// and for seeing what a model learned; not a serving path. fp32 only.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "data/tokenize.h"
#include "model/model_spec.h"
#include "train/model_state.h"
#include "train/precision_stage.h"

namespace eth {

struct GenerateConfig {
  std::int64_t tokens = 64;   // new tokens
  bool greedy = false;        // the most likely token (ties: the lowest id); ignores the rest
  double temperature = 1.0;   // > 0: logits / temperature before the softmax
  std::int64_t top_k = 0;     // > 0: sample among the k most likely only (1: greedy)
  std::uint64_t seed = 1;     // the sampling generator's
};

// The token `cfg` picks from `logits` (one per vocabulary id), drawing from `rng` unless greedy
// or top_k 1. InputError("sample", ...) for a temperature <= 0 (when sampling).
std::int32_t pick_token(std::span<const float> logits, const GenerateConfig& cfg,
                        SplitMix64& rng);

class TextGenerator {
 public:
  // Loads every unit of the checkpoint at `path` (its model from its metadata); InputError
  // naming the file as load_checkpoint does.
  explicit TextGenerator(const std::filesystem::path& path);
  ~TextGenerator();
  const ModelSpec& model() const { return model_; }

  // Logits of the token after `context` (its last seq_len tokens count; at least one token,
  // each inside the vocabulary: InputError otherwise).
  std::vector<float> next_logits(std::span<const std::int32_t> context);
  // `prompt` followed by cfg.tokens generated ones (the prompt included in the result).
  std::vector<std::int32_t> generate(std::span<const std::int32_t> prompt,
                                     const GenerateConfig& cfg);

 private:
  ModelSpec model_;
  ModelState body_;  // units 0..layers: the embedding and the blocks
  ModelState head_;  // the final layer norm and LM head, applied here to one position only
  std::unique_ptr<PrecisionStage> stage_;
  std::vector<std::int32_t> window_;
  std::vector<float> hidden_;  // (T, C): the last block's output
};

}  // namespace eth
