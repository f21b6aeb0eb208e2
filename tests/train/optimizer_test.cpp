// The optimizer step's pieces (train/optimizer.h) against their formulas written out here in
// double: the warm-up + cosine schedule, the gradient's sum of squares (whole and ranged), the
// clip factor, and AdamW over several steps (bias correction of t = step + 1, the gradient
// scale, decoupled weight decay on matrices only), one AdamW step by hand as well.
#include "train/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "train/model_state.h"
#include "train_test_util.h"

namespace eth::optimizer_test {
namespace {

TEST(LrSchedule, WarmupThenCosine) {
  LrSchedule s{1.0, 0.1, 10, 110};
  EXPECT_DOUBLE_EQ(s.at(0), 1.0 / 10);
  EXPECT_DOUBLE_EQ(s.at(9), 1.0);
  EXPECT_DOUBLE_EQ(s.at(10), 1.0);  // progress 0
  // Halfway through the 99 decay steps: cos(pi/2) = 0, so the midpoint of max and min.
  LrSchedule odd{1.0, 0.1, 10, 111};
  EXPECT_NEAR(odd.at(60), 0.55, 1e-12);
  EXPECT_NEAR(s.at(109), 0.1, 1e-12);
  EXPECT_NEAR(s.at(500), 0.1, 1e-12);  // clamped past the end
  // No decay steps left after the warm-up: lr_max from there on.
  LrSchedule flat{2.0, 0.5, 3, 4};
  EXPECT_DOUBLE_EQ(flat.at(3), 2.0);
  EXPECT_DOUBLE_EQ(flat.at(7), 2.0);
}

TEST(Optimizer, SumSquaresAndClip) {
  std::vector<float> x(10000);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = (i % 2 ? 1.0f : -1.0f) * 0.5f;
  EXPECT_DOUBLE_EQ(sum_squares(x.data(), 10000), 2500.0);
  EXPECT_DOUBLE_EQ(clip_factor(0.5, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(clip_factor(1.0, 1.0), 1.0);  // at the bound: untouched
  EXPECT_NEAR(clip_factor(4.0, 1.0), 0.25, 1e-6);
  EXPECT_DOUBLE_EQ(clip_factor(4.0, 2.0), 2.0 / (4.0 + 1e-6));
  EXPECT_DOUBLE_EQ(clip_factor(4.0, 0.0), 1.0);
}

TEST(Optimizer, GradSumSquaresIsTheGradientsSumOfSquaresWholeAndRanged) {
  const ModelSpec m = test::small_model();
  ModelState s(m, 0, m.num_units() - 1);
  const std::int64_t n = s.numel();
  for (std::int64_t i = 0; i < n; ++i) s.grads()[i] = static_cast<float>((i % 11) - 5) * 0.125f;
  // Every value and square is exact in double, so any order gives the same sum.
  auto by_hand = [&](std::int64_t from, std::int64_t count) {
    double t = 0;
    for (std::int64_t i = from; i < from + count; ++i) t += double(s.grads()[i]) * s.grads()[i];
    return t;
  };
  EXPECT_EQ(grad_sum_squares(s), by_hand(0, n));
  EXPECT_EQ(grad_sum_squares(s, n / 2, n / 3), by_hand(n / 2, n / 3));
  EXPECT_EQ(grad_sum_squares(s, n - 1, 1), by_hand(n - 1, 1));
}

TEST(Optimizer, ScalarsHoldTheBiasCorrectionsOfStepPlusOne) {
  AdamWConfig cfg;
  cfg.beta1 = 0.8f;
  cfg.beta2 = 0.9f;
  const cpu::AdamWScalars sc = adamw_scalars(cfg, 0.5, 2, 0.25);  // t = 3
  EXPECT_FLOAT_EQ(sc.bias_corr1, static_cast<float>(1 - std::pow(0.8, 3)));
  EXPECT_FLOAT_EQ(sc.bias_corr2, static_cast<float>(1 - std::pow(0.9, 3)));
  EXPECT_FLOAT_EQ(sc.lr, 0.5f);
  EXPECT_FLOAT_EQ(sc.grad_scale, 0.25f);
  EXPECT_EQ(sc.beta1, 0.8f);
  EXPECT_EQ(sc.beta2, 0.9f);
}

TEST(Optimizer, FirstAdamWStepMovesByLrTimesSign) {
  const ModelSpec m = test::small_model();
  ModelState s(m, m.layers + 1, m.layers + 1);  // the head: lnf_w, lnf_b, lm_head_w
  s.init(1);
  std::vector<float> p0(s.params(), s.params() + s.numel());
  for (std::int64_t i = 0; i < s.numel(); ++i) s.grads()[i] = (i % 3 == 0 ? -2.0f : 0.5f);
  AdamWConfig cfg;
  cfg.eps = 0;
  const double lr = 0.01;
  adamw_update(s, cfg, lr, 0, 0.5);
  // Step 1 after bias correction: mhat = g, vhat = g^2, so the Adam move is lr * sign(g);
  // decay subtracts lr * wd * p on the matrix (lm_head_w) only. m = (1 - beta1) g.
  const std::int64_t head_w = s.layout().offset(m.layers + 1, kLmHeadW);
  for (std::int64_t i = 0; i < s.numel(); ++i) {
    const double sign = i % 3 == 0 ? -1.0 : 1.0;
    const double decay =
        i >= head_w ? lr * cfg.weight_decay * p0[static_cast<std::size_t>(i)] : 0.0;
    EXPECT_NEAR(s.params()[i], p0[static_cast<std::size_t>(i)] - lr * sign - decay, 1e-6) << i;
    const double g = 0.5 * (i % 3 == 0 ? -2.0 : 0.5);
    EXPECT_NEAR(s.adam_m()[i], (1 - cfg.beta1) * g, 1e-7) << i;
  }
}

// AdamW as the paper writes it, in double: g = scale * grad; m = b1 m + (1 - b1) g;
// v = b2 v + (1 - b2) g^2; p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) + lr * wd * p
// for matrices (2-D tensors), without the last term for vectors.
TEST(Optimizer, SeveralAdamWStepsFollowTheFormulaWithDecayOnMatricesOnly) {
  const ModelSpec m = test::small_model();
  ModelState s(m, 0, m.num_units() - 1);
  s.init(3);
  const auto n = static_cast<std::size_t>(s.numel());
  std::vector<double> p(s.params(), s.params() + n), mm(n, 0.0), vv(n, 0.0);
  std::vector<bool> matrix(n, false);
  for (const UnitSlot& u : s.layout().units()) {
    for (const TensorSlot& t : u.tensors) {
      for (std::int64_t k = 0; k < t.desc.numel(); ++k) {
        matrix[static_cast<std::size_t>(t.offset + k)] = t.desc.shape.size() == 2;
      }
    }
  }
  AdamWConfig cfg;
  cfg.beta1 = 0.85f;
  cfg.beta2 = 0.95f;
  cfg.eps = 1e-6f;
  cfg.weight_decay = 0.2f;
  const double lrs[] = {1e-2, 5e-3, 2e-3};
  const double scales[] = {0.5, 1.0, 0.25};
  for (int step = 0; step < 3; ++step) {
    for (std::size_t i = 0; i < n; ++i) {
      // Gradients of either sign and unlike size, not small against eps.
      s.grads()[i] = static_cast<float>(((i * 7 + static_cast<std::size_t>(step) * 3) % 9) - 4.5);
    }
    adamw_update(s, cfg, lrs[step], step, scales[step]);
    const double t = step + 1;
    const double b1 = cfg.beta1, b2 = cfg.beta2, lr = lrs[step];
    for (std::size_t i = 0; i < n; ++i) {
      const double g = scales[step] * s.grads()[i];
      mm[i] = b1 * mm[i] + (1 - b1) * g;
      vv[i] = b2 * vv[i] + (1 - b2) * g * g;
      const double mhat = mm[i] / (1 - std::pow(b1, t)), vhat = vv[i] / (1 - std::pow(b2, t));
      const double decay = matrix[i] ? lr * cfg.weight_decay * p[i] : 0.0;
      p[i] -= lr * mhat / (std::sqrt(vhat) + cfg.eps) + decay;
    }
  }
  // fp32 against double: a few float epsilons of the values (at most about 1) per step.
  double worst_p = 0, worst_m = 0, worst_v = 0;
  for (std::size_t i = 0; i < n; ++i) {
    worst_p = std::max(worst_p, std::abs(s.params()[i] - p[i]));
    worst_m = std::max(worst_m, std::abs(s.adam_m()[i] - mm[i]) / std::max(1.0, std::abs(mm[i])));
    worst_v = std::max(worst_v, std::abs(s.adam_v()[i] - vv[i]) / std::max(1.0, std::abs(vv[i])));
  }
  EXPECT_LT(worst_p, 2e-6);
  EXPECT_LT(worst_m, 1e-6);
  EXPECT_LT(worst_v, 1e-6);
}

}  // namespace
}  // namespace eth::optimizer_test
