// compute_stage_costs: the per-stage, per-micro-batch time and memory the predictor and the
// simulator share. Everything here is read off the profile and the model's parameter table;
// how stages combine into pipeline and iteration times is in predictor.cpp.
#include "cost/stage_costs.h"

#include <algorithm>
#include <array>
#include <map>
#include <span>
#include <string>
#include <tuple>

#include "core/error.h"
#include "plan/blocks.h"
#include "plan/sharding.h"
#include "model/arithmetic.h"

namespace eth {

namespace {

// Per-row statistics (layer-norm mean and rstd, loss statistics) are fp32 in every precision.
constexpr double kStatBytes = 4;

// Profile lookups of one call, memoized: every pipeline asks for a handful of keys, and each
// lookup copies a whole entry.
class LookupCache {
 public:
  explicit LookupCache(const ProfileDb& db) : db_(db) {}
  const ProfileEntry& get(const std::string& type, std::int64_t tp, std::int64_t mbs) {
    // Neighbouring stages mostly ask for the same key: the last answer first.
    if (last_ != nullptr && last_key_->tp == tp && last_key_->mbs == mbs &&
        last_key_->device_type == type) {
      return *last_;
    }
    ProfileKey key{type, tp, mbs};
    auto it = cache_.find(key);
    if (it == cache_.end()) it = cache_.emplace(key, db_.lookup(type, tp, mbs).entry).first;
    last_key_ = &it->first;
    last_ = &it->second;
    return it->second;
  }

 private:
  const ProfileDb& db_;
  std::map<ProfileKey, ProfileEntry> cache_;
  const ProfileKey* last_key_ = nullptr;
  const ProfileEntry* last_ = nullptr;
};

// The busiest dp replica's share of a micro-batch of `mbs` samples.
std::int64_t largest_share(std::int64_t mbs, std::int64_t dp) { return (mbs + dp - 1) / dp; }

// Time to move one micro-batch of `mbs` samples across the boundary from stage `a` to stage `b`,
// as the runtime sends it. Each dp replica holds a contiguous chunk (replica r of dp: samples
// [r*mbs/dp, (r+1)*mbs/dp)), so replica i of `a` sends replica j of `b` the samples their chunks
// share; every tp rank t of j receives them whole, from i's tp rank t mod a.tp. Each message
// crosses the link between its two devices, intra-node or inter-node, whichever they are. One
// device's messages go one after another, different devices' at once: the busiest sender or
// receiver sets the time. dp 1, tp 1 on both sides is one message.
double boundary_ms(const ClusterIndex& cluster, const StagePlan& a, const StagePlan& b,
                   std::int64_t mbs, double sample_bytes, double p2p_latency_ms) {
  // Per device, by its place in its stage's list (a stage's devices are distinct:
  // validate_plan), so each device's messages add in the same order as they are sent.
  // On the stack for the usual small stages: this runs twice per stage of every finalist.
  constexpr std::size_t kSmall = 32;
  std::array<double, kSmall> out_small{}, in_small{};
  std::vector<double> out_big, in_big;
  const std::span<double> out =
      a.devices.size() <= kSmall ? std::span<double>(out_small.data(), a.devices.size())
                                 : (out_big.assign(a.devices.size(), 0.0), std::span<double>(out_big));
  const std::span<double> in =
      b.devices.size() <= kSmall ? std::span<double>(in_small.data(), b.devices.size())
                                 : (in_big.assign(b.devices.size(), 0.0), std::span<double>(in_big));
  for (std::int64_t i = 0; i < a.dp; ++i) {
    for (std::int64_t j = 0; j < b.dp; ++j) {
      const std::int64_t lo = std::max(i * mbs / a.dp, j * mbs / b.dp);
      const std::int64_t hi = std::min((i + 1) * mbs / a.dp, (j + 1) * mbs / b.dp);
      if (hi <= lo) continue;
      for (std::int64_t t = 0; t < b.tp; ++t) {
        const std::int64_t from = stage_device(a, i, t % a.tp), to = stage_device(b, j, t);
        const double ms = static_cast<double>(hi - lo) * sample_bytes /
                              cluster.link_bytes_per_s(from, to) * 1e3 +
                          p2p_latency_ms;
        out[static_cast<std::size_t>(i * a.tp + t % a.tp)] += ms;
        in[static_cast<std::size_t>(j * b.tp + t)] += ms;
      }
    }
  }
  double worst = 0;
  for (const double ms : out) worst = std::max(worst, ms);
  for (const double ms : in) worst = std::max(worst, ms);
  return worst;
}

// The unit loop of stage_cost (everything but the send), which depends only on the profile
// entry, the unit range and the recompute set: memoized per call, since a plan at 10,000
// devices repeats a handful of stage shapes thousands of times.
class UnitCostCache {
 public:
  const StageCost& get(const ProfileEntry& e, const StagePlan& st) {
    auto [it, inserted] =
        cache_.try_emplace(Key{&e, st.first_unit, st.last_unit, st.recompute.bits()});
    StageCost& c = it->second;
    if (!inserted) return c;
    for (std::int64_t u = st.first_unit; u <= st.last_unit; ++u) {
      const UnitProfile& up = e.units[static_cast<std::size_t>(u)];
      const double bwd = up.backward_with_recompute_ms(st.recompute);
      c.unit_forward_ms.push_back(up.forward_ms);
      c.unit_backward_ms.push_back(bwd);
      c.forward_ms += up.forward_ms;
      c.backward_ms += bwd;
      c.activation_bytes += up.activation.held(st.recompute);
    }
    return c;
  }

