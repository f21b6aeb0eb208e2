// Plans and helpers shared by the gradient layout and aggregation tests (grad_layout_test.cpp,
// grad_sync_test.cpp): a dp plan, a tp plan and one whose lcm(tp) exceeds a stage's tp, and the
// canonical id of every gradient element a layout holds. Test-only.
#pragma once

#include <cstdint>

#include "runtime/grad_layout.h"
#include "runtime/placement.h"
#include "runtime_test_util.h"

namespace eth::test {

inline constexpr AggregationMode kModes[] = {AggregationMode::Block, AggregationMode::Tensor,
                                             AggregationMode::Device};

inline const StagePlan& stage_of(const Plan& plan, const RankPlace& p) {
  return plan.pipelines[static_cast<std::size_t>(p.pipeline)].stages[static_cast<std::size_t>(
      p.stage)];
}

inline ParamLayout unit_major(const Plan& plan, const RankPlace& p) {
  const StagePlan& st = stage_of(plan, p);
  return ParamLayout(plan.model, st.first_unit, st.last_unit, st.tp, p.tp_rank);
}

inline Plan dp_plan() {
  return make_plan(small3(), 8,
                   {{2, 4, {{0, 1, 2}, {2, 4, 1}}},
                    {3, 5, {{0, 2, 1}, {3, 4, 3}}},
                    {1, 1, {{0, 4}}}});
}

// Tensor parallelism: 4 heads so tp 2 and 4 fit; pipeline 0 holds units 0-1 at tp 2 x dp 2 and
// 2-4 at tp 1, pipeline 1 units 0-2 at tp 4 and 3-4 at tp 2, pipeline 2 everything at tp 1.
inline Plan tp_plan() {
  const ModelSpec m{"tp", 3, 16, 4, 8, 31, 24};
  return make_plan(m, 8,
                   {{2, 4, {{0, 1, 2, {}, 2}, {2, 4, 1, {}, 1}}},
                    {1, 3, {{0, 2, 1, {}, 4}, {3, 4, 1, {}, 2}}},
                    {1, 1, {{0, 4}}}});
}

// lcm(2, 3) = 6 chunks on units 0-1: a tp 2 rank holds 3 chunks, two of them (0 and 1) in one
// block with the tp 3 rank 0, the third in another; unit 2 is cut in 3 for a tp 1 stage.
inline Plan lcm6_plan() {
  const ModelSpec m{"lcm6", 2, 24, 6, 8, 29, 36};
  return make_plan(m, 8,
                   {{1, 2, {{0, 1, 1, {}, 2}, {2, 3, 1, {}, 1}}},
                    {1, 2, {{0, 2, 1, {}, 3}, {3, 3, 1, {}, 2}}}});
}

// Calls f(grad offset, canonical id) for every gradient element `layout` holds, the id being
// the element's index in the whole model laid out unit-major (ParamLayout of all units).
template <typename F>
inline void for_each_grad(const ParamLayout& full, const ParamLayout& layout, F f) {
  for (const UnitSlot& u : layout.units()) {
    for (std::size_t i = 0; i < u.tensors.size(); ++i) {
      const TensorSlot& t = u.tensors[i];
      const std::int64_t row = t.row_size(), base = full.unit(u.unit).tensors[i].offset;
      for (const GradChunk& c : t.grad) {
        for (std::int64_t k = 0; k < c.rows.size() * row; ++k) {
          f(c.offset + k, base + c.rows.begin * row + k);
        }
      }
    }
  }
}

}  // namespace eth::test
