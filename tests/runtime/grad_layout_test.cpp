// The placed gradient layout (runtime/grad_layout.h), checked independently of how it is built,
// against element ids read off each layout's chunk table (the element's index in the whole model
// laid out unit-major): for every collective of every mode, on every holder, the collective is
// one contiguous range of the holder's gradient buffer, and the ranges of all holders name the
// same elements in the same order, each element of the collective once; tp ranks cut a gradient
// only where lcm(tp) exceeds their tp; a piece's runs in any layout list its elements in
// ascending id order (the canonical order); the device-wise gaps are exactly the positions a rank
// does not fill; and the replicated pieces cover the rank's replicated tensors once.
#include "runtime/grad_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "grad_test_plans.h"
#include "runtime/placement.h"

namespace eth::grad_layout_test {
namespace {

using test::dp_plan;
using test::for_each_grad;
using test::kModes;
using test::lcm6_plan;
using test::tp_plan;
using test::unit_major;

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
      return row >= piece.tp_chunk * t.full_rows / n &&
             row < (piece.tp_chunk + 1) * t.full_rows / n;
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

// Every element id of the whole model that belongs to `piece`, ascending.
std::vector<std::int64_t> piece_ids(const ParamLayout& full, const GradPiece& piece) {
  std::vector<std::int64_t> out;
  for (std::int64_t id = 0; id < full.numel(); ++id) {
    if (in_piece(full, piece, id)) out.push_back(id);
  }
  return out;
}

// The ids a layout holds at `runs`, in run order.
std::vector<std::int64_t> ids_at(const std::vector<std::int64_t>& ids,
                                 const std::vector<PackRun>& runs) {
  std::vector<std::int64_t> out;
  for (const PackRun& r : runs) {
    EXPECT_GE(r.offset, 0) << "a piece's run of zeros";
    out.insert(out.end(), ids.begin() + r.offset, ids.begin() + r.offset + r.count);
  }
  return out;
}

TEST(GradLayout, APiecesRunsListItsElementsInAscendingIdOrderInEveryLayout) {
  for (const Plan& plan : {dp_plan(), tp_plan(), lcm6_plan()}) {
    const ParamLayout full(plan.model, 0, plan.model.num_units() - 1);
    const auto places = place_ranks(plan);
    for (const GradBlock& b : aggregation_collectives(plan, AggregationMode::Block)) {
      for (const GradPiece& p : b.pieces) {
        const std::vector<std::int64_t> want = piece_ids(full, p);
        ASSERT_EQ(static_cast<std::int64_t>(want.size()), p.elements);
        for (std::int64_t d : b.holders) {
          const RankPlace& place = places[static_cast<std::size_t>(rank_of_device(plan, d))];
          for (const ParamLayout& l :
               {unit_major(plan, place), plan_layout(plan, d, AggregationMode::Block)}) {
            EXPECT_EQ(ids_at(ids_of(full, l), piece_runs(plan.model, l, p)), want)
                << "device " << d;
          }
        }
      }
    }
  }
}

TEST(GradLayout, DeviceWiseGapsAreExactlyThePositionsTheRankDoesNotFill) {
  for (const Plan& plan : {dp_plan(), tp_plan(), lcm6_plan()}) {
    const ParamLayout full(plan.model, 0, plan.model.num_units() - 1);
    for (const RankPlace& p : place_ranks(plan)) {
      const ParamLayout l = plan_layout(plan, p.device, AggregationMode::Device);
      const std::vector<std::int64_t> ids = ids_of(full, l);
      std::vector<bool> in_gap(static_cast<std::size_t>(full.numel()), false);
      for (const PackRun& r : device_gaps(plan, l, p.device)) {
        ASSERT_GE(r.offset, 0);
        ASSERT_LE(r.offset + r.count, full.numel());
        for (std::int64_t k = r.offset; k < r.offset + r.count; ++k) {
          in_gap[static_cast<std::size_t>(k)] = true;
        }
      }
      for (std::int64_t k = 0; k < full.numel(); ++k) {
        ASSERT_EQ(in_gap[static_cast<std::size_t>(k)], ids[static_cast<std::size_t>(k)] < 0)
            << "device " << p.device << " position " << k;
      }
    }
  }
}

TEST(GradLayout, ReplicatedPiecesCoverTheRanksReplicatedTensorsOnce) {
  for (const Plan& plan : {dp_plan(), tp_plan(), lcm6_plan()}) {
    const ParamLayout full(plan.model, 0, plan.model.num_units() - 1);
    for (const RankPlace& p : place_ranks(plan)) {
      const ParamLayout l = plan_layout(plan, p.device, AggregationMode::Block);
      const std::vector<GradPiece> pieces = replicated_pieces(plan, l);
      for (const UnitSlot& u : full.units()) {
        const bool mine = u.unit >= l.first_unit() && u.unit <= l.last_unit();
        for (const TensorSlot& t : u.tensors) {
          const bool replicated = t.desc.split == TpSplit::Replicated;
          for (std::int64_t id = t.offset; id < t.offset + t.desc.numel(); ++id) {
            int count = 0;
            for (const GradPiece& piece : pieces) count += in_piece(full, piece, id) ? 1 : 0;
            ASSERT_EQ(count, mine && replicated ? 1 : 0)
                << "device " << p.device << " " << t.desc.name << " of unit " << u.unit;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace eth::grad_layout_test
