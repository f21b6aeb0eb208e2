// Gradient collectives of the three aggregation schemes (DESIGN.md section 5) and their counts.
// Segments come from the union of all pipelines' stage boundaries; tp chunks from the lcm of the
// degrees holding a segment. Timing of the collectives is the predictor's business, not this.
#include "plan/blocks.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "model/arithmetic.h"
#include "model/tied.h"

namespace eth {

std::string_view aggregation_mode_name(AggregationMode m) {
  switch (m) {
    case AggregationMode::Block:
      return "block";
    case AggregationMode::Tensor:
      return "tensor";
    case AggregationMode::Device:
      return "device";
  }
  return "?";
}

std::optional<AggregationMode> parse_aggregation_mode(std::string_view name) {
  for (auto m : {AggregationMode::Block, AggregationMode::Tensor, AggregationMode::Device}) {
    if (aggregation_mode_name(m) == name) return m;
  }
  return std::nullopt;
}

std::int64_t GradBlock::lowest_unit() const {
  ETH_CHECK(!pieces.empty(), "a gradient block has no pieces");
  std::int64_t u = pieces.front().first_unit;
  for (const auto& p : pieces) u = std::min(u, p.first_unit);
  return u;
}

std::int64_t GradBlock::highest_unit() const {
  ETH_CHECK(!pieces.empty(), "a gradient block has no pieces");
  std::int64_t u = pieces.front().last_unit;
  for (const auto& p : pieces) u = std::max(u, p.last_unit);
  return u;
}

const AggregationStats& BlockPlan::stats(AggregationMode m) const {
  switch (m) {
    case AggregationMode::Block:
      return block_wise;
    case AggregationMode::Tensor:
      return tensor_wise;
    case AggregationMode::Device:
      return device_wise;
  }
  return block_wise;
}

std::int64_t stage_device_checked(const StagePlan& s, std::int64_t dp_rank,
                                  std::int64_t tp_rank) {
  ETH_CHECK(dp_rank >= 0 && dp_rank < s.dp && tp_rank >= 0 && tp_rank < s.tp,
            "stage coordinates out of range");
  ETH_CHECK(static_cast<std::int64_t>(s.devices.size()) == s.tp * s.dp,
            "stage device count must equal tp * dp");
  return s.devices[static_cast<std::size_t>(dp_rank * s.tp + tp_rank)];
}

namespace {

// A maximal unit range held by the same stage in every pipeline.
struct Segment {
  std::int64_t first_unit = 0, last_unit = 0;
  std::vector<const StagePlan*> stages;  // per pipeline, the stage holding the range
  std::int64_t chunks = 1;               // lcm of those stages' tp degrees
  std::size_t holders = 0;               // dp replicas over those stages: a piece's holders
};

std::vector<Segment> segments_descending(const Plan& plan) {
  const std::int64_t units = plan.model.num_units();
  std::set<std::int64_t> starts;
  // stage_of[p][u]: the stage of pipeline p holding unit u.
  std::vector<std::vector<const StagePlan*>> stage_of(plan.pipelines.size());
  for (std::size_t p = 0; p < plan.pipelines.size(); ++p) {
    stage_of[p].assign(static_cast<std::size_t>(units), nullptr);
    std::int64_t next = 0;
    for (const StagePlan& st : plan.pipelines[p].stages) {
      ETH_CHECK(st.first_unit == next && st.last_unit >= st.first_unit && st.last_unit < units,
                "a pipeline's stages must cover the units contiguously");
      starts.insert(st.first_unit);
      for (std::int64_t u = st.first_unit; u <= st.last_unit; ++u) {
        stage_of[p][static_cast<std::size_t>(u)] = &st;
      }
      next = st.last_unit + 1;
    }
    ETH_CHECK(next == units, "a pipeline's stages must cover every unit");
  }
  std::vector<Segment> out;
  std::int64_t end = units;  // exclusive end of the next segment, walking down
  for (auto it = starts.rbegin(); it != starts.rend(); ++it) {
    Segment seg;
    seg.first_unit = *it;
    seg.last_unit = end - 1;
    seg.stages.reserve(stage_of.size());
    for (const auto& per_unit : stage_of) {
      const StagePlan* st = per_unit[static_cast<std::size_t>(seg.first_unit)];
      seg.stages.push_back(st);
      seg.chunks = std::lcm(seg.chunks, st->tp);
      seg.holders += static_cast<std::size_t>(st->dp);
    }
    // Holders in ascending ids as often as possible before holders_of sorts them: stages by
    // their first device (pipelines need not be listed in device order).
    const auto first_device = [](const StagePlan* st) {
      return st->devices.empty() ? std::int64_t{-1} : st->devices.front();
    };
    std::sort(seg.stages.begin(), seg.stages.end(),
              [&](const StagePlan* a, const StagePlan* b) { return first_device(a) < first_device(b); });
    out.push_back(std::move(seg));
    end = *it;
  }
  return out;
}

// Every dp replica of every holding stage, at the tp rank given by `rank_of(stage)`.
template <typename RankOf>
std::vector<std::int64_t> holders_of(const Segment& seg, RankOf rank_of) {
  std::vector<std::int64_t> h;
  h.reserve(seg.holders);
  for (const StagePlan* st : seg.stages) {
    for (std::int64_t d = 0; d < st->dp; ++d) h.push_back(stage_device(*st, d, rank_of(*st)));
  }
  // Pipelines usually hold ascending device ranges: then the ids come sorted already.
  if (!std::is_sorted(h.begin(), h.end())) std::sort(h.begin(), h.end());
  return h;
}

// Elements of chunk c of n of a tensor split along its first dimension of R rows:
// rows [c*R/n, (c+1)*R/n), so a tp rank r of degree t (chunks c with c*t/n == r) holds exactly
// rows [r*R/t, (r+1)*R/t), the runtime's shard.
std::int64_t chunk_elements(const TensorDesc& t, std::int64_t c, std::int64_t n) {
  const std::int64_t rows = t.shape.front();
  const std::int64_t row_size = t.numel() / rows;
  return ((c + 1) * rows / n - c * rows / n) * row_size;
}

// The pieces of one segment in layout order: sharded chunks 0..n-1, then the replicated part;
// tensor-wise, one piece per (unit, tensor, chunk), units descending.
struct HolderHash {
  std::size_t operator()(const std::vector<std::int64_t>& holders) const {
    std::size_t h = holders.size();
    for (std::int64_t id : holders) {
      h ^= std::hash<std::int64_t>{}(id) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    }
    return h;
  }
};

struct HolderPtrHash {
  std::size_t operator()(const std::vector<std::int64_t>* holders) const {
    return HolderHash{}(*holders);
  }
};
struct HolderPtrEq {
  bool operator()(const std::vector<std::int64_t>* a, const std::vector<std::int64_t>* b) const {
    return *a == *b;
  }
};

struct PieceWithHolders {
  GradPiece piece;
  std::vector<std::int64_t> holders;
};

// unit_tensors of every unit, built once per call: a segment asks for each of its units once
// per tp chunk, and each call builds the unit's tensor list afresh.
struct UnitGrads {
  std::vector<TensorDesc> tensors;
  // Block-wise sums: (rows, elements per row) of each tp-sharded tensor but the tied ones,
  // and the tp-replicated tensors' elements.
  std::vector<std::pair<std::int64_t, std::int64_t>> sharded;
  std::int64_t replicated = 0;
};
using UnitTensors = std::vector<UnitGrads>;

UnitTensors all_unit_tensors(const ModelSpec& m) {
  UnitTensors out(static_cast<std::size_t>(m.num_units()));
  for (std::int64_t u = 0; u < m.num_units(); ++u) {
    UnitGrads& g = out[static_cast<std::size_t>(u)];
    g.tensors = unit_tensors(m, u);
    for (const TensorDesc& t : g.tensors) {
      if (t.split == TpSplit::Replicated) g.replicated += t.numel();
      if (t.split == TpSplit::Sharded && !is_tied_tensor(m, u, t.name)) {
        g.sharded.emplace_back(t.shape.front(), t.numel() / t.shape.front());
      }
    }
  }
  return out;
}

std::vector<PieceWithHolders> segment_pieces(const ModelSpec& m, const UnitTensors& unit_tensors,
                                             const Segment& seg, bool per_tensor) {
  const auto grads_of = [&](std::int64_t u) -> const UnitGrads& {
    return unit_tensors[static_cast<std::size_t>(u)];
  };
  std::vector<PieceWithHolders> out;
  const std::int64_t n = seg.chunks;
  auto add = [&](std::int64_t first, std::int64_t last, GradPart part, std::int64_t chunk,
                 std::int64_t tensor, std::int64_t elements) {
    if (elements == 0) return;
    GradPiece p{first, last, part, part == GradPart::Sharded ? chunk : 0,
                part == GradPart::Sharded ? n : 1, tensor, elements};
    auto holders = part == GradPart::Sharded
                       ? holders_of(seg, [&](const StagePlan& st) { return chunk * st.tp / n; })
                       : holders_of(seg, [](const StagePlan&) { return std::int64_t{0}; });
    out.push_back({p, std::move(holders)});
  };
  if (per_tensor) {
    for (std::int64_t u = seg.last_unit; u >= seg.first_unit; --u) {
      const auto& tensors = grads_of(u).tensors;
      for (std::int64_t c = 0; c < n; ++c) {
        for (std::size_t i = 0; i < tensors.size(); ++i) {
          if (tensors[i].split != TpSplit::Sharded || is_tied_tensor(m, u, tensors[i].name)) {
            continue;
          }
          add(u, u, GradPart::Sharded, c, static_cast<std::int64_t>(i),
              chunk_elements(tensors[i], c, n));
        }
      }
      for (std::size_t i = 0; i < tensors.size(); ++i) {
        if (tensors[i].split != TpSplit::Replicated) continue;
        add(u, u, GradPart::Replicated, 0, static_cast<std::int64_t>(i), tensors[i].numel());
      }
    }
    return out;
  }
  for (std::int64_t c = 0; c < n; ++c) {
    std::int64_t elements = 0;
    for (std::int64_t u = seg.first_unit; u <= seg.last_unit; ++u) {
      // chunk_elements of each tensor, from its rows and row size.
      for (const auto& [rows, row_size] : grads_of(u).sharded) {
        elements += ((c + 1) * rows / n - c * rows / n) * row_size;
      }
    }
    add(seg.first_unit, seg.last_unit, GradPart::Sharded, c, -1, elements);
  }
  std::int64_t replicated = 0;
  for (std::int64_t u = seg.first_unit; u <= seg.last_unit; ++u) replicated += grads_of(u).replicated;
  add(seg.first_unit, seg.last_unit, GradPart::Replicated, 0, -1, replicated);
  return out;
}

// A tied model's embedding matrix: chunk c of n (the lcm of the tp degrees of every stage
// holding unit 0 or the head) is held by tp rank c*t/n of each such stage, every dp replica; a
// stage holding both units holds it once.
std::vector<PieceWithHolders> tied_pieces(const Plan& plan) {
  const ModelSpec& m = plan.model;
  const std::int64_t head = m.num_units() - 1;
  std::vector<const StagePlan*> stages;
  std::int64_t n = 1;
  for (const PipelinePlan& pipe : plan.pipelines) {
    for (const StagePlan& st : pipe.stages) {
      if (st.first_unit != 0 && st.last_unit != head) continue;
      stages.push_back(&st);
      n = std::lcm(n, st.tp);
    }
  }
  const TensorDesc matrix{"wte", {m.vocab, m.hidden}, TpSplit::Sharded};
  std::vector<PieceWithHolders> out;
  for (std::int64_t c = 0; c < n; ++c) {
    PieceWithHolders pw;
    pw.piece = GradPiece{0, head, GradPart::Tied, c, n, -1, chunk_elements(matrix, c, n)};
    if (pw.piece.elements == 0) continue;
    for (const StagePlan* st : stages) {
      for (std::int64_t d = 0; d < st->dp; ++d) {
        pw.holders.push_back(stage_device(*st, d, c * st->tp / n));
      }
    }
    std::sort(pw.holders.begin(), pw.holders.end());
    out.push_back(std::move(pw));
  }
  return out;
}

}  // namespace

std::vector<GradBlock> aggregation_collectives(const Plan& plan, AggregationMode mode) {
  std::vector<GradBlock> out;
  if (mode == AggregationMode::Device) {
    // One zero-padded buffer of the whole unsharded model on every device of the plan.
    GradBlock b;
    b.pieces.push_back(GradPiece{0, plan.model.num_units() - 1, GradPart::Whole, 0, 1, -1,
                                 total_params(plan.model)});
    b.holders = plan.device_ids();
    b.elements = b.pieces.front().elements;
    out.push_back(std::move(b));
    return out;
  }
  const bool per_tensor = mode == AggregationMode::Tensor;
  // Block-wise merging, by the holders' hash to the blocks with it (at 10,000 devices a holder
  // group has hundreds of ids: a tree of copied keys was much of a prediction).
  std::unordered_multimap<std::size_t, std::size_t> blocks_of_hash;
  std::vector<std::vector<PieceWithHolders>> lists;
  const UnitTensors tensors = all_unit_tensors(plan.model);
  for (const Segment& seg : segments_descending(plan)) {
    lists.push_back(segment_pieces(plan.model, tensors, seg, per_tensor));
  }
  if (plan.model.tied_embeddings) lists.push_back(tied_pieces(plan));
  for (auto& list : lists) {
    for (auto& pw : list) {
      if (!per_tensor) {
        const std::size_t hash = HolderHash{}(pw.holders);
        const auto [lo, hi] = blocks_of_hash.equal_range(hash);
        const auto it = std::find_if(
            lo, hi, [&](const auto& entry) { return out[entry.second].holders == pw.holders; });
        if (it != hi) {
          GradBlock& b = out[it->second];
          b.elements += pw.piece.elements;
          b.pieces.push_back(pw.piece);
          continue;
        }
        blocks_of_hash.emplace(hash, out.size());
      }
      GradBlock b;
      b.elements = pw.piece.elements;
      b.pieces.push_back(pw.piece);
      b.holders = std::move(pw.holders);
      out.push_back(std::move(b));
    }
  }
  return out;
}

AggregationStats aggregation_stats(const std::vector<GradBlock>& collectives,
                                   double bytes_per_element) {
  AggregationStats s;
  // Flat and hashed rather than a map and a set of vectors: at 10,000 devices the planner's
  // finalists have hundreds of collectives of hundreds of holders each. A device's sum still
  // adds its collectives in their order.
  std::unordered_set<const std::vector<std::int64_t>*, HolderPtrHash, HolderPtrEq> groups;
  std::vector<double> per_device;
  for (const GradBlock& b : collectives) {
    if (b.holders.size() < 2) continue;
    const double bytes = static_cast<double>(b.elements) * bytes_per_element;
    ++s.collectives;
    s.bytes_total += bytes * static_cast<double>(b.holders.size());
    groups.insert(&b.holders);
    for (std::int64_t d : b.holders) {
      ETH_CHECK(d >= 0, "a collective holder has a negative device id");
      const auto i = static_cast<std::size_t>(d);
      if (i >= per_device.size()) per_device.resize(i + 1, 0.0);
      per_device[i] += bytes;
    }
  }
  s.communicators = static_cast<std::int64_t>(groups.size());
  for (const double bytes : per_device) s.bytes_per_device_max = std::max(s.bytes_per_device_max, bytes);
  return s;
}

BlockPlan derive_blocks(const Plan& plan, double bytes_per_element) {
  BlockPlan bp;
  bp.blocks = aggregation_collectives(plan, AggregationMode::Block);
  bp.block_wise = aggregation_stats(bp.blocks, bytes_per_element);
  bp.tensor_wise = aggregation_stats(aggregation_collectives(plan, AggregationMode::Tensor),
                                     bytes_per_element);
  bp.device_wise = aggregation_stats(aggregation_collectives(plan, AggregationMode::Device),
                                     bytes_per_element);
  return bp;
}

}  // namespace eth
