// Packing: for every mode, the collectives a rank joins cover each of its gradient elements
// exactly once (block, tensor) or hold the whole model with zeros where the rank holds nothing
// (device); every holder of a collective packs the same number of elements from the same
// tensors. And a sum checked by hand on threads.
#include "runtime/grad_sync.h"

#include <gtest/gtest.h>

#include "runtime/placement.h"
#include "runtime_test_util.h"

namespace eth {
namespace {

// How many times each element of `layout` is fed into the collectives `device` joins (padding
// runs feed nothing), checking that the device packs every such collective's full size.
std::vector<int> times_packed(const Plan& plan, const std::vector<GradBlock>& blocks,
                              std::int64_t device, const ParamLayout& layout) {
  std::vector<int> seen(static_cast<std::size_t>(layout.numel()), 0);
  for (const GradBlock& b : blocks) {
    if (!std::binary_search(b.holders.begin(), b.holders.end(), device)) continue;
    std::int64_t packed = 0;
    for (const GradPiece& piece : b.pieces) {
      for (const PackRun& r : piece_runs(plan.model, layout, piece)) {
        packed += r.count;
        for (std::int64_t i = 0; r.offset >= 0 && i < r.count; ++i) {
          ++seen[static_cast<std::size_t>(r.offset + i)];
        }
      }
    }
    EXPECT_EQ(packed, b.elements);  // every holder packs the block's full size
  }
  return seen;
}

using test::expect_no_errors;

Plan dp_plan() {
  return test::make_plan(test::small3(), 8,
                         {{2, 4, {{0, 1, 2}, {2, 4, 1}}}, {3, 5, {{0, 2, 1}, {3, 4, 3}}}, {1, 1, {{0, 4}}}});
}

TEST(GradSync, PiecesCoverEachHeldElementOnce) {
  const Plan plan = dp_plan();
  for (AggregationMode mode : {AggregationMode::Block, AggregationMode::Tensor, AggregationMode::Device}) {
    const auto blocks = aggregation_collectives(plan, mode);
    for (const RankPlace& p : place_ranks(plan)) {
      const StagePlan& st = plan.pipelines[static_cast<std::size_t>(p.pipeline)]
                                .stages[static_cast<std::size_t>(p.stage)];
      const ParamLayout layout(plan.model, st.first_unit, st.last_unit);
      const std::vector<int> seen = times_packed(plan, blocks, p.device, layout);
      for (std::size_t i = 0; i < seen.size(); ++i) {
        ASSERT_EQ(seen[i], 1) << aggregation_mode_name(mode) << " device " << p.device
                              << " element " << i;
      }
    }
  }
}

TEST(GradSync, HoldersPackTheSameTensorsInTheSameOrder) {
  // Two layouts holding a piece at different offsets must pack the same tensors in the same
  // order: compare the packed names.
  const Plan plan = dp_plan();
  const ModelSpec& m = plan.model;
  const ParamLayout a(m, 0, 4), b(m, 2, 3);
  for (AggregationMode mode : {AggregationMode::Block, AggregationMode::Tensor}) {
    for (const GradBlock& blk : aggregation_collectives(plan, mode)) {
      for (const GradPiece& piece : blk.pieces) {
        if (piece.first_unit < 2 || piece.last_unit > 3) continue;
        auto ra = piece_runs(m, a, piece), rb = piece_runs(m, b, piece);
        ASSERT_EQ(ra.size(), rb.size());
        for (std::size_t i = 0; i < ra.size(); ++i) {
          EXPECT_EQ(ra[i].count, rb[i].count);
          // Same distance from the piece's first unit's start in both layouts.
          EXPECT_EQ(ra[i].offset - a.unit(piece.first_unit).offset,
                    rb[i].offset - b.unit(piece.first_unit).offset);
        }
      }
    }
  }
}

TEST(GradSync, SumsEveryHolderExactlyOnce) {
  // Each rank fills its gradient with (rank + 1) * (element index + 1); after aggregation a
  // unit's gradient must be that pattern times the sum of (rank + 1) over the unit's holders.
  const Plan plan = dp_plan();
  const auto places = place_ranks(plan);
  for (AggregationMode mode : {AggregationMode::Block, AggregationMode::Tensor, AggregationMode::Device}) {
    LocalWorld world(static_cast<int>(plan.num_devices()));
    auto errors = run_on_threads(world, [&](Communicator comm) {
      const RankPlace& p = places[static_cast<std::size_t>(comm.rank())];
      const StagePlan& st = plan.pipelines[static_cast<std::size_t>(p.pipeline)]
                                .stages[static_cast<std::size_t>(p.stage)];
      const ParamLayout layout(plan.model, st.first_unit, st.last_unit);
      std::vector<float> g(static_cast<std::size_t>(layout.numel()));
      for (const UnitSlot& u : layout.units()) {
        for (std::int64_t i = 0; i < u.numel; ++i) {
          g[static_cast<std::size_t>(u.offset + i)] = static_cast<float>((comm.rank() + 1) * (i % 7 + 1));
        }
      }
      GradSync sync(plan, mode, comm, layout);
      // As a backward would: units from the last down, posting what is ready after each.
      for (std::int64_t u = layout.last_unit(); u >= layout.first_unit(); --u) {
        sync.start_ready(g.data(), u);
      }
      sync.start(g.data());
      sync.finish(g.data());
      for (const UnitSlot& u : layout.units()) {
        float holders = 0;
        for (std::size_t r = 0; r < places.size(); ++r) {
          const StagePlan& o = plan.pipelines[static_cast<std::size_t>(places[r].pipeline)]
                                   .stages[static_cast<std::size_t>(places[r].stage)];
          if (u.unit >= o.first_unit && u.unit <= o.last_unit) holders += static_cast<float>(r + 1);
        }
        for (std::int64_t i = 0; i < u.numel; ++i) {
          ASSERT_EQ(g[static_cast<std::size_t>(u.offset + i)], holders * static_cast<float>(i % 7 + 1))
              << aggregation_mode_name(mode) << " rank " << comm.rank() << " unit " << u.unit;
        }
      }
    });
    expect_no_errors(errors);
  }
}

// Tensor parallelism: 4 heads so tp 2 and 4 fit; pipeline 0 holds units 0-1 at tp 2 x dp 2 and
// 2-4 at tp 1, pipeline 1 units 0-2 at tp 4 and 3-4 at tp 2, pipeline 2 everything at tp 1.
Plan tp_plan() {
  const ModelSpec m{"tp", 3, 16, 4, 8, 31, 24};
  return test::make_plan(m, 8,
                         {{2, 4, {{0, 1, 2, {}, 2}, {2, 4, 1, {}, 1}}},
                          {1, 3, {{0, 2, 1, {}, 4}, {3, 4, 1, {}, 2}}},
                          {1, 1, {{0, 4}}}});
}

const StagePlan& stage_of(const Plan& plan, const RankPlace& p) {
  return plan.pipelines[static_cast<std::size_t>(p.pipeline)].stages[static_cast<std::size_t>(
      p.stage)];
}

ParamLayout layout_of(const Plan& plan, const RankPlace& p) {
  const StagePlan& st = stage_of(plan, p);
  return ParamLayout(plan.model, st.first_unit, st.last_unit, st.tp, p.tp_rank);
}

constexpr AggregationMode kModes[] = {AggregationMode::Block, AggregationMode::Tensor,
                                      AggregationMode::Device};

// Every element a rank holds is fed into its collectives exactly once, except replicated ones
// on tp ranks other than 0 (their group's representative feeds them; finish() broadcasts).
TEST(GradSync, TpPiecesCoverEachHeldElementOnce) {
  const Plan plan = tp_plan();
  for (AggregationMode mode : kModes) {
    const auto blocks = aggregation_collectives(plan, mode);
    for (const RankPlace& p : place_ranks(plan)) {
      const ParamLayout layout = layout_of(plan, p);
      const std::vector<int> seen = times_packed(plan, blocks, p.device, layout);
      for (const UnitSlot& u : layout.units()) {
        for (const TensorSlot& t : u.tensors) {
          const int want = t.desc.split == TpSplit::Replicated && p.tp_rank > 0 ? 0 : 1;
          for (std::int64_t i = 0; i < t.desc.numel(); ++i) {
            ASSERT_EQ(seen[static_cast<std::size_t>(u.offset + t.offset + i)], want)
                << aggregation_mode_name(mode) << " device " << p.device << " " << t.desc.name;
          }
        }
      }
    }
  }
}

// Each rank's gradient is (rank + 1) * f(element of the whole tensor); after aggregation every
// element must be f times the sum of (rank + 1) over its holders, worked out here from the plan:
// per pipeline and dp replica, the tp rank whose rows hold it (replicated: tp rank 0).
TEST(GradSync, TpSumsEveryHolderOfEveryRowOnce) {
  const Plan plan = tp_plan();
  const auto places = place_ranks(plan);
  auto f = [](std::int64_t unit, std::size_t tensor, std::int64_t whole_index) {
    const std::int64_t t = static_cast<std::int64_t>(tensor);
    return static_cast<float>((unit * 5 + t * 3 + whole_index) % 7 + 1);
  };
  for (AggregationMode mode : kModes) {
    LocalWorld world(static_cast<int>(plan.num_devices()));
    auto errors = run_on_threads(world, [&](Communicator comm) {
      const RankPlace& me = places[static_cast<std::size_t>(comm.rank())];
      const ParamLayout layout = layout_of(plan, me);
      std::vector<float> g(static_cast<std::size_t>(layout.numel()));
      for (const UnitSlot& u : layout.units()) {
        for (std::size_t i = 0; i < u.tensors.size(); ++i) {
          const TensorSlot& t = u.tensors[i];
          for (std::int64_t k = 0; k < t.desc.numel(); ++k) {
            g[static_cast<std::size_t>(u.offset + t.offset + k)] =
                static_cast<float>(comm.rank() + 1) * f(u.unit, i, t.rows.begin * t.row_size() + k);
          }
        }
      }
      const StagePlan& st = stage_of(plan, me);
      const int color = st.tp > 1 ? static_cast<int>(stage_device(st, me.dp_rank, 0)) : -1;
      const Communicator tp = comm.split(color, static_cast<int>(me.tp_rank));
      GradSync sync(plan, mode, comm, layout, tp);
      for (std::int64_t u = layout.last_unit(); u >= layout.first_unit(); --u) {
        sync.start_ready(g.data(), u);
      }
      sync.start(g.data());
      sync.finish(g.data());
      for (const UnitSlot& u : layout.units()) {
        for (std::size_t i = 0; i < u.tensors.size(); ++i) {
          const TensorSlot& t = u.tensors[i];
          for (std::int64_t row = t.rows.begin; row < t.rows.end; ++row) {
            float holders = 0;
            for (std::size_t r = 0; r < places.size(); ++r) {
              const StagePlan& o = stage_of(plan, places[r]);
              if (u.unit < o.first_unit || u.unit > o.last_unit) continue;
              const bool holds = t.desc.split == TpSplit::Replicated
                                     ? places[r].tp_rank == 0
                                     : tp_rows(t.full_rows, o.tp, places[r].tp_rank).begin <= row &&
                                           row < tp_rows(t.full_rows, o.tp, places[r].tp_rank).end;
              if (holds) holders += static_cast<float>(r + 1);
            }
            for (std::int64_t k = 0; k < t.row_size(); ++k) {
              const std::int64_t local = (row - t.rows.begin) * t.row_size() + k;
              ASSERT_EQ(g[static_cast<std::size_t>(u.offset + t.offset + local)],
                        holders * f(u.unit, i, row * t.row_size() + k))
                  << aggregation_mode_name(mode) << " rank " << comm.rank() << " " << t.desc.name;
            }
          }
        }
      }
    });
    expect_no_errors(errors);
  }
}

}  // namespace
}  // namespace eth
