// Sharded optimizer state: reduce-scatter, the shard's AdamW, all-gather. See sharded_optimizer.h.
#include "runtime/sharded_optimizer.h"

#include <algorithm>
#include <span>

#include "core/error.h"
#include "plan/sharding.h"
#include "runtime/placement.h"
#include "train/state_backend.h"

namespace eth {

namespace {

// Tags of the checkpoint gather (one communicator: the world; rank 0 names each source).
constexpr int kShardTagBase = 20000;

int mod(int a, int n) { return ((a % n) + n) % n; }

bool holds(const std::vector<std::int64_t>& holders, std::int64_t device) {
  return std::binary_search(holders.begin(), holders.end(), device);
}

}  // namespace

void check_sharding_runnable(const Plan& plan, const std::string& source) {
  if (plan.optimizer_sharding == OptimizerSharding::None) return;
  for (std::size_t p = 0; p < plan.pipelines.size(); ++p) {
    for (std::size_t s = 0; s < plan.pipelines[p].stages.size(); ++s) {
      const StagePlan& st = plan.pipelines[p].stages[s];
      if (st.tp == 1) continue;
      throw InputError("plan", source, "optimizer_sharding",
                       "the runtime shards the optimizer state of tp 1 stages only; "
                       "pipelines[" + std::to_string(p) + "].stages[" + std::to_string(s) +
                           "] has tp " + std::to_string(st.tp) +
                           " (plan it with --optimizer-sharding none, or without tp)");
    }
  }
}

std::int64_t shard_numel(const Plan& plan, std::int64_t device) {
  return shard_elements(plan, device);
}

ShardedOptimizer::ShardedOptimizer(const Plan& plan, AggregationMode mode,
                                   const Communicator& world, const ParamLayout& layout)
    : plan_(plan), mode_(mode), world_(world) {
  device_ = plan.device_ids()[static_cast<std::size_t>(world.rank())];
  const std::vector<GradBlock> blocks = aggregation_collectives(plan, AggregationMode::Block);
  ETH_CHECK(plan.optimizer_shards.size() == blocks.size(), "shares not one per gradient block");
  ETH_CHECK(layout.tp() == 1, "ShardedOptimizer: tp > 1 is not sharded");
  std::int64_t shard_at = 0;
  std::int64_t collective = -1;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const GradBlock& b = blocks[i];
    if (b.holders.size() >= 2) ++collective;
    if (!holds(b.holders, device_)) continue;
    const BlockShards& shares = plan.optimizer_shards[i];
    ETH_CHECK(shares.holders == b.holders, "shares of another block's holders");
    Slot slot;
    slot.index = static_cast<std::int64_t>(i);
    if (b.holders.size() >= 2) slot.collective = collective;
    slot.counts = shares.elements;
    std::int64_t at = 0;
    for (std::size_t k = 0; k < b.holders.size(); ++k) {
      if (b.holders[k] == device_) slot.me = static_cast<int>(k);
      slot.offsets.push_back(at);
      at += shares.elements[k];
    }
    ETH_CHECK(at == b.elements, "shares do not add up to the block");
    if (b.holders.size() >= 2) {
      // A group of its own even when it spans the world: the ring's point-to-point messages
      // must not meet the pipeline's on the world communicator.
      std::vector<int> ranks;
      for (std::int64_t d : b.holders) ranks.push_back(rank_of_device(plan, d));
      slot.comm = world.create_group(ranks);
    }
    const std::vector<PackRun> g = collective_runs(plan, layout, device_, b);
    ETH_CHECK(g.size() == 1 && g.front().offset >= 0 && g.front().count == b.elements,
              "a sharded block must be one range of the gradient buffer");
    slot.grad_offset = g.front().offset;
    // The block's parameters: one range too, in the gradients' element order (tp 1: no tensor
    // is cut), found through the layout's runs; the shard is its own slice of both.
    bool found = false;
    const std::int64_t mine_begin = slot.grad_offset + slot.offsets[static_cast<std::size_t>(slot.me)];
    const std::int64_t mine_end = mine_begin + slot.counts[static_cast<std::size_t>(slot.me)];
    slot.shard_offset = shard_at;
    slot.run_begin = runs_.size();
    for (const StateRun& r : layout.runs()) {
      const std::int64_t b0 = std::max(r.grad_offset, slot.grad_offset);
      const std::int64_t e0 = std::min(r.grad_offset + r.count, slot.grad_offset + b.elements);
      if (b0 >= e0) continue;
      const std::int64_t delta = r.param_offset - r.grad_offset;
      if (!found) slot.param_offset = slot.grad_offset + delta;
      ETH_CHECK(slot.param_offset - slot.grad_offset == delta,
                "a sharded block's parameters are not one range in its gradients' order");
      found = true;
      const std::int64_t b1 = std::max(b0, mine_begin), e1 = std::min(e0, mine_end);
      if (b1 >= e1) continue;
      runs_.push_back(ShardRun{b1 + delta, b1, shard_at, e1 - b1, r.decay});
      shard_at += e1 - b1;
    }
    ETH_CHECK(found, "a block with no parameters on its holder");
    slot.run_end = runs_.size();
    ETH_CHECK(shard_at - slot.shard_offset == slot.counts[static_cast<std::size_t>(slot.me)],
              "the shard's runs disagree with its share");
    slots_.push_back(std::move(slot));
  }
  ETH_CHECK(shard_at == shard_numel(plan, device_), "the shard runs disagree with shard_numel");
  if (reduces_gradients()) {
    scratch_.resize(static_cast<std::size_t>(largest_shard_of_groups(plan, device_)));
  }
}

