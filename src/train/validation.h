// Held-out loss: the mean next-token loss of a model state on a token file, forward only (no
// dropout, no gradients, no optimizer), for `eth eval` (hf/evaluate.h) and for a run's
// validation set (eth train --val-data). The windows of the file in order (window w is tokens
// [w*T, w*T + T + 1): T inputs and the T targets shifted by one, the sampler's windows without
// shuffling), in batches of B through the single-process forward path (PrecisionStage over all
// units). A distributed run gathers its weights into one whole state first
// (runtime/dist_trainer.h), so every plan reports the number one process computes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "data/token_file.h"
#include "train/model_state.h"

namespace eth {

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

// Throws InputError(`tool`, ...) for a sequence length outside 1..the model's, a batch < 1, a
// file with fewer than T + 1 tokens or a token outside the model's vocabulary.
void check_eval_input(const ModelSpec& model, const TokenFile& data, const EvalConfig& cfg,
                      const std::string& tool = "eval");

// check_eval_input, then the loss. `state` holds all units at tp 1, in the precision the
// evaluation runs.
EvalResult evaluate_loss(const ModelState& state, const TokenFile& data, const EvalConfig& cfg);

// A run's validation set (--val-data F --val-every K --val-batches N): `eval` batches of the
// file at the run's sequence length. Opened and checked at construction, before any step.
struct ValidationConfig {
  std::filesystem::path data;  // empty: no validation
  std::int64_t every = 0;      // steps between validations (and at the end); 0: at the end only
  EvalConfig eval;             // seq_len: the run's T
};

class ValidationSet {
 public:
  // InputError("train", ...) naming the file when it cannot serve `model` at cfg.eval.seq_len.
  ValidationSet(const ValidationConfig& cfg, const ModelSpec& model);
  const ValidationConfig& config() const { return cfg_; }
  // The mean token loss at `whole`'s weights (every unit, tp 1, unit-major), on the host: a
  // state in device memory is downloaded first.
  double loss(const ModelState& whole) const;

 private:
  ValidationConfig cfg_;
  TokenFile data_;
};

}  // namespace eth
