// Packing gradient pieces and posting their all-reduces. See grad_sync.h.
#include "runtime/grad_sync.h"

#include <algorithm>
#include <limits>
#include <map>

#include "core/error.h"
#include "runtime/placement.h"

namespace eth {

namespace {

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

bool holds(const ParamLayout& layout, std::int64_t u) {
  return u >= layout.first_unit() && u <= layout.last_unit();
}

}  // namespace

std::vector<PackRun> piece_runs(const ModelSpec& model, const ParamLayout& layout,
                                const GradPiece& piece) {
  std::vector<PackRun> runs;
  std::int64_t total = 0;
  auto add = [&](std::int64_t offset, std::int64_t count) {
    add_run(runs, offset, count);
    total += count;
  };
  for (std::int64_t u = piece.first_unit; u <= piece.last_unit; ++u) {
    if (piece.part == GradPart::Whole) {
      // The whole unit in canonical order: this rank's rows of each sharded tensor at their
      // place in the whole tensor, its replicated tensors if it is its tp group's
      // representative (tp rank 0), zeros for everything else.
      if (!holds(layout, u)) {
        add(-1, unit_params(model, u, 1));
        continue;
      }
      const UnitSlot& slot = layout.unit(u);
      for (const TensorSlot& t : slot.tensors) {
        const std::int64_t row = t.row_size(), at = slot.offset + t.offset;
        if (t.desc.split == TpSplit::Replicated) {
          add(layout.tp_rank() == 0 ? at : -1, t.desc.numel());
          continue;
        }
        add(-1, t.rows.begin * row);
        add(at, t.desc.numel());
        add(-1, (t.full_rows - t.rows.end) * row);
      }
      continue;
    }
    ETH_CHECK(holds(layout, u), "a rank packs a piece of a unit it does not hold");
    const UnitSlot& slot = layout.unit(u);
    const TpSplit want = piece.part == GradPart::Sharded ? TpSplit::Sharded : TpSplit::Replicated;
    ETH_CHECK(want == TpSplit::Sharded || layout.tp_rank() == 0,
              "replicated gradients join from tp rank 0 only");
    for (std::size_t i = 0; i < slot.tensors.size(); ++i) {
      const TensorSlot& t = slot.tensors[i];
      if (t.desc.split != want) continue;
      if (piece.tensor >= 0 && static_cast<std::int64_t>(i) != piece.tensor) continue;
      if (want == TpSplit::Replicated) {
        add(slot.offset + t.offset, t.desc.numel());
        continue;
      }
      // Chunk c of n: rows [c*R/n, (c+1)*R/n) of the whole tensor, inside this rank's rows.
      const std::int64_t n = piece.num_tp_chunks, c = piece.tp_chunk;
      const RowRange rows{c * t.full_rows / n, (c + 1) * t.full_rows / n};
      ETH_CHECK(rows.begin >= t.rows.begin && rows.end <= t.rows.end,
                "a gradient chunk outside the rank's rows of " + t.desc.name);
      add(slot.offset + t.offset + (rows.begin - t.rows.begin) * t.row_size(),
          rows.size() * t.row_size());
    }
  }
  ETH_CHECK(total == piece.elements, "packed runs disagree with the piece's element count");
  return runs;
}

GradSync::GradSync(const Plan& plan, AggregationMode mode, const Communicator& world,
                   const ParamLayout& layout, const Communicator& tp_comm)
    : mode_(mode), tp_comm_(tp_comm) {
  const std::int64_t my_device = plan.device_ids()[static_cast<std::size_t>(world.rank())];
  std::map<std::vector<std::int64_t>, Communicator> groups;
  std::int64_t index = -1;
  for (const GradBlock& b : aggregation_collectives(plan, mode)) {
    if (b.holders.size() < 2) continue;  // nothing to reduce with oneself
    ++index;
    if (!std::binary_search(b.holders.begin(), b.holders.end(), my_device)) continue;
    auto it = groups.find(b.holders);
    if (it == groups.end()) {
      Communicator c;
      if (static_cast<int>(b.holders.size()) == world.size()) {
        c = world;
      } else {
        std::vector<int> ranks;
        for (std::int64_t d : b.holders) ranks.push_back(rank_of_device(plan, d));
        c = world.create_group(ranks);
      }
      it = groups.emplace(b.holders, c).first;
    }
    Job job;
    job.index = index;
    job.comm = it->second;
    job.lowest_unit = layout.last_unit();
    for (const GradPiece& piece : b.pieces) {
      job.lowest_unit = std::min(job.lowest_unit, std::max(piece.first_unit, layout.first_unit()));
      for (const PackRun& r : piece_runs(plan.model, layout, piece)) {
        add_run(job.runs, r.offset, r.count);
      }
    }
    job.buffer.resize(static_cast<std::size_t>(b.elements));
    jobs_.push_back(std::move(job));
  }
  communicators_ = static_cast<std::int64_t>(groups.size());
  if (!tp_comm_.is_null()) {
    for (const UnitSlot& u : layout.units()) {
      for (const TensorSlot& t : u.tensors) {
        if (t.desc.split == TpSplit::Replicated) {
          add_run(replicated_, u.offset + t.offset, t.desc.numel());
        }
      }
    }
    std::int64_t n = 0;
    for (const PackRun& r : replicated_) n += r.count;
    replicated_buffer_.resize(static_cast<std::size_t>(n));
  }
}

void GradSync::start(const float* grads) {
  start_ready(grads, std::numeric_limits<std::int64_t>::min());
}

void GradSync::start_ready(const float* grads, std::int64_t lowest_done_unit) {
  for (; next_ < jobs_.size() && jobs_[next_].lowest_unit >= lowest_done_unit; ++next_) {
    Job& job = jobs_[next_];
    TraceScope trace(trace_, TraceKind::CollectivePost, -1, job.index);
    float* out = job.buffer.data();
    for (const PackRun& r : job.runs) {
      if (r.offset < 0) {
        std::fill(out, out + r.count, 0.0f);
      } else {
        std::copy(grads + r.offset, grads + r.offset + r.count, out);
      }
      out += r.count;
    }
    job.request = job.comm.iallreduce_sum(std::span<float>(job.buffer));
  }
}

void GradSync::finish(float* grads) {
  ETH_CHECK(next_ == jobs_.size(), "GradSync::finish before every collective was started");
  next_ = 0;
  for (Job& job : jobs_) {
    TraceScope trace(trace_, TraceKind::CollectiveWait, -1, job.index);
    job.request.wait();
    job.request = Request();
    const float* in = job.buffer.data();
    for (const PackRun& r : job.runs) {
      if (r.offset >= 0) std::copy(in, in + r.count, grads + r.offset);
      in += r.count;
    }
  }
  if (tp_comm_.is_null()) return;
  // Replicated tensors were summed from each tp group's representative (tp rank 0); share its
  // result with the group, so every tp rank steps them with the same bits.
  float* buf = replicated_buffer_.data();
  for (const PackRun& r : replicated_) {
    buf = std::copy(grads + r.offset, grads + r.offset + r.count, buf);
  }
  tp_comm_.broadcast(std::span<float>(replicated_buffer_), 0);
  const float* in = replicated_buffer_.data();
  for (const PackRun& r : replicated_) {
    std::copy(in, in + r.count, grads + r.offset);
    in += r.count;
  }
}

double GradSync::bytes() const {
  double b = 0;
  for (const Job& job : jobs_) b += static_cast<double>(job.buffer.size()) * sizeof(float);
  return b;
}

}  // namespace eth
