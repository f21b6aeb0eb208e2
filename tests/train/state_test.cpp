// Model state and optimizer: the unit-major layout, initialization that depends only on
// (seed, unit, tensor), the learning-rate schedule, the gradient norm and one AdamW step.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numbers>

#include "model/arithmetic.h"
#include "train/model_state.h"
#include "train/optimizer.h"
#include "train_test_util.h"

namespace eth {
namespace {

TEST(ParamLayout, UnitsAreContiguousAndMatchTheArithmetic) {
  const ModelSpec m = model_preset("tiny");
  const ParamLayout all(m, 0, m.num_units() - 1);
  EXPECT_EQ(all.numel(), total_params(m));
  std::int64_t offset = 0;
  for (const UnitSlot& u : all.units()) {
    EXPECT_EQ(u.offset, offset) << "unit " << u.unit;
    EXPECT_EQ(u.numel, unit_params(m, u.unit));
    std::int64_t t_off = 0;
    for (const TensorSlot& t : u.tensors) {
      EXPECT_EQ(t.offset, t_off) << t.desc.name;
      EXPECT_EQ(t.decay, t.desc.shape.size() == 2) << t.desc.name;
      t_off += t.desc.numel();
    }
    offset += u.numel;
  }
  // A stage's layout is the same range, rebased: unit 2's tensors sit at the same relative place.
  const ParamLayout mid(m, 2, 3);
  EXPECT_EQ(mid.offset(3, kFcW) - mid.unit(2).offset, all.offset(3, kFcW) - all.unit(2).offset);
  EXPECT_EQ(mid.numel(), unit_params(m, 2) + unit_params(m, 3));
}

TEST(ModelState, InitDependsOnlyOnSeedUnitAndTensor) {
  const ModelSpec m = model_preset("tiny");
  ModelState all(m, 0, m.num_units() - 1);
  all.init(11);
  ModelState stage(m, 2, 4);  // another plan's stage: same units, same numbers
  stage.init(11);
  const std::int64_t off = all.layout().unit(2).offset;
  EXPECT_EQ(0, std::memcmp(stage.params(), all.params() + off,
                           static_cast<std::size_t>(stage.numel()) * 4));
  ModelState other(m, 2, 4);
  other.init(12);
  EXPECT_NE(
      0, std::memcmp(stage.params(), other.params(), static_cast<std::size_t>(stage.numel()) * 4));
}

TEST(ModelState, InitFollowsGpt2) {
  const ModelSpec m = model_preset("tiny");  // L = 4
  ModelState s(m, 0, m.num_units() - 1);
  s.init(3);
  auto stddev = [&](std::int64_t u, int t) {
    const TensorSlot& ts = s.layout().unit(u).tensors[static_cast<std::size_t>(t)];
    const float* p = s.params() + s.layout().offset(u, t);
    double sq = 0;
    for (std::int64_t i = 0; i < ts.desc.numel(); ++i) sq += double(p[i]) * p[i];
    return std::sqrt(sq / static_cast<double>(ts.desc.numel()));
  };
  // qkv_w has 3C*C = 12288 samples: the sample deviation is within 3% of 0.02 (3 sigma is
  // 3 / sqrt(2 * 12288) = 2.7%).
  EXPECT_NEAR(stddev(1, kQkvW), 0.02, 0.02 * 0.03);
  EXPECT_NEAR(stddev(1, kFcprojW), 0.02 / std::sqrt(2.0 * 4), 0.02 / std::sqrt(8.0) * 0.03);
  EXPECT_NEAR(stddev(0, kWte), 0.02, 0.02 * 0.03);
  const float* ln = s.params() + s.layout().offset(1, kLn1W);
  const float* bias = s.params() + s.layout().offset(1, kFcB);
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(ln[i], 1.0f);
    EXPECT_EQ(bias[i], 0.0f);
  }
}

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
}

TEST(Optimizer, SumSquaresAndClip) {
  std::vector<float> x(10000);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = (i % 2 ? 1.0f : -1.0f) * 0.5f;
  EXPECT_DOUBLE_EQ(sum_squares(x.data(), 10000), 2500.0);
  EXPECT_DOUBLE_EQ(clip_factor(0.5, 1.0), 1.0);
  EXPECT_NEAR(clip_factor(4.0, 1.0), 0.25, 1e-6);
  EXPECT_DOUBLE_EQ(clip_factor(4.0, 0.0), 1.0);
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

}  // namespace
}  // namespace eth