 private:
  using Key = std::tuple<const ProfileEntry*, std::int64_t, std::int64_t, std::uint8_t>;
  std::map<Key, StageCost> cache_;
};

StageCost stage_cost(const Plan& plan, const ClusterIndex& cluster, const PipelinePlan& pipe,
                     std::size_t s, std::int64_t mbs, LookupCache& cache,
                     UnitCostCache& unit_costs, double p2p_latency_ms, double element_bytes) {
  const StagePlan& st = pipe.stages[s];
  const std::int64_t share_mbs = largest_share(mbs, st.dp);
  StageCost c = unit_costs.get(cache.get(st.device_type, st.tp, share_mbs), st);
  c.share_mbs = share_mbs;
  if (s + 1 < pipe.stages.size()) {
    // The whole micro-batch's hidden states (element_bytes each).
    const double sample_bytes = static_cast<double>(plan.seq_len) *
                                static_cast<double>(plan.model.hidden) * element_bytes;
    c.send_bytes = static_cast<double>(mbs) * sample_bytes;
    c.send_ms = boundary_ms(cluster, st, pipe.stages[s + 1], mbs, sample_bytes, p2p_latency_ms);
  }
  return c;
}

// Parameters per tp rank of every unit, per tp degree, computed once per compute_stage_costs
// call (unit_params builds the unit's tensor list on every call).
class ParamCache {
 public:
  explicit ParamCache(const ModelSpec& m) : model_(m) {}
  double unit(std::int64_t u, std::int64_t tp) {
    return row(tp).per_unit[static_cast<std::size_t>(u)];
  }
  double model(std::int64_t tp) { return row(tp).total; }

 private:
  struct Row {
    std::vector<double> per_unit;
    double total = 0;
  };
  Row& row(std::int64_t tp) {
    auto [it, inserted] = rows_.try_emplace(tp);
    if (inserted) {
      for (std::int64_t u = 0; u < model_.num_units(); ++u) {
        it->second.per_unit.push_back(static_cast<double>(unit_params(model_, u, tp)));
        it->second.total += it->second.per_unit.back();
      }
    }
    return it->second;
  }
  const ModelSpec& model_;
  std::map<std::int64_t, Row> rows_;
};

StageStaticMemory static_memory(const ModelSpec& model, std::int64_t seq, const StagePlan& st,
                                const ProfileEntry& full, ParamCache& params_of) {
  const PrecisionBytes per = precision_bytes(full.precision);
  StageStaticMemory m;
  double params = 0;
  for (std::int64_t u = st.first_unit; u <= st.last_unit; ++u) params += params_of.unit(u, st.tp);
  m.weight_bytes = per.weights * params;
  m.gradient_bytes = per.gradients * params;
  m.optimizer_bytes = per.optimizer_state * params;
  m.workspace_bytes =
      stage_workspace_bytes(model, full, seq, st.first_unit, st.last_unit, st.recompute);
  m.baseline_bytes = full.process_baseline_bytes;
  return m;
}

double optimizer_ms(const StagePlan& st, const ProfileEntry& e, ParamCache& params_of) {
  double params = 0;
  for (std::int64_t u = st.first_unit; u <= st.last_unit; ++u) params += params_of.unit(u, st.tp);
  if (e.optimizer_ms > 0) {
    // The profile's figure is the whole model's step at this tp: take the stage's share.
    return e.optimizer_ms * params / params_of.model(st.tp);
  }
  return precision_bytes(e.precision).per_parameter() * params / kOptimizerBytesPerS * 1e3;
}

// static_memory and optimizer_ms of a stage shape (profile entry, tp, unit range, recompute
// set), memoized per call like UnitCostCache.
class StaticCache {
 public:
  struct Part {
    StageStaticMemory memory;
    double optimizer_ms = 0;
  };
  StaticCache(const ModelSpec& model, std::int64_t seq, ParamCache& params_of)
      : model_(model), seq_(seq), params_of_(params_of) {}
  const Part& get(const ProfileEntry& full, const StagePlan& st) {
    auto [it, inserted] = cache_.try_emplace(
        Key{&full, st.tp, st.first_unit, st.last_unit, st.recompute.bits()});
    if (inserted) {
      it->second.memory = static_memory(model_, seq_, st, full, params_of_);
      it->second.optimizer_ms = optimizer_ms(st, full, params_of_);
    }
    return it->second;
  }

