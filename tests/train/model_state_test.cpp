// Model state: the unit-major layout, tp shards' rows, and initialization that depends only on
// (seed, unit, tensor). The optimizer's tests are in optimizer_test.cpp, the checkpoint's in
// checkpoint_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "model/arithmetic.h"
#include "train/model_state.h"
#include "train_test_util.h"

namespace eth {
namespace {

TEST(ParamLayout, UnitsAreContiguousAndMatchTheArithmetic) {
  const ModelSpec m = model_preset("tiny");
  const ParamLayout all(m, 0, m.num_units() - 1);
  EXPECT_EQ(all.numel(), total_params(m));
  EXPECT_EQ(all.grad_numel(), all.numel());
  std::int64_t offset = 0;
  for (const UnitSlot& u : all.units()) {
    EXPECT_EQ(u.numel, unit_params(m, u.unit));
    for (const TensorSlot& t : u.tensors) {
      EXPECT_EQ(t.offset, offset) << t.desc.name;
      ASSERT_EQ(t.grad.size(), 1u) << t.desc.name;  // gradients at the parameters' offsets
      EXPECT_EQ(t.grad.front().offset, offset) << t.desc.name;
      EXPECT_EQ(t.grad.front().rows, t.rows) << t.desc.name;
      EXPECT_EQ(t.decay, t.desc.shape.size() == 2) << t.desc.name;
      offset += t.desc.numel();
    }
  }
  // A stage's layout is the same range, rebased: unit 2's tensors sit at the same relative place.
  const ParamLayout mid(m, 2, 3);
  EXPECT_EQ(mid.offset(3, kFcW) - mid.offset(2, kLn1W), all.offset(3, kFcW) - all.offset(2, kLn1W));
  EXPECT_EQ(mid.numel(), unit_params(m, 2) + unit_params(m, 3));
  // The optimizer's runs cover every element once, split only where the decay flag changes.
  std::int64_t covered = 0;
  for (std::size_t i = 0; i < all.runs().size(); ++i) {
    const StateRun& r = all.runs()[i];
    EXPECT_EQ(r.param_offset, covered);
    EXPECT_EQ(r.grad_offset, covered);
    if (i > 0) {
      EXPECT_NE(r.decay, all.runs()[i - 1].decay);
    }
    covered += r.count;
  }
  EXPECT_EQ(covered, all.numel());
}

TEST(ModelState, InitDependsOnlyOnSeedUnitAndTensor) {
  const ModelSpec m = model_preset("tiny");
  ModelState all(m, 0, m.num_units() - 1);
  all.init(11);
  ModelState stage(m, 2, 4);  // another plan's stage: same units, same numbers
  stage.init(11);
  const std::int64_t off = all.layout().offset(2, kLn1W);
  EXPECT_EQ(0, std::memcmp(stage.params(), all.params() + off,
                           static_cast<std::size_t>(stage.numel()) * 4));
  ModelState other(m, 2, 4);
  other.init(12);
  EXPECT_NE(
      0, std::memcmp(stage.params(), other.params(), static_cast<std::size_t>(stage.numel()) * 4));
}

// An uneven vocabulary (31 rows) and 4 heads: tp 2 and 4 shard every block tensor evenly and
// the embedding / LM head in floor-division row ranges.
ModelSpec tp_model() { return ModelSpec{"tp", 2, 16, 4, 8, 31, 24}; }

TEST(ParamLayout, TpRanksHoldTheirRowsAndUnitParamsCountsTheLargest) {
  const ModelSpec m = tp_model();
  const ParamLayout whole(m, 0, m.num_units() - 1);
  for (std::int64_t tp : {1, 2, 4}) {
    for (std::int64_t u = 0; u < m.num_units(); ++u) {
      std::int64_t largest = 0;
      std::vector<std::int64_t> rows_seen(whole.unit(u).tensors.size(), 0);
      for (std::int64_t r = 0; r < tp; ++r) {
        const ParamLayout shard(m, u, u, tp, r);
        const UnitSlot& s = shard.unit(u);
        largest = std::max(largest, s.numel);
        for (std::size_t i = 0; i < s.tensors.size(); ++i) {
          const TensorSlot& t = s.tensors[i];
          const TensorSlot& w = whole.unit(u).tensors[i];
          EXPECT_EQ(t.full_shape(), w.desc.shape) << t.desc.name;
          if (t.desc.split == TpSplit::Replicated) {
            EXPECT_EQ(t.desc.shape, w.desc.shape) << t.desc.name;
            continue;
          }
          EXPECT_EQ(t.rows.begin, rows_seen[i]) << t.desc.name << " tp " << tp;  // contiguous
          rows_seen[i] = t.rows.end;
        }
      }
      for (std::size_t i = 0; i < rows_seen.size(); ++i) {
        const TensorSlot& w = whole.unit(u).tensors[i];
        if (w.desc.split == TpSplit::Sharded) {
          EXPECT_EQ(rows_seen[i], w.full_rows) << w.desc.name;
        }
      }
      // What the memory model charges a device is what its largest rank allocates.
      EXPECT_EQ(largest, unit_params(m, u, tp)) << "unit " << u << " tp " << tp;
    }
  }
}

TEST(ModelState, TpShardsInitToTheirRowsOfTheWholeModel) {
  const ModelSpec m = tp_model();
  ModelState whole(m, 0, m.num_units() - 1);
  whole.init(5);
  for (std::int64_t tp : {2, 4}) {
    for (std::int64_t r = 0; r < tp; ++r) {
      ModelState shard(m, 0, m.num_units() - 1, tp, r);
      shard.init(5);
      for (const UnitSlot& u : shard.layout().units()) {
        for (std::size_t i = 0; i < u.tensors.size(); ++i) {
          const TensorSlot& t = u.tensors[i];
          const float* want = whole.params() + whole.layout().unit(u.unit).tensors[i].offset +
                              t.rows.begin * t.row_size();
          EXPECT_EQ(0, std::memcmp(shard.params() + t.offset, want,
                                   static_cast<std::size_t>(t.desc.numel()) * 4))
              << t.desc.name << " tp " << tp << " rank " << r;
        }
      }
    }
  }
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

}  // namespace
}  // namespace eth