void ShardedOptimizer::reduce_scatter(float* grads) {
  for (Slot& slot : slots_) ring_reduce_scatter(slot, grads);
}

bool ShardedOptimizer::joins(std::int64_t collective) const {
  return std::any_of(slots_.begin(), slots_.end(),
                     [&](const Slot& s) { return s.collective == collective; });
}

void ShardedOptimizer::reduce_scatter_block(float* grads, std::int64_t collective) {
  for (Slot& slot : slots_) {
    if (slot.collective == collective) ring_reduce_scatter(slot, grads);
  }
}

void ShardedOptimizer::ring_reduce_scatter(Slot& slot, float* grads) {
  // Ring: in pass s holder r sends chunk r-s-1 (what it has summed so far) to r+1 and adds what
  // r-1 sent of chunk r-s-2; after n-1 passes chunk r holds every holder's sum, added in the
  // fixed order r+1, r+2, ..., r (the same bits on every run).
  if (slot.comm.is_null()) return;
  const int n = static_cast<int>(slot.counts.size()), r = slot.me;
  float* x = grads + slot.grad_offset;
  for (int s = 0; s + 1 < n; ++s) {
    const auto sc = static_cast<std::size_t>(mod(r - s - 1, n));
    const auto rc = static_cast<std::size_t>(mod(r - s - 2, n));
    Request reqs[2];
    const std::int64_t rn = slot.counts[rc];
    if (rn > 0) {
      reqs[0] = slot.comm.irecv(std::span<float>(scratch_.data(), static_cast<std::size_t>(rn)),
                                mod(r - 1, n), 0);
    }
    if (slot.counts[sc] > 0) {
      reqs[1] = slot.comm.isend(
          std::span<const float>(x + slot.offsets[sc], static_cast<std::size_t>(slot.counts[sc])),
          mod(r + 1, n), 0);
    }
    wait_all(reqs);
    float* acc = x + slot.offsets[rc];
    for (std::int64_t k = 0; k < rn; ++k) acc[k] = scratch_[static_cast<std::size_t>(k)] + acc[k];
  }
}

double ShardedOptimizer::sum_squares(const ModelState& state) const {
  double sum = 0;
  for (const ShardRun& r : runs_) {
    sum += state.backend().sum_squares(state.grads() + r.grad_offset, r.count);
  }
  return sum;
}

void ShardedOptimizer::update(ModelState& state, const AdamWConfig& cfg, double lr,
                              std::int64_t step, double grad_scale) {
  const cpu::AdamWScalars sc = adamw_scalars(cfg, lr, step, grad_scale);
  const bool bf16 = state.params_bf16() != nullptr;
  for (const ShardRun& r : runs_) {
    // One run per call, the buffers' bases moved to the run: the shard buffers are compact,
    // the weights and gradients whole.
    const StateRun one{0, 0, r.count, r.decay};
    float* m = state.adam_m() + r.shard_offset;
    float* v = state.adam_v() + r.shard_offset;
    const float* g = state.grads() + r.grad_offset;
    if (bf16) {
      state.backend().adamw_update(state.params() + r.shard_offset,
                                   state.params_bf16() + r.param_offset, m, v, g,
                                   std::span<const StateRun>(&one, 1), sc, cfg.weight_decay);
    } else {
      state.backend().adamw_update(state.params() + r.param_offset, nullptr, m, v, g,
                                   std::span<const StateRun>(&one, 1), sc, cfg.weight_decay);
    }
  }
  all_gather(state);
}

