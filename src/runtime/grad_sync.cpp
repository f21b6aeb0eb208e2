// Posting the gradient all-reduces, in place where the layout allows. See grad_sync.h.
#include "runtime/grad_sync.h"

#include <algorithm>
#include <limits>
#include <map>
#include <string>

#include "core/error.h"
#include "runtime/placement.h"

namespace eth {

std::int64_t GradSync::Job::elements() const {
  std::int64_t n = 0;
  for (const PackRun& r : runs) n += r.count;
  return n;
}

// Fills, packs and unpacks through the gradients' memory (host memcpy, or the device's copies).
std::span<float> GradSync::Job::data(float* grads) {
  const auto bytes = [](std::int64_t n) { return static_cast<std::size_t>(n) * sizeof(float); };
  for (const PackRun& g : gaps) memory->zero(grads + g.offset, bytes(g.count));
  if (in_place()) {
    return {grads + runs.front().offset, static_cast<std::size_t>(runs.front().count)};
  }
  auto* const first = reinterpret_cast<float*>(buffer.data());
  float* out = first;
  for (const PackRun& r : runs) {
    if (r.offset < 0) {
      memory->zero(out, bytes(r.count));
    } else {
      memory->copy(out, grads + r.offset, bytes(r.count));
    }
    out += r.count;
  }
  return {first, static_cast<std::size_t>(elements())};
}

void GradSync::Job::unpack(float* grads) const {
  if (in_place()) return;
  const auto* in = reinterpret_cast<const float*>(buffer.data());
  for (const PackRun& r : runs) {
    if (r.offset >= 0) {
      memory->copy(grads + r.offset, in, static_cast<std::size_t>(r.count) * sizeof(float));
    }
    in += r.count;
  }
}

GradSync::Job GradSync::make_job(std::vector<PackRun> runs, const RuntimeMemory& memory) {
  Job job;
  job.memory = &memory;
  job.runs = std::move(runs);
  if (!job.in_place()) {
    job.buffer = RuntimeBuffer(memory, static_cast<std::size_t>(job.elements()) * sizeof(float));
  }
  return job;
}

GradSync::GradSync(const Plan& plan, AggregationMode mode, const Communicator& world,
                   const ParamLayout& layout, const Communicator& tp_comm,
                   const RuntimeMemory& memory)
    : mode_(mode), memory_(&memory), tp_comm_(tp_comm), queue_(world.options().window_bytes) {
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
    Job job = make_job(collective_runs(plan, layout, my_device, b), *memory_);
    ETH_CHECK(job.elements() == b.elements, "a collective's runs disagree with its size");
    if (job.in_place() && mode == AggregationMode::Device) {
      job.gaps = device_gaps(plan, layout, my_device);
    }
    job.index = index;
    job.comm = it->second;
    job.lowest_unit = layout.last_unit();
    for (const GradPiece& piece : b.pieces) {
      job.lowest_unit = std::min(job.lowest_unit, std::max(piece.first_unit, layout.first_unit()));
    }
    jobs_.push_back(std::move(job));
  }
  communicators_ = static_cast<std::int64_t>(groups.size());
  for (std::size_t i = 0; i < jobs_.size(); ++i) order_.push_back(i);
  if (!tp_comm_.is_null()) {
    // Every tp rank of the group lists the same pieces (same units), tp rank 0's inside its
    // blocks, the others' in their own range after the blocks.
    for (const GradPiece& p : replicated_pieces(plan, layout)) {
      broadcasts_.push_back(make_job(piece_runs(plan.model, layout, p), *memory_));
    }
  }
}

bool GradSync::joins(std::int64_t index) const {
  return std::any_of(jobs_.begin(), jobs_.end(), [&](const Job& j) { return j.index == index; });
}

void GradSync::set_order(const std::vector<std::int64_t>& indices) {
  ETH_CHECK(next_ == 0, "GradSync::set_order inside a step");
  order_.clear();
  std::size_t at = 0;  // jobs_ ascend by index, and so must `indices`
  for (std::int64_t index : indices) {
    while (at < jobs_.size() && jobs_[at].index < index) ++at;
    ETH_CHECK(at < jobs_.size() && jobs_[at].index == index,
              "GradSync::set_order: collective " + std::to_string(index) +
                  " is not one this rank joins, or the order does not ascend");
    order_.push_back(at++);
  }
}

void GradSync::queue_next(float* grads) {
  if (next_ == 0) log_.clear();
  Job& job = jobs_[order_[next_++]];
  TraceScope trace(trace_, TraceKind::CollectivePost, -1, job.index);
  job.queued = queue_.push(job.comm, job.data(grads));
  log_.push_back(job.index);
}

void GradSync::start(float* grads) {
  start_ready(grads, std::numeric_limits<std::int64_t>::min());
}

void GradSync::start_ready(float* grads, std::int64_t lowest_done_unit) {
  while (next_ < order_.size() && jobs_[order_[next_]].lowest_unit >= lowest_done_unit) {
    queue_next(grads);
  }
  // Called as the backward passes each unit: posts what the window has room for.
  queue_.progress();
}

void GradSync::start_through(float* grads, std::int64_t index) {
  auto last = std::find_if(order_.begin(), order_.end(),
                           [&](std::size_t j) { return jobs_[j].index == index; });
  ETH_CHECK(last != order_.end(), "GradSync::start_through: collective " +
                                      std::to_string(index) + " is not in the order");
  const auto through = static_cast<std::size_t>(last - order_.begin()) + 1;
  // Nothing left when it was posted early, during the last backward.
  while (next_ < through) queue_next(grads);
  queue_.progress();
}

void GradSync::finish(float* grads) {
  ETH_CHECK(next_ == order_.size(), "GradSync::finish before every collective was started");
  next_ = 0;
  for (std::size_t j : order_) {
    Job& job = jobs_[j];
    TraceScope trace(trace_, TraceKind::CollectiveWait, -1, job.index);
    queue_.wait(job.queued);
    job.unpack(grads);
  }
  queue_.wait_all();
  queue_.clear();
  // Replicated tensors were summed from each tp group's representative (tp rank 0); share its
  // result with the group, so every tp rank steps them with the same bits.
  for (Job& b : broadcasts_) {
    tp_comm_.broadcast(b.data(grads), 0);
    b.unpack(grads);
  }
}

double GradSync::bytes() const {
  double b = 0;
  for (const Job& job : jobs_) b += static_cast<double>(job.elements()) * sizeof(float);
  return b;
}

double GradSync::buffer_bytes() const {
  double n = 0;
  for (const auto* list : {&jobs_, &broadcasts_}) {
    for (const Job& job : *list) n += static_cast<double>(job.buffer.size());
  }
  return n;
}

double GradSync::bytes_copied() const {
  // Packing writes the whole buffer (zeros included) and unpacking reads the held runs back.
  double n = 0;
  for (const auto* list : {&jobs_, &broadcasts_}) {
    for (const Job& job : *list) {
      for (const PackRun& g : job.gaps) n += static_cast<double>(g.count);
      if (job.in_place()) continue;
      n += static_cast<double>(job.elements());
      for (const PackRun& r : job.runs) n += r.offset >= 0 ? static_cast<double>(r.count) : 0.0;
    }
  }
  return n * sizeof(float);
}

}  // namespace eth
