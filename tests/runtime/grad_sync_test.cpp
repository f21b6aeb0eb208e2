// Gradient layout and aggregation. The layout property itself, checked independently of how
// the layout is built: for every collective of every mode, on every holder, the collective is
// one contiguous range of the holder's gradient buffer, and the ranges of all holders name the
// same elements of the whole model (canonical element ids read off each layout's chunk table)
// in the same order, each element of the collective once. Then sums checked by hand on threads
// for dp and tp plans (lcm(tp) > tp included), in place (nothing copied) with the placed layout
// and packed with the unit-major one.
#include "runtime/grad_sync.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "runtime/placement.h"
#include "runtime_test_util.h"

namespace eth {
namespace {

using test::expect_no_errors;

constexpr AggregationMode kModes[] = {AggregationMode::Block, AggregationMode::Tensor,
                                      AggregationMode::Device};

const StagePlan& stage_of(const Plan& plan, const RankPlace& p) {
  return plan.pipelines[static_cast<std::size_t>(p.pipeline)].stages[static_cast<std::size_t>(
      p.stage)];
}

ParamLayout unit_major(const Plan& plan, const RankPlace& p) {
  const StagePlan& st = stage_of(plan, p);
  return ParamLayout(plan.model, st.first_unit, st.last_unit, st.tp, p.tp_rank);
}

Plan dp_plan() {
  return test::make_plan(
      test::small3(), 8,
      {{2, 4, {{0, 1, 2}, {2, 4, 1}}}, {3, 5, {{0, 2, 1}, {3, 4, 3}}}, {1, 1, {{0, 4}}}});
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

// lcm(2, 3) = 6 chunks on units 0-1: a tp 2 rank holds 3 chunks, two of them (0 and 1) in one
// block with the tp 3 rank 0, the third in another; unit 2 is cut in 3 for a tp 1 stage.
Plan lcm6_plan() {
  const ModelSpec m{"lcm6", 2, 24, 6, 8, 29, 36};
  return test::make_plan(m, 8,
                         {{1, 2, {{0, 1, 1, {}, 2}, {2, 3, 1, {}, 1}}},
                          {1, 2, {{0, 2, 1, {}, 3}, {3, 3, 1, {}, 2}}}});
}

// Calls f(grad offset, canonical id) for every gradient element `layout` holds, the id being
// the element's index in the whole model laid out unit-major (ParamLayout of all units).
template <typename F>
void for_each_grad(const ParamLayout& full, const ParamLayout& layout, F f) {
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

// Canonical id of every gradient-buffer position of `layout` (-1: a gap).
std::vector<std::int64_t> ids_of(const ParamLayout& full, const ParamLayout& layout) {
  std::vector<std::int64_t> ids(static_cast<std::size_t>(layout.grad_numel()), -1);
  for_each_grad(full, layout, [&](std::int64_t at, std::int64_t id) {
    EXPECT_EQ(ids[static_cast<std::size_t>(at)], -1) << "two elements at gradient offset " << at;
    ids[static_cast<std::size_t>(at)] = id;
  });
  return ids;
}

// Whether canonical element `id` belongs to `piece`: its unit, its tensor's split and index,
// and (sharded) its row inside chunk c of n.
bool in_piece(const ParamLayout& full, const GradPiece& piece, std::int64_t id) {
  for (std::int64_t u = piece.first_unit; u <= piece.last_unit; ++u) {
    const UnitSlot& s = full.unit(u);
    for (std::size_t i = 0; i < s.tensors.size(); ++i) {
      const TensorSlot& t = s.tensors[i];
      if (id < t.offset || id >= t.offset + t.desc.numel()) continue;
      if (piece.tensor >= 0 && piece.tensor != static_cast<std::int64_t>(i)) return false;
      if (piece.part == GradPart::Replicated) return t.desc.split == TpSplit::Replicated;
      if (t.desc.split != TpSplit::Sharded) return false;
      const std::int64_t row = (id - t.offset) / t.row_size(), n = piece.num_tp_chunks;
      return row >= piece.tp_chunk * t.full_rows / n && row < (piece.tp_chunk + 1) * t.full_rows / n;
    }
  }
  return false;
}

void check_layout_property(const Plan& plan) {
  const ParamLayout full(plan.model, 0, plan.model.num_units() - 1);
  const auto places = place_ranks(plan);
  for (AggregationMode mode : kModes) {
    SCOPED_TRACE(aggregation_mode_name(mode));
    std::map<std::int64_t, ParamLayout> layouts;
    std::map<std::int64_t, std::vector<std::int64_t>> ids;
    for (const RankPlace& p : places) {
      layouts.emplace(p.device, plan_layout(plan, p.device, mode));
      ids[p.device] = ids_of(full, layouts.at(p.device));
    }
    for (const GradBlock& b : aggregation_collectives(plan, mode)) {
      std::vector<std::int64_t> first;  // the first holder's element sequence
      for (std::int64_t d : b.holders) {
        const auto runs = collective_runs(plan, layouts.at(d), d, b);
        ASSERT_EQ(runs.size(), 1u) << "collective not one range on device " << d;
        ASSERT_GE(runs.front().offset, 0);
        ASSERT_EQ(runs.front().count, b.elements);
        const auto& mine = ids.at(d);
        std::vector<std::int64_t> seq(mine.begin() + runs.front().offset,
                                      mine.begin() + runs.front().offset + b.elements);
        if (mode == AggregationMode::Device) {
          // The whole model in one order: position k holds the same element on every rank
          // that holds anything there.
          if (first.empty()) first.assign(seq.size(), -1);
          for (std::size_t k = 0; k < seq.size(); ++k) {
            if (seq[k] < 0) continue;
            if (first[k] < 0) first[k] = seq[k];
            ASSERT_EQ(seq[k], first[k]) << "device " << d << " position " << k;
          }
          continue;
        }
        // Every element of the collective once, each one belonging to one of its pieces.
        ASSERT_EQ(std::set<std::int64_t>(seq.begin(), seq.end()).size(), seq.size());
        for (std::int64_t id : seq) {
          bool found = false;
          for (const GradPiece& p : b.pieces) found = found || in_piece(full, p, id);
          ASSERT_TRUE(found) << "device " << d << " element " << id << " not in the collective";
        }
        if (first.empty()) {
          first = seq;
        } else {
          ASSERT_EQ(seq, first) << "device " << d << " orders the collective differently";
        }
      }
      if (mode == AggregationMode::Device) {
        // Together the ranks fill every position with a distinct element of the model.
        ASSERT_EQ(std::count(first.begin(), first.end(), -1), 0);
        ASSERT_EQ(std::set<std::int64_t>(first.begin(), first.end()).size(), first.size());
      }
    }
  }
}

TEST(GradLayout, EveryCollectiveIsOneRangeWithTheSameElementsOnEveryHolder) {
  check_layout_property(dp_plan());
  check_layout_property(tp_plan());
  check_layout_property(lcm6_plan());
}

TEST(GradLayout, TpRanksCutGradientsOnlyWhereTheLcmExceedsTheirTp) {
  // Devices of lcm6: pipeline 0 stage [0,1] tp 2 = {0, 1}, stage [2,3] tp 1 = {2}; pipeline 1
  // stage [0,2] tp 3 = {3, 4, 5}, stage [3,3] tp 2 = {6, 7}. Units 0-1 have 6 chunks (a tp 2
  // rank holds 3, a tp 3 rank 2, each chunk in its own piece of a block), unit 2 has 3 (tp 1
  // against tp 3), the head 2 (tp 1 against tp 2). Parameters stay one range per tensor.
  const Plan plan = lcm6_plan();
  for (const RankPlace& p : place_ranks(plan)) {
    const ParamLayout l = plan_layout(plan, p.device, AggregationMode::Block);
    std::int64_t params = 0;
    for (const UnitSlot& u : l.units()) {
      for (const TensorSlot& t : u.tensors) {
        params += t.desc.numel();
        if (t.desc.split == TpSplit::Replicated) {
          EXPECT_EQ(t.grad.size(), 1u) << t.desc.name;
        }
      }
    }
    EXPECT_EQ(params, l.numel());
  }
  const auto grad_chunks = [&](std::int64_t device, std::int64_t unit, int tensor) {
    return plan_layout(plan, device, AggregationMode::Block)
        .unit(unit)
        .tensors[static_cast<std::size_t>(tensor)]
        .grad.size();
  };
  EXPECT_EQ(grad_chunks(0, 1, kQkvW), 3u);
  EXPECT_EQ(grad_chunks(1, 0, kWte), 3u);
  EXPECT_EQ(grad_chunks(3, 1, kFcprojW), 2u);
  EXPECT_EQ(grad_chunks(2, 2, kFcW), 3u);
  EXPECT_EQ(grad_chunks(2, 3, kLmHeadW), 2u);
  EXPECT_EQ(grad_chunks(6, 3, kLmHeadW), 1u);  // tp 2 = lcm 2: one chunk
}

// Each rank's gradient element with canonical id e is (rank + 1) * f(e); after aggregation it
// must be f(e) times the sum of (rank + 1) over the element's holders, worked out here from the
// plan: per pipeline and dp replica, the tp rank whose rows hold it (replicated: tp rank 0, then
// broadcast to the group).
void check_sums(const Plan& plan, bool placed, const CommOptions& options = {}) {
  const auto places = place_ranks(plan);
  const ParamLayout full(plan.model, 0, plan.model.num_units() - 1);
  auto f = [](std::int64_t id) { return static_cast<float>(id % 7 + 1); };
  // holders[id]: sum of (rank + 1) over the ranks holding element id (replicated: tp rank 0).
  std::vector<float> holders(static_cast<std::size_t>(full.numel()), 0.0f);
  for (std::size_t r = 0; r < places.size(); ++r) {
    const ParamLayout l = unit_major(plan, places[r]);
    for_each_grad(full, l, [&](std::int64_t, std::int64_t id) {
      const bool replicated = [&] {
        for (const UnitSlot& u : full.units()) {
          for (const TensorSlot& t : u.tensors) {
            if (id >= t.offset && id < t.offset + t.desc.numel()) {
              return t.desc.split == TpSplit::Replicated;
            }
          }
        }
        return false;
      }();
      if (!replicated || places[r].tp_rank == 0) {
        holders[static_cast<std::size_t>(id)] += static_cast<float>(r + 1);
      }
    });
  }
  for (AggregationMode mode : kModes) {
    SCOPED_TRACE(std::string(aggregation_mode_name(mode)) + (placed ? " placed" : " unit-major"));
    LocalWorld world(static_cast<int>(plan.num_devices()), options);
    auto errors = run_on_threads(world, [&](Communicator comm) {
      const RankPlace& me = places[static_cast<std::size_t>(comm.rank())];
      const ParamLayout layout = placed ? plan_layout(plan, me.device, mode) : unit_major(plan, me);
      std::vector<float> g(static_cast<std::size_t>(layout.grad_numel()), 0.0f);
      for_each_grad(full, layout, [&](std::int64_t at, std::int64_t id) {
        g[static_cast<std::size_t>(at)] = static_cast<float>(comm.rank() + 1) * f(id);
      });
      const StagePlan& st = stage_of(plan, me);
      const int color = st.tp > 1 ? static_cast<int>(stage_device(st, me.dp_rank, 0)) : -1;
      const Communicator tp = comm.split(color, static_cast<int>(me.tp_rank));
      GradSync sync(plan, mode, comm, layout, tp);
      // In place with the placed layout (device-wise zeroes its padding: the model less what
      // the rank feeds, its replicated tensors only on tp rank 0); packing copies with the
      // unit-major one.
      if (placed && mode == AggregationMode::Device) {
        std::int64_t held = 0;
        for (const UnitSlot& u : layout.units()) {
          for (const TensorSlot& t : u.tensors) {
            if (t.desc.split == TpSplit::Sharded || me.tp_rank == 0) held += t.desc.numel();
          }
        }
        EXPECT_EQ(sync.bytes_copied(), 4.0 * static_cast<double>(full.numel() - held));
      } else if (placed) {
        EXPECT_EQ(sync.bytes_copied(), 0.0);
      } else if (sync.collectives() > 0 && mode != AggregationMode::Tensor) {
        EXPECT_GT(sync.bytes_copied(), 0.0);
      }
      // As a backward would: units from the last down, posting what is ready after each.
      for (std::int64_t u = layout.last_unit(); u >= layout.first_unit(); --u) {
        sync.start_ready(g.data(), u);
      }
      sync.start(g.data());
      sync.finish(g.data());
      for_each_grad(full, layout, [&](std::int64_t at, std::int64_t id) {
        ASSERT_EQ(g[static_cast<std::size_t>(at)], holders[static_cast<std::size_t>(id)] * f(id))
            << "rank " << comm.rank() << " element " << id;
      });
      // The window's bound (docs/comm.md): communicators x max(window, chunk) in flight.
      EXPECT_LE(static_cast<double>(sync.peak_bytes_in_flight()),
                static_cast<double>(sync.communicators()) *
                    static_cast<double>(std::max(options.window_bytes, options.chunk_bytes)));
    });
    expect_no_errors(errors);
  }
}

TEST(GradSync, SumsEveryHolderExactlyOnceInPlace) {
  check_sums(dp_plan(), true);
  check_sums(tp_plan(), true);
  check_sums(lcm6_plan(), true);
}

TEST(GradSync, ASmallWindowOfSmallPiecesGivesTheSameSums) {
  // 64-byte pieces, at most two in flight per communicator: every collective of these plans
  // runs through the window many times over (the default window holds them whole).
  CommOptions o;
  o.chunk_bytes = 64;
  o.window_bytes = 128;
  check_sums(tp_plan(), true, o);
  check_sums(lcm6_plan(), true, o);
}

TEST(GradSync, OtherLayoutsArePackedAndGiveTheSameSums) {
  check_sums(dp_plan(), false);
  check_sums(tp_plan(), false);
}

}  // namespace
}  // namespace eth
