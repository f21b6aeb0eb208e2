// Rank coordinates and dp chunks. See placement.h.
#include "runtime/placement.h"


#include <algorithm>

#include "core/error.h"
#include "plan/blocks.h"
#include "plan/validate.h"

namespace eth {

std::vector<RankPlace> place_ranks(const Plan& plan) {
  const std::vector<std::int64_t> ids = plan.device_ids();
  std::vector<RankPlace> out(ids.size());
  std::vector<bool> seen(ids.size(), false);
  for (std::size_t p = 0; p < plan.pipelines.size(); ++p) {
    const PipelinePlan& pipe = plan.pipelines[p];
    for (std::size_t s = 0; s < pipe.stages.size(); ++s) {
      const StagePlan& st = pipe.stages[s];
      for (std::int64_t d = 0; d < st.dp; ++d) {
        for (std::int64_t t = 0; t < st.tp; ++t) {
          const std::int64_t dev = st.devices[static_cast<std::size_t>(d * st.tp + t)];
          const int r = rank_of_device(plan, dev);
          ETH_CHECK(!seen[static_cast<std::size_t>(r)], "device in two stages");
          seen[static_cast<std::size_t>(r)] = true;
          out[static_cast<std::size_t>(r)] = RankPlace{dev, static_cast<std::int64_t>(p),
                                                       static_cast<std::int64_t>(s), d, t};
        }
      }
    }
  }
  return out;
}

int rank_of_device(const Plan& plan, std::int64_t device) {
  const std::vector<std::int64_t> ids = plan.device_ids();
  auto it = std::lower_bound(ids.begin(), ids.end(), device);
  ETH_CHECK(it != ids.end() && *it == device, "device not in the plan");
  return static_cast<int>(it - ids.begin());
}

namespace {

// A tp group all-reduces inside every forward and backward, so its devices must share a node
// (a stage with span_nodes may spread its dp replicas, not a tp group), and it runs in lockstep,
// so one device type (validate_plan already holds every device to the stage's type).
void check_tp_groups(const Plan& plan, const ClusterSpec& cluster, const std::string& source,
                     std::vector<InputError>& errors) {
  for (std::size_t p = 0; p < plan.pipelines.size(); ++p) {
    const auto& stages = plan.pipelines[p].stages;
    for (std::size_t s = 0; s < stages.size(); ++s) {
      const StagePlan& st = stages[s];
      if (st.tp <= 1) continue;
      for (std::int64_t d = 0; d < st.dp; ++d) {
        const DeviceInfo first = cluster.device(stage_device(st, d, 0));
        for (std::int64_t t = 1; t < st.tp; ++t) {
          const std::int64_t id = stage_device(st, d, t);
          const DeviceInfo info = cluster.device(id);
          const std::string path = "pipelines[" + std::to_string(p) + "].stages[" +
                                   std::to_string(s) + "].devices[" +
                                   std::to_string(d * st.tp + t) + "]";
          if (info.node != first.node) {
            errors.push_back(InputError(
                "plan", source, path,
                "device " + std::to_string(id) + " is on node " + std::to_string(info.node) +
                    " but its tp group (dp replica " + std::to_string(d) + ", devices " +
                    std::to_string(stage_device(st, d, 0)) + ".." +
                    std::to_string(stage_device(st, d, st.tp - 1)) + ") starts on node " +
                    std::to_string(first.node) +
                    "; a tp group all-reduces in every forward and backward and must sit in one "
                    "node (span_nodes spreads dp replicas, not tp groups)"));
          } else if (info.device_type != first.device_type) {
            errors.push_back(InputError(
                "plan", source, path,
                "device " + std::to_string(id) + " has type " + info.device_type +
                    " but its tp group starts with a " + first.device_type +
                    "; a tp group runs in lockstep on one device type"));
          }
        }
      }
    }
  }
}

}  // namespace

void check_runnable(const Plan& plan, const ClusterSpec& cluster, int world_size,
                    const std::string& source, std::int64_t gbs) {
  std::vector<InputError> errors;
  for (const PlanViolation& v : validate_plan(plan, cluster)) {
    errors.push_back(InputError("plan", source, v.path, v.message));
  }
  if (errors.empty()) {
    if (plan.num_devices() != world_size) {
      errors.push_back(InputError("plan", source, "pipelines",
                            "the plan has " + std::to_string(plan.num_devices()) +
                                " devices but the run has " + std::to_string(world_size) +
                                " ranks; start one rank per device (eth launch does)"));
    }
    check_tp_groups(plan, cluster, source, errors);
  }
  if (plan.seq_len > plan.model.seq_len) {
    errors.push_back(InputError("plan", source, "seq_len",
                          "expected at most the model's " + std::to_string(plan.model.seq_len) +
                              ", got " + std::to_string(plan.seq_len)));
  }
  if (gbs > 0 && plan.gbs != gbs) {
    errors.push_back(InputError("plan", source, "gbs",
                          "the plan splits a global batch of " + std::to_string(plan.gbs) +
                              " but the run asks for " + std::to_string(gbs)));
  }
  if (!errors.empty()) throw InputErrors(errors);
}

Chunk dp_chunk(std::int64_t b, std::int64_t dp, std::int64_t r) {
  const std::int64_t begin = r * b / dp;
  return {begin, (r + 1) * b / dp - begin};
}

Chunk overlap(const Chunk& a, const Chunk& b) {
  const std::int64_t begin = std::max(a.begin, b.begin);
  const std::int64_t end = std::min(a.end(), b.end());
  return {begin, std::max<std::int64_t>(0, end - begin)};
}

}  // namespace eth
