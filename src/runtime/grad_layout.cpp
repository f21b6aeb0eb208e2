// The placed gradient layout of a rank and the runs of its collectives. See grad_layout.h.
#include "runtime/grad_layout.h"

#include <algorithm>

#include "core/error.h"
#include "model/arithmetic.h"
#include "model/tied.h"
#include "runtime/placement.h"

namespace eth {

namespace {

// Whether units [first, last] hold `piece`: all its units, or for a tied piece either copy.
bool holds_piece(const ModelSpec& model, std::int64_t first, std::int64_t last,
                 const GradPiece& piece) {
  if (piece.part == GradPart::Tied) return first == 0 || last == model.num_units() - 1;
  return piece.first_unit >= first && piece.last_unit <= last;
}

// Calls f(unit, tensor index, rows of the whole tensor, elements per row) for the elements of
// `piece` in the canonical order (grad_layout.h); empty chunks are skipped. A tied piece walks
// the copy units [first, last] hold: unit 0's wte where they hold it (a rank holding both keeps
// one gradient for both, model_state.h), else the head's lm_head_w.
template <typename F>
void walk_piece(const ModelSpec& model, const GradPiece& piece, std::int64_t first,
                std::int64_t last, F f) {
  ETH_CHECK(piece.part != GradPart::Whole, "walk_piece: a whole-model piece has no tensor order");
  ETH_CHECK(holds_piece(model, first, last, piece), "a gradient piece of units not held here");
  if (piece.part == GradPart::Tied) {
    const std::int64_t u = first == 0 ? 0 : model.num_units() - 1;
    const std::vector<TensorDesc> tensors = unit_tensors(model, u);
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      if (!is_tied_tensor(model, u, tensors[i].name)) continue;
      const std::int64_t R = tensors[i].shape.front();
      const RowRange rows{piece.tp_chunk * R / piece.num_tp_chunks,
                          (piece.tp_chunk + 1) * R / piece.num_tp_chunks};
      if (rows.size() > 0) f(u, static_cast<std::int64_t>(i), rows, tensors[i].numel() / R);
    }
    return;
  }
  const TpSplit want = piece.part == GradPart::Sharded ? TpSplit::Sharded : TpSplit::Replicated;
  for (std::int64_t u = piece.first_unit; u <= piece.last_unit; ++u) {
    const std::vector<TensorDesc> tensors = unit_tensors(model, u);
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const TensorDesc& t = tensors[i];
      if (t.split != want || is_tied_tensor(model, u, t.name)) continue;
      if (piece.tensor >= 0 && static_cast<std::int64_t>(i) != piece.tensor) continue;
      const std::int64_t R = t.shape.front();
      const RowRange rows = want == TpSplit::Sharded
                                ? RowRange{piece.tp_chunk * R / piece.num_tp_chunks,
                                           (piece.tp_chunk + 1) * R / piece.num_tp_chunks}
                                : RowRange{0, R};
      if (rows.size() > 0) f(u, static_cast<std::int64_t>(i), rows, t.numel() / R);
    }
  }
}

// Appends a run, merging it into the previous one when they are adjacent (or both zeros).
void add_run(std::vector<PackRun>& runs, std::int64_t offset, std::int64_t count) {
  if (count == 0) return;
  if (!runs.empty()) {
    PackRun& last = runs.back();
    if ((offset < 0 && last.offset < 0) ||
        (offset >= 0 && last.offset >= 0 && last.offset + last.count == offset)) {
      last.count += count;
      return;
    }
  }
  runs.push_back(PackRun{offset, count});
}

bool holds(const std::vector<std::int64_t>& holders, std::int64_t device) {
  return std::binary_search(holders.begin(), holders.end(), device);
}

// Whether no gradient chunk of `layout` meets [offset, offset + count).
bool gap(const ParamLayout& layout, std::int64_t offset, std::int64_t count) {
  for (const UnitSlot& u : layout.units()) {
    for (const TensorSlot& t : u.tensors) {
      for (const GradChunk& c : t.grad) {
        if (c.offset < offset + count && c.offset + c.rows.size() * t.row_size() > offset) {
          return false;
        }
      }
    }
  }
  return true;
}

bool inside(const ModelSpec& model, const ParamLayout& layout, const GradPiece& p) {
  return holds_piece(model, layout.first_unit(), layout.last_unit(), p);
}

}  // namespace

