// LR schedule, deterministic gradient norm, AdamW. See optimizer.h.
#include "train/optimizer.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"
#include "kernels/cpu/optimizer.h"
#include "train/state_backend.h"

namespace eth {

double LrSchedule::at(std::int64_t step) const {
  ETH_CHECK(step >= 0, "lr schedule: negative step");
  if (step < warmup_steps) {
    return lr_max * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  }
  const std::int64_t decay_steps = total_steps - 1 - warmup_steps;
  if (decay_steps <= 0) return lr_max;
  const double progress =
      std::min(1.0, static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps));
  return lr_min + (lr_max - lr_min) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

double sum_squares(const float* x, std::int64_t n) { return cpu::sum_squares(x, n); }

double grad_sum_squares(const ModelState& state) {
  const ParamLayout& l = state.layout();
  ETH_CHECK(l.grad_numel() == l.numel(), "grad_sum_squares: a gradient buffer with gaps");
  return grad_sum_squares(state, 0, l.grad_numel());
}

double grad_sum_squares(const ModelState& state, std::int64_t offset, std::int64_t n) {
  ETH_CHECK(offset >= 0 && n >= 0 && offset + n <= state.layout().grad_numel(),
            "grad_sum_squares: a range outside the gradient buffer");
  return state.backend().sum_squares(state.grads() + offset, n);
}

double clip_factor(double grad_norm, double max_norm) {
  if (max_norm <= 0 || grad_norm <= max_norm) return 1.0;
  return max_norm / (grad_norm + 1e-6);
}

cpu::AdamWScalars adamw_scalars(const AdamWConfig& cfg, double lr, std::int64_t step,
                                double grad_scale) {
  const double t = static_cast<double>(step + 1);
  const float bc1 = static_cast<float>(1.0 - std::pow(static_cast<double>(cfg.beta1), t));
  const float bc2 = static_cast<float>(1.0 - std::pow(static_cast<double>(cfg.beta2), t));
  cpu::AdamWScalars sc;
  sc.lr = static_cast<float>(lr);
  sc.beta1 = cfg.beta1;
  sc.beta2 = cfg.beta2;
  sc.eps = cfg.eps;
  sc.bias_corr1 = bc1;
  sc.bias_corr2 = bc2;
  sc.grad_scale = static_cast<float>(grad_scale);
  return sc;
}

void adamw_update(ModelState& state, const AdamWConfig& cfg, double lr, std::int64_t step,
                  double grad_scale) {
  ETH_CHECK(!state.sharded(), "adamw_update: a sharded state steps through ShardedOptimizer");
  const cpu::AdamWScalars sc = adamw_scalars(cfg, lr, step, grad_scale);
  // One pass over the buffers, in the layout's runs (maximal stretches with one decay flag,
  // contiguous in both the parameter and the gradient buffer), by the state's kernel set: in
  // bf16 the masters as in fp32, bit for bit, and their compute copy in the same pass.
  state.backend().adamw_update(state.params(), state.params_bf16(), state.adam_m(),
                               state.adam_v(), state.grads(), state.layout().runs(), sc,
                               cfg.weight_decay);
}

}  // namespace eth
