// The mean next-token loss of a model state on a token file, for `eth eval`: the windows of the
// file in order (window w is tokens [w*T, w*T + T + 1): T inputs and the T targets shifted by
// one, the sampler's windows without shuffling), in batches of B through the single-process
// forward path (PrecisionStage over all units, no dropout). Not training: no gradients, no
// optimizer. Here rather than in train/ only because this change owns src/hf/.
#pragma once

#include <cstdint>

#include "core/precision.h"
#include "data/token_file.h"
#include "train/model_state.h"

namespace eth::hf {

struct EvalConfig {
  std::int64_t seq_len = 0;      // T; 0 means the model's seq_len
  std::int64_t batch = 8;        // windows per forward
  std::int64_t max_batches = 0;  // 0: every window of the file
};

struct EvalResult {
  double loss = 0;          // mean over all evaluated tokens (nats)
  double perplexity = 0;    // exp(loss)
  std::int64_t seq_len = 0;
  std::int64_t windows = 0;  // samples evaluated
  std::int64_t batches = 0;
  std::int64_t tokens = 0;   // predictions averaged: windows * T
};

// Throws InputError("eval", ...) for a sequence length outside 1..the model's, a batch < 1, a
// file with fewer than T + 1 tokens or a token outside the model's vocabulary. `state` holds
// all units at tp 1, in the precision the evaluation runs.
EvalResult evaluate(const ModelState& state, const TokenFile& data, const EvalConfig& cfg);

}  // namespace eth::hf
