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
  for (std::int64_t u = piece.first_unit; u <= piece.last_unit; ++u) {
    if (piece.part == GradPart::Whole) {
      const std::int64_t n = unit_params(model, u, 1);
      add_run(runs, holds(layout, u) ? layout.unit(u).offset : -1, n);
      total += n;
      continue;
    }
    ETH_CHECK(piece.num_tp_chunks == 1, "the CPU runtime reduces tp 1 pieces only");
    ETH_CHECK(holds(layout, u), "a rank packs a piece of a unit it does not hold");
    const UnitSlot& slot = layout.unit(u);
    const TpSplit want = piece.part == GradPart::Sharded ? TpSplit::Sharded : TpSplit::Replicated;
    for (std::size_t i = 0; i < slot.tensors.size(); ++i) {
      const TensorSlot& t = slot.tensors[i];
      if (t.desc.split != want) continue;
      if (piece.tensor >= 0 && static_cast<std::int64_t>(i) != piece.tensor) continue;
      add_run(runs, slot.offset + t.offset, t.desc.numel());
      total += t.desc.numel();
    }
  }
  ETH_CHECK(total == piece.elements, "packed runs disagree with the piece's element count");
  return runs;
}

GradSync::GradSync(const Plan& plan, AggregationMode mode, const Communicator& world,
                   const ParamLayout& layout)
    : mode_(mode) {
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
}

double GradSync::bytes() const {
  double b = 0;
  for (const Job& job : jobs_) b += static_cast<double>(job.buffer.size()) * sizeof(float);
  return b;
}

}  // namespace eth
