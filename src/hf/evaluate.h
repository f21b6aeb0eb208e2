// `eth eval`'s evaluation: the held-out loss of train/validation.h, which a training run's
// validation set (--val-data) computes too, so `eth eval` of a checkpoint and the run's logged
// validation loss at the same weights are the same number. Kept under hf/ as the name
// `eth eval` and its tests use.
#pragma once

#include "train/validation.h"

namespace eth::hf {

using EvalConfig = eth::EvalConfig;
using EvalResult = eth::EvalResult;

inline EvalResult evaluate(const ModelState& state, const TokenFile& data,
                           const EvalConfig& cfg) {
  return evaluate_loss(state, data, cfg);
}

}  // namespace eth::hf
