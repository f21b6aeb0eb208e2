// The optimizer step's pieces: warm-up + cosine learning-rate schedule, the gradient norm (one
// pass over the gradient buffer, the same bits for any thread count), global-norm clipping, and
// AdamW with decoupled weight decay on matrices only (one pass over the layout's runs).
// Not the training loop (trainer.h) and not gradient communication.
#pragma once

#include <cstdint>

#include "kernels/cpu/optimizer.h"
#include "train/model_state.h"

namespace eth {

struct LrSchedule {
  double lr_max = 3e-4;
  double lr_min = 3e-5;           // reached at total_steps
  std::int64_t warmup_steps = 0;  // linear from lr_max / warmup_steps up to lr_max
  std::int64_t total_steps = 1;
  // Learning rate of optimizer step `step` (0-based): (step + 1) / warmup * lr_max during
  // warm-up, then lr_min + (lr_max - lr_min) * (1 + cos(pi * progress)) / 2 with progress
  // going from 0 at the end of warm-up to 1 at total_steps - 1.
  double at(std::int64_t step) const;
};

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
  float grad_clip = 1.0f;  // max global L2 norm; 0 disables clipping
};

// Sum of squares of n floats (host memory) in double, in fixed 4096-element blocks from the
// start of the span, blocks added in order: the same bits for any thread count.
double sum_squares(const float* x, std::int64_t n);
// sum_squares of the whole gradient buffer (a layout without gaps), by the state's kernel set.
double grad_sum_squares(const ModelState& state);
// The same of gradient elements [offset, offset + n) (the distributed trainer sums the ranges
// it speaks for itself).
double grad_sum_squares(const ModelState& state, std::int64_t offset, std::int64_t n);
// The factor gradients are multiplied by: min(1, max_norm / (norm + 1e-6)); 1 when max_norm is 0.
double clip_factor(double grad_norm, double max_norm);

// The scalars of AdamW step `step` (0-based) at learning rate `lr`: bias corrections of
// t = step + 1, gradients scaled by `grad_scale`; `decay` is left 0 (set per run).
cpu::AdamWScalars adamw_scalars(const AdamWConfig& cfg, double lr, std::int64_t step,
                                double grad_scale);

// One AdamW update of every parameter with gradient g = grad_scale * grads, step t = step + 1
// for bias correction; weight decay (decoupled, lr * wd * p) on the tensors marked decay. Runs
// on the state's kernel set (StateBackend::adamw_update: K::adamw_update over the runs).
void adamw_update(ModelState& state, const AdamWConfig& cfg, double lr, std::int64_t step,
                  double grad_scale);

}  // namespace eth