void ShardedOptimizer::all_gather(ModelState& state) {
  // Ring: in pass s holder r passes chunk r-s (its own first, then what it received) to r+1 and
  // receives chunk r-s-1 from r-1, in place in the weights.
  const bool bf16 = state.params_bf16() != nullptr;
  const std::size_t esize = bf16 ? sizeof(Bf16) : sizeof(float);
  auto* base = bf16 ? reinterpret_cast<std::byte*>(state.params_bf16())
                    : reinterpret_cast<std::byte*>(state.params());
  for (Slot& slot : slots_) {
    if (slot.comm.is_null()) continue;
    const int n = static_cast<int>(slot.counts.size()), r = slot.me;
    std::byte* x = base + static_cast<std::size_t>(slot.param_offset) * esize;
    auto chunk = [&](std::size_t c) {
      return std::span<std::byte>(x + static_cast<std::size_t>(slot.offsets[c]) * esize,
                                  static_cast<std::size_t>(slot.counts[c]) * esize);
    };
    for (int s = 0; s + 1 < n; ++s) {
      const auto sc = static_cast<std::size_t>(mod(r - s, n));
      const auto rc = static_cast<std::size_t>(mod(r - s - 1, n));
      Request reqs[2];
      if (slot.counts[rc] > 0) reqs[0] = slot.comm.irecv_bytes(chunk(rc), mod(r - 1, n), 1);
      if (slot.counts[sc] > 0) reqs[1] = slot.comm.isend_bytes(chunk(sc), mod(r + 1, n), 1);
      wait_all(reqs);
    }
  }
}

void ShardedOptimizer::init(ModelState& state, std::uint64_t seed) const {
  StateBackend& be = state.backend();
  ETH_CHECK(be.host_visible(), "ShardedOptimizer::init: a host-visible kernel set");
  const bool bf16 = state.params_bf16() != nullptr;
  // In bf16 the whole fp32 weights exist only for a moment: drawn into the gradient buffer
  // (as large, unused until the first backward), rounded into the compute copy, the shard's
  // masters copied out. So no step ever holds more than the sharded state.
  float* whole = bf16 ? state.grads() : state.params();
  for (const UnitSlot& s : state.layout().units()) init_unit_params(whole, state.model(), s, seed);
  if (bf16) {
    be.convert_to_bf16(state.params_bf16(), whole, state.numel());
    for (const ShardRun& r : runs_) {
      std::copy_n(whole + r.param_offset, r.count, state.params() + r.shard_offset);
    }
  }
  be.zero(state.grads(), state.layout().grad_numel());
  be.zero(state.adam_m(), state.optimizer_numel());
  be.zero(state.adam_v(), state.optimizer_numel());
}

void ShardedOptimizer::take_whole(ModelState& state, const ModelState& whole) const {
  ETH_CHECK(!whole.sharded() && whole.numel() == state.numel(), "take_whole: not a whole state");
  ETH_CHECK(state.backend().host_visible() && whole.backend().host_visible(),
            "take_whole: host-visible kernel sets");
  const bool bf16 = state.params_bf16() != nullptr;
  if (bf16) {
    state.backend().convert_to_bf16(state.params_bf16(), whole.params(), state.numel());
  } else {
    std::copy_n(whole.params(), state.numel(), state.params());
  }
  for (const ShardRun& r : runs_) {
    if (bf16) std::copy_n(whole.params() + r.param_offset, r.count, state.params() + r.shard_offset);
    std::copy_n(whole.adam_m() + r.param_offset, r.count, state.adam_m() + r.shard_offset);
    std::copy_n(whole.adam_v() + r.param_offset, r.count, state.adam_v() + r.shard_offset);
  }
}

