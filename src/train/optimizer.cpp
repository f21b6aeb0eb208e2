// LR schedule, deterministic gradient norm, AdamW. See optimizer.h.
#include "train/optimizer.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "core/error.h"

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

double sum_squares(const float* x, std::int64_t n) {
  constexpr std::int64_t kBlock = 4096;
  const std::int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(static_cast<std::size_t>(blocks));
#pragma omp parallel for schedule(static)
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t lo = b * kBlock, hi = std::min(n, lo + kBlock);
    double acc = 0;
    for (std::int64_t i = lo; i < hi; ++i) acc += static_cast<double>(x[i]) * x[i];
    partial[static_cast<std::size_t>(b)] = acc;
  }
  double total = 0;
  for (double p : partial) total += p;
  return total;
}

double grad_sum_squares(const ModelState& state) {
  double total = 0;
  for (const UnitSlot& u : state.layout().units()) {
    total += sum_squares(state.grads() + u.offset, u.numel);
  }
  return total;
}

double clip_factor(double grad_norm, double max_norm) {
  if (max_norm <= 0 || grad_norm <= max_norm) return 1.0;
  return max_norm / (grad_norm + 1e-6);
}

void adamw_update(ModelState& state, const AdamWConfig& cfg, double lr, std::int64_t step,
                  double grad_scale) {
  const double t = static_cast<double>(step + 1);
  const float bc1 = static_cast<float>(1.0 - std::pow(static_cast<double>(cfg.beta1), t));
  const float bc2 = static_cast<float>(1.0 - std::pow(static_cast<double>(cfg.beta2), t));
  const float b1 = cfg.beta1, b2 = cfg.beta2, eps = cfg.eps;
  const float flr = static_cast<float>(lr), gs = static_cast<float>(grad_scale);
  for (const UnitSlot& u : state.layout().units()) {
    for (const TensorSlot& ts : u.tensors) {
      const std::int64_t off = u.offset + ts.offset, n = ts.desc.numel();
      float* p = state.params() + off;
      const float* g = state.grads() + off;
      float* m = state.adam_m() + off;
      float* v = state.adam_v() + off;
      const float decay = ts.decay ? flr * cfg.weight_decay : 0.0f;
#pragma omp parallel for simd schedule(static)
      for (std::int64_t i = 0; i < n; ++i) {
        const float gi = g[i] * gs;
        m[i] = b1 * m[i] + (1.0f - b1) * gi;
        v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
        const float mhat = m[i] / bc1, vhat = v[i] / bc2;
        p[i] -= flr * mhat / (std::sqrt(vhat) + eps) + decay * p[i];
      }
    }
  }
}

}  // namespace eth
