// compute_stage_costs: the per-stage, per-micro-batch time and memory the predictor and the
// simulator share. Everything here is read off the profile and the model's parameter table;
// how stages combine into pipeline and iteration times is in predictor.cpp.
#include "cost/stage_costs.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "model/arithmetic.h"

namespace eth {

namespace {

// Profile lookups of one call, memoized: every pipeline asks for a handful of keys, and each
// lookup copies a whole entry.
class LookupCache {
 public:
  explicit LookupCache(const ProfileDb& db) : db_(db) {}
  const ProfileEntry& get(const std::string& type, std::int64_t tp, std::int64_t mbs) {
    ProfileKey key{type, tp, mbs};
    auto it = cache_.find(key);
    if (it == cache_.end()) it = cache_.emplace(key, db_.lookup(type, tp, mbs).entry).first;
    return it->second;
  }

 private:
  const ProfileDb& db_;
  std::map<ProfileKey, ProfileEntry> cache_;
};

// The busiest dp replica's share of a micro-batch of `mbs` samples.
std::int64_t largest_share(std::int64_t mbs, std::int64_t dp) { return (mbs + dp - 1) / dp; }

StageCost stage_cost(const Plan& plan, const ClusterSpec& cluster, const PipelinePlan& pipe,
                     std::size_t s, std::int64_t mbs, LookupCache& cache, double p2p_latency_ms) {
  const StagePlan& st = pipe.stages[s];
  StageCost c;
  c.share_mbs = largest_share(mbs, st.dp);
  const ProfileEntry& e = cache.get(st.device_type, st.tp, c.share_mbs);
  for (std::int64_t u = st.first_unit; u <= st.last_unit; ++u) {
    const UnitProfile& up = e.units[static_cast<std::size_t>(u)];
    const double bwd = up.backward_with_recompute_ms(st.recompute);
    c.unit_forward_ms.push_back(up.forward_ms);
    c.unit_backward_ms.push_back(bwd);
    c.forward_ms += up.forward_ms;
    c.backward_ms += bwd;
    c.activation_bytes += up.activation.held(st.recompute);
  }
  if (s + 1 < pipe.stages.size()) {
    // The whole micro-batch's hidden states in 16 bits, from the stage's last device to the next
    // stage's first (one message; the dp split of the receiving side is not modelled).
    c.send_bytes = static_cast<double>(mbs) * static_cast<double>(plan.seq_len) *
                   static_cast<double>(plan.model.hidden) * 2.0;
    const double bw = cluster.link_bytes_per_s(st.devices.back(), pipe.stages[s + 1].devices.front());
    c.send_ms = c.send_bytes / bw * 1e3 + p2p_latency_ms;
  }
  return c;
}

StageStaticMemory static_memory(const Plan& plan, const StagePlan& st, const ProfileEntry& full) {
  StageStaticMemory m;
  double params = 0;
  for (std::int64_t u = st.first_unit; u <= st.last_unit; ++u) {
    params += static_cast<double>(unit_params(plan.model, u, st.tp));
    const double act = full.units[static_cast<std::size_t>(u)].activation.total();
    m.workspace_bytes = std::max(m.workspace_bytes, act);
  }
  m.weight_bytes = 2.0 * params;
  m.gradient_bytes = 2.0 * params;
  m.optimizer_bytes = 12.0 * params;
  return m;
}

double stage_params(const Plan& plan, const StagePlan& st) {
  double params = 0;
  for (std::int64_t u = st.first_unit; u <= st.last_unit; ++u) {
    params += static_cast<double>(unit_params(plan.model, u, st.tp));
  }
  return params;
}

double optimizer_ms(const Plan& plan, const StagePlan& st, const ProfileEntry& e) {
  const double params = stage_params(plan, st);
  if (e.optimizer_ms > 0) {
    // The profile's figure is the whole model's step at this tp: take the stage's share.
    double model_params = 0;
    for (std::int64_t u = 0; u < plan.model.num_units(); ++u) {
      model_params += static_cast<double>(unit_params(plan.model, u, st.tp));
    }
    return e.optimizer_ms * params / model_params;
  }
  return 16.0 * params / kOptimizerBytesPerS * 1e3;
}

}  // namespace

std::vector<PipelineCosts> compute_stage_costs(const Plan& plan, const ClusterSpec& cluster,
                                               const ProfileDb& profile, double p2p_latency_ms) {
  ETH_CHECK(profile.model().num_units() == plan.model.num_units(),
            "profile and plan describe models with different unit counts");
  LookupCache cache(profile);
  std::vector<PipelineCosts> out;
  out.reserve(plan.pipelines.size());
  for (const PipelinePlan& pipe : plan.pipelines) {
    PipelineCosts pc;
    for (std::size_t s = 0; s < pipe.stages.size(); ++s) {
      const StagePlan& st = pipe.stages[s];
      ETH_CHECK(static_cast<std::int64_t>(st.devices.size()) == st.tp * st.dp,
                "stage device count must equal tp * dp");
      pc.full.push_back(
          stage_cost(plan, cluster, pipe, s, pipe.micro_batch_size, cache, p2p_latency_ms));
      pc.last.push_back(
          stage_cost(plan, cluster, pipe, s, pipe.last_microbatch_size(), cache, p2p_latency_ms));
      const ProfileEntry& full = cache.get(st.device_type, st.tp, pc.full.back().share_mbs);
      pc.memory.push_back(static_memory(plan, st, full));
      pc.optimizer_ms.push_back(optimizer_ms(plan, st, full));
    }
    out.push_back(std::move(pc));
  }
  return out;
}

}  // namespace eth