std::optional<ModelState> ShardedOptimizer::gather_whole(const ModelState& state, bool moments,
                                                         Precision precision) const {
  const int parts = moments ? 3 : 1;
  const bool bf16 = state.params_bf16() != nullptr;
  ETH_CHECK(kShardTagBase + 3 * static_cast<std::int64_t>(plan_.optimizer_shards.size()) <=
                Communicator::kMaxTag,
            "too many gradient blocks for the checkpoint tags");
  // This rank's shard of each block it holds, compact: masters, then m and v.
  auto pack = [&](const Slot& slot) {
    std::vector<std::vector<float>> out(static_cast<std::size_t>(parts));
    const auto count = static_cast<std::size_t>(slot.counts[static_cast<std::size_t>(slot.me)]);
    if (bf16) {
      out[0].assign(state.params() + slot.shard_offset, state.params() + slot.shard_offset + count);
    } else {
      for (std::size_t k = slot.run_begin; k < slot.run_end; ++k) {
        const float* p = state.params() + runs_[k].param_offset;
        out[0].insert(out[0].end(), p, p + runs_[k].count);
      }
    }
    if (moments) {
      out[1].assign(state.adam_m() + slot.shard_offset, state.adam_m() + slot.shard_offset + count);
      out[2].assign(state.adam_v() + slot.shard_offset, state.adam_v() + slot.shard_offset + count);
    }
    return out;
  };
  const int me = world_.rank();
  std::vector<std::vector<float>> outgoing;
  std::vector<Request> sends;
  std::vector<std::vector<std::vector<float>>> own(plan_.optimizer_shards.size());
  for (const Slot& slot : slots_) {
    if (slot.counts[static_cast<std::size_t>(slot.me)] == 0) continue;
    std::vector<std::vector<float>> shard = pack(slot);
    if (me == 0) {
      own[static_cast<std::size_t>(slot.index)] = std::move(shard);
      continue;
    }
    for (int p = 0; p < parts; ++p) outgoing.push_back(std::move(shard[static_cast<std::size_t>(p)]));
    for (int p = 0; p < parts; ++p) {
      const std::vector<float>& v = outgoing[outgoing.size() - static_cast<std::size_t>(parts - p)];
      sends.push_back(world_.isend(std::span<const float>(v), 0,
                                   kShardTagBase + 3 * static_cast<int>(slot.index) + p));
    }
  }
  std::optional<ModelState> whole;
  if (me == 0) {
    const std::int64_t U = plan_.model.num_units();
    ModelState& full = whole.emplace(plan_.model, 0, U - 1, 1, 0, precision);
    float* dst[3] = {full.params(), full.adam_m(), full.adam_v()};
    const std::vector<GradBlock> blocks = aggregation_collectives(plan_, AggregationMode::Block);
    std::vector<float> got[3];
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      // The block's elements in its canonical order, as runs of the whole unit-major state.
      std::vector<PackRun> at;
      for (const GradPiece& piece : blocks[i].pieces) {
        for (const PackRun& r : piece_runs(plan_.model, full.layout(), piece)) at.push_back(r);
      }
      const BlockShards& shares = plan_.optimizer_shards[i];
      std::int64_t offset = 0;
      for (std::size_t k = 0; k < shares.holders.size(); ++k) {
        const std::int64_t count = shares.elements[k];
        if (count == 0) continue;
        const int src = rank_of_device(plan_, shares.holders[k]);
        for (int p = 0; p < parts; ++p) {
          auto& buf = got[p];
          if (src == 0) {
            buf = own[i][static_cast<std::size_t>(p)];
          } else {
            buf.resize(static_cast<std::size_t>(count));
            world_.recv(std::span<float>(buf), src, kShardTagBase + 3 * static_cast<int>(i) + p);
          }
        }
        // Elements [offset, offset + count) of the block, run by run.
        std::int64_t pos = 0;  // element index in the block of the current run's start
        for (const PackRun& r : at) {
          const std::int64_t b0 = std::max(pos, offset), e0 = std::min(pos + r.count, offset + count);
          if (b0 < e0) {
            for (int p = 0; p < parts; ++p) {
              std::copy_n(got[p].data() + (b0 - offset), e0 - b0, dst[p] + r.offset + (b0 - pos));
            }
          }
          pos += r.count;
        }
        offset += count;
      }
    }
    full.refresh_compute_copy();
  }
  wait_all(sends);
  return whole;
}

}  // namespace eth