ParamLayout plan_layout(const Plan& plan, std::int64_t device, AggregationMode mode) {
  const int rank = rank_of_device(plan, device);
  const RankPlace place = place_ranks(plan)[static_cast<std::size_t>(rank)];
  const StagePlan& st = plan.pipelines[static_cast<std::size_t>(place.pipeline)]
                            .stages[static_cast<std::size_t>(place.stage)];
  std::vector<GradPlacement> placed;
  std::int64_t at = 0;
  auto place_piece = [&](const GradPiece& piece) {
    walk_piece(plan.model, piece, st.first_unit, st.last_unit,
               [&](std::int64_t u, std::int64_t i, RowRange rows, std::int64_t row) {
                 placed.push_back(GradPlacement{u, i, rows, at});
                 at += rows.size() * row;
               });
  };
  const bool global = mode == AggregationMode::Device;
  std::int64_t global_at = 0;  // offset of the next block in the whole-model order
  std::vector<GradPiece> local;  // replicated pieces a tp rank > 0 holds outside every block
  for (const GradBlock& b : aggregation_collectives(plan, AggregationMode::Block)) {
    if (holds(b.holders, device)) {
      if (global) at = global_at;
      for (const GradPiece& p : b.pieces) place_piece(p);
    } else if (place.tp_rank > 0) {
      for (const GradPiece& p : b.pieces) {
        if (p.part == GradPart::Replicated && p.first_unit >= st.first_unit &&
            p.last_unit <= st.last_unit) {
          local.push_back(p);
        }
      }
    }
    global_at += b.elements;
  }
  if (global) {
    ETH_CHECK(global_at == total_params(plan.model), "the blocks do not cover the model once");
    at = global_at;
  }
  for (const GradPiece& p : local) place_piece(p);
  const std::int64_t head = plan.model.num_units() - 1;
  if (plan.model.tied_embeddings && st.first_unit == 0 && st.last_unit == head) {
    // Both copies here share wte's gradient; the head's own room stays (unused) at the end, as
    // the memory model charges the head its lm_head_w gradient like the unit-major layout.
    at += tp_rows(plan.model.vocab, st.tp, place.tp_rank).size() * plan.model.hidden;
  }
  return ParamLayout(plan.model, st.first_unit, st.last_unit, st.tp, place.tp_rank,
                     std::move(placed), at);
}

std::vector<PackRun> piece_runs(const ModelSpec& model, const ParamLayout& layout,
                                const GradPiece& piece) {
  ETH_CHECK(inside(model, layout, piece), "a rank packs a piece of units it does not hold");
  std::vector<PackRun> runs;
  std::int64_t total = 0;
  walk_piece(model, piece, layout.first_unit(), layout.last_unit(),
             [&](std::int64_t u, std::int64_t i, RowRange rows, std::int64_t row) {
    const TensorSlot& t = layout.unit(u).tensors[static_cast<std::size_t>(i)];
    ETH_CHECK(rows.begin >= t.rows.begin && rows.end <= t.rows.end,
              "a gradient chunk outside the rank's rows of " + t.desc.name);
    // The chunks of the layout that hold these rows (one, in a layout that follows the blocks).
    for (const GradChunk& c : t.grad) {
      const std::int64_t b = std::max(rows.begin, c.rows.begin), e = std::min(rows.end, c.rows.end);
      if (b < e) add_run(runs, c.offset + (b - c.rows.begin) * row, (e - b) * row);
    }
    total += rows.size() * row;
  });
  ETH_CHECK(total == piece.elements, "packed runs disagree with the piece's element count");
  return runs;
}

std::vector<PackRun> collective_runs(const Plan& plan, const ParamLayout& layout,
                                     std::int64_t device, const GradBlock& b) {
  ETH_CHECK(holds(b.holders, device), "collective_runs: the device is not a holder");
  std::vector<PackRun> runs;
  auto append = [&](const GradPiece& p) {
    for (const PackRun& r : piece_runs(plan.model, layout, p)) add_run(runs, r.offset, r.count);
  };
  if (b.pieces.size() == 1 && b.pieces.front().part == GradPart::Whole) {
    // Device-wise: the whole model in the global block order; what the device does not hold
    // (other units, other tp ranks' chunks, replicated tensors off tp rank 0) is zeros. With a
    // layout that keeps every block at its global offset and leaves the others' blocks as gaps
    // (plan_layout's device-wise one), that is the buffer's first total_params elements.
    const std::vector<GradBlock> blocks = aggregation_collectives(plan, AggregationMode::Block);
    bool global = true;
    std::int64_t at = 0;
    for (const GradBlock& g : blocks) {
      if (holds(g.holders, device)) {
        std::vector<PackRun> mine;
        for (const GradPiece& p : g.pieces) {
          for (const PackRun& r : piece_runs(plan.model, layout, p)) add_run(mine, r.offset, r.count);
        }
        global = global && mine.size() == 1 && mine.front().offset == at;
        for (const PackRun& r : mine) add_run(runs, r.offset, r.count);
      } else {
        add_run(runs, -1, g.elements);
        global = global && gap(layout, at, g.elements);
      }
      at += g.elements;
    }
    if (global) return {PackRun{0, at}};
    return runs;
  }
  for (const GradPiece& p : b.pieces) append(p);
  return runs;
}

std::vector<PackRun> device_gaps(const Plan& plan, const ParamLayout& layout,
                                 std::int64_t device) {
  std::vector<PackRun> out;
  std::int64_t at = 0;
  for (const GradBlock& g : aggregation_collectives(plan, AggregationMode::Block)) {
    if (!holds(g.holders, device)) add_run(out, at, g.elements);
    at += g.elements;
  }
  ETH_CHECK(layout.grad_numel() >= at, "device_gaps: not a whole-model gradient buffer");
  return out;
}

std::vector<GradPiece> replicated_pieces(const Plan& plan, const ParamLayout& layout) {
  std::vector<GradPiece> out;
  for (const GradBlock& b : aggregation_collectives(plan, AggregationMode::Block)) {
    for (const GradPiece& p : b.pieces) {
      if (p.part == GradPart::Replicated && inside(plan.model, layout, p)) out.push_back(p);
    }
  }
  return out;
}

}  // namespace eth