 private:
  using Key =
      std::tuple<const ProfileEntry*, std::int64_t, std::int64_t, std::int64_t, std::uint8_t>;
  const ModelSpec& model_;
  std::int64_t seq_;
  ParamCache& params_of_;
  std::map<Key, Part> cache_;
};

}  // namespace

UnitMix unit_mix(const ModelSpec& m, std::int64_t first_unit, std::int64_t last_unit) {
  UnitMix mix;
  for (std::int64_t u = first_unit; u <= last_unit; ++u) {
    switch (unit_kind(m, u)) {
      case UnitKind::Embedding:
        mix.embedding = true;
        break;
      case UnitKind::Block:
        mix.block = true;
        break;
      case UnitKind::Head:
        mix.head = true;
        break;
    }
  }
  mix.several = last_unit > first_unit;
  return mix;
}

double transient_workspace_bytes(const ModelSpec& m, const UnitMix& mix, std::int64_t mbs,
                                 std::int64_t seq, std::int64_t tp, Precision p, bool dropout) {
  const PrecisionBytes bytes = precision_bytes(p);
  const double R = bytes.activation;
  const double N = static_cast<double>(mbs) * static_cast<double>(seq);
  const double C = static_cast<double>(m.hidden);
  // The rank's q/k/v projection rows (3 hidden / tp without grouped-query attention) and MLP
  // input-projection outputs (GELU's ffn / tp; SwiGLU's gate and up, 2 ffn / tp).
  const double QKV = static_cast<double>(qkv_rows(m) / tp);
  const double F = static_cast<double>(mlp_up_rows(m) / tp);
  const double NH = static_cast<double>(m.heads / tp), T = static_cast<double>(seq);
  double elements = 0;  // of R bytes
  if (mix.block) {
    elements += 3 * N * C + N * F + N * QKV + static_cast<double>(mbs) * NH * T * T;
  }
  if (mix.block || (mix.embedding && dropout)) elements += N * C;  // branch gradient
  if (mix.block || mix.head) elements += N * C;                    // layer-norm gradient
  if (mix.several) elements += 2 * N * C;                          // residual gradients
  double out = elements * R;
  if (mix.head && tp > 1) out += 3 * N * kStatBytes;  // the vocabulary-parallel loss statistics
  if (tp > 1 && bytes.tp_element != bytes.activation) out += N * C * bytes.tp_element;
  return out;
}

double unit_workspace_bound_bytes(const ModelSpec& m, std::int64_t unit, std::int64_t mbs,
                                  std::int64_t seq, std::int64_t tp, Precision p, bool dropout) {
  UnitMix mix = unit_mix(m, unit, unit);
  mix.several = true;
  double bytes = transient_workspace_bytes(m, mix, mbs, seq, tp, p, dropout);
  if (tp > 1 && !mix.head) bytes += 3.0 * static_cast<double>(mbs * seq) * kStatBytes;
  return bytes;
}

double recompute_copy_bytes(const ModelSpec& m, const std::vector<UnitProfile>& units,
                            std::int64_t first_unit, std::int64_t last_unit,
                            const RecomputeSet& rc) {
  std::array<double, 3> per_kind{};  // embedding, block, head
  for (std::int64_t u = first_unit; u <= last_unit; ++u) {
    const ActivationBytes& a = units[static_cast<std::size_t>(u)].activation;
    double& k = per_kind[static_cast<std::size_t>(unit_kind(m, u))];
    k = std::max(k, a.total() - a.held(rc));
  }
  return per_kind[0] + per_kind[1] + per_kind[2];
}

bool profile_has_dropout(const ProfileEntry& e) {
  const ActivationBytes& emb = e.units.front().activation;
  return emb.total() > emb.unit_input;
}

double stage_workspace_bytes(const ModelSpec& m, const ProfileEntry& e, std::int64_t seq,
                             std::int64_t first_unit, std::int64_t last_unit,
                             const RecomputeSet& rc) {
  return transient_workspace_bytes(m, unit_mix(m, first_unit, last_unit), e.key.mbs, seq,
                                   e.key.tp, e.precision, profile_has_dropout(e)) +
         recompute_copy_bytes(m, e.units, first_unit, last_unit, rc);
}

double collective_buffer_bytes(Precision p, double window_bytes, double fed_bytes) {
  if (!runtime_precision(p)) return 0;
  return std::min(window_bytes, fed_bytes);
}

std::int64_t gradient_sends_in_flight(const std::string& schedule, std::int64_t num_microbatches) {
  return schedule == "gpipe" ? num_microbatches : std::min<std::int64_t>(2, num_microbatches);
}

double message_buffer_bytes(std::int64_t stage, std::int64_t num_stages, std::int64_t in_flight,
                            std::int64_t gradient_sends, std::int64_t share_mbs,
                            double sample_bytes) {
  std::int64_t buffers = 0;
  if (stage > 0) buffers += 1 + gradient_sends;  // input activation received; gradients sent
  if (stage + 1 < num_stages) buffers += 1 + in_flight;  // output gradient; activations sent
  return static_cast<double>(buffers * share_mbs) * sample_bytes;
}

Precision plan_precision(const Plan& plan, const ProfileDb& profile,
                         std::optional<Precision> wanted) {
  std::optional<Precision> found;
  const std::string* found_type = nullptr;
  // A (type, tp) pair seen before passes its checks again and leaves `found` as it is (every
  // entry checked so far shares one precision), so each pair's entries are scanned once; a
  // repeat only moves found_type, which the next mismatch's message names. Plans at 10,000
  // devices have thousands of stages of a handful of pairs.
  struct Pair {
    const std::string* type;
    std::int64_t tp;
    bool matched;
  };
  std::vector<Pair> seen;
  for (const PipelinePlan& pipe : plan.pipelines) {
    for (const StagePlan& st : pipe.stages) {
      const auto repeat = std::find_if(seen.begin(), seen.end(), [&](const Pair& p) {
        return p.tp == st.tp && *p.type == st.device_type;
      });
      if (repeat != seen.end()) {
        if (repeat->matched) found_type = &st.device_type;
        continue;
      }
      bool matched = false;
      for (const auto& [key, e] : profile.entries()) {
        if (key.device_type != st.device_type || key.tp != st.tp) continue;
        const std::string name(precision_name(e.precision));
        if (wanted && e.precision != *wanted) {
          throw InputError("profile", key.device_type, "precision",
                           "the profile of device type " + key.device_type + " (tp " +
                               std::to_string(key.tp) + ", mbs " + std::to_string(key.mbs) +
                               ") was measured in " + name + ", but the run trains in " +
                               std::string(precision_name(*wanted)) +
                               ": measure it with --precision " +
                               std::string(precision_name(*wanted)));
        }
        if (found && *found != e.precision) {
          throw InputError("profile", key.device_type, "precision",
                           "device type " + key.device_type + " was profiled in " + name +
                               " but " + *found_type + " in " +
                               std::string(precision_name(*found)) +
                               "; one run trains in one precision");
        }
        found = e.precision;
        found_type = &key.device_type;
        matched = true;
      }
      seen.push_back(Pair{&st.device_type, st.tp, matched});
    }
  }
  // Without entries compute_stage_costs throws its own error naming the missing key.
  return wanted ? *wanted : found.value_or(Precision::Mixed16);
}

std::int64_t stage_in_flight(const std::string& schedule, std::int64_t stage,
                             std::int64_t num_stages, std::int64_t num_microbatches) {
  if (schedule == "gpipe") return num_microbatches;
  return std::min(num_stages - stage, num_microbatches);
}

std::vector<PipelineCosts> compute_stage_costs(const Plan& plan, const ClusterSpec& cluster,
                                               const ProfileDb& profile, double p2p_latency_ms,
                                               std::optional<Precision> precision,
                                               AggregationMode aggregation,
                                               double collective_window_bytes) {
  ETH_CHECK(profile.model().num_units() == plan.model.num_units(),
            "profile and plan describe models with different unit counts");
  const Precision run_precision = plan_precision(plan, profile, precision);
  const PrecisionBytes run_bytes = precision_bytes(run_precision);
  const double element_bytes = run_bytes.activation;
  LookupCache cache(profile);
  UnitCostCache unit_costs;
  ParamCache params_of(plan.model);
  StaticCache statics(plan.model, plan.seq_len, params_of);
  const ClusterIndex index(cluster);
  // Per device, the collective temporaries it holds: per holder group of two or more (one
  // communicator each, with a window of its own) the gradient bytes it feeds, capped by the
  // window (only the runtime's precisions hold any: collective_buffer_bytes).
  std::vector<double> temporaries(static_cast<std::size_t>(index.num_devices()), 0.0);
  if (runtime_precision(run_precision)) {
    std::map<std::vector<std::int64_t>, std::map<std::int64_t, double>> fed;  // group, device
    for (const GradBlock& b : aggregation_collectives(plan, aggregation)) {
      if (b.holders.size() < 2) continue;
      auto& group = fed[b.holders];
      for (std::int64_t h : b.holders) {
        group[h] += static_cast<double>(b.elements) * run_bytes.gradient_element;
      }
    }
    for (const auto& [holders, per_device] : fed) {
      for (const auto& [device, bytes] : per_device) {
        temporaries[static_cast<std::size_t>(device)] +=
            collective_buffer_bytes(run_precision, collective_window_bytes, bytes);
      }
    }
  }
  std::vector<PipelineCosts> out;
  out.reserve(plan.pipelines.size());
  for (const PipelinePlan& pipe : plan.pipelines) {
    PipelineCosts pc;
    pc.full.reserve(pipe.stages.size());
    pc.last.reserve(pipe.stages.size());
    pc.memory.reserve(pipe.stages.size());
    pc.optimizer_ms.reserve(pipe.stages.size());
    for (std::size_t s = 0; s < pipe.stages.size(); ++s) {
      const StagePlan& st = pipe.stages[s];
      ETH_CHECK(static_cast<std::int64_t>(st.devices.size()) == st.tp * st.dp,
                "stage device count must equal tp * dp");
      pc.full.push_back(stage_cost(plan, index, pipe, s, pipe.micro_batch_size, cache,
                                   unit_costs, p2p_latency_ms, element_bytes));
      // A last micro-batch as large as the others costs the same (the same call's result).
      if (pipe.last_microbatch_size() == pipe.micro_batch_size) {
        pc.last.push_back(pc.full.back());
      } else {
        pc.last.push_back(stage_cost(plan, index, pipe, s, pipe.last_microbatch_size(), cache,
                                     unit_costs, p2p_latency_ms, element_bytes));
      }
      pc.last.back().activation_bytes = pc.full.back().activation_bytes;  // a full slot
      const ProfileEntry& full = cache.get(st.device_type, st.tp, pc.full.back().share_mbs);
      const StaticCache::Part& shape = statics.get(full, st);
      StageStaticMemory mem = shape.memory;
      const auto S = static_cast<std::int64_t>(pipe.stages.size());
      const auto stage = static_cast<std::int64_t>(s);
      mem.message_bytes = message_buffer_bytes(
          stage, S, stage_in_flight(plan.schedule, stage, S, pipe.num_microbatches()),
          gradient_sends_in_flight(plan.schedule, pipe.num_microbatches()),
          pc.full.back().share_mbs,
          static_cast<double>(plan.seq_len) * static_cast<double>(plan.model.hidden) *
              element_bytes);
      // The stage's devices hold alike up to tp shards: the largest.
      for (std::int64_t d : st.devices) {
        mem.collective_bytes =
            std::max(mem.collective_bytes, temporaries[static_cast<std::size_t>(d)]);
      }
      pc.memory.push_back(mem);
      double step = shape.optimizer_ms;
      if (plan.optimizer_sharding != OptimizerSharding::None) {
        // Sharded, a holder steps only its shards: the stage waits for its largest.
        double params = 0, largest = 0;
        for (std::int64_t u = st.first_unit; u <= st.last_unit; ++u) {
          params += params_of.unit(u, st.tp);
        }
        for (std::int64_t d : st.devices) {
          largest = std::max(largest, static_cast<double>(shard_elements(plan, d)));
        }
        if (params > 0) step *= std::min(1.0, largest / params);
      }
      pc.optimizer_ms.push_back(step);
    }
    out.push_back(std::move(pc));
  }
  return out;
}

}  // namespace eth
