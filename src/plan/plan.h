// The HPP plan (DESIGN.md section 2): several pipelines, each with its own micro-batch size,
// local batch and stages. Types and JSON only; the rules a plan must obey are in
// plan/validate.h, the cost of a plan in cost/.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cluster/cluster_spec.h"
#include "core/json_cursor.h"
#include "core/json_value.h"
#include "model/model_spec.h"
#include "model/recompute.h"

namespace eth {

inline constexpr const char* kPlanFormat = "eth-plan";
inline constexpr std::int64_t kPlanVersion = 1;

struct StagePlan {
  std::string device_type;
  std::vector<std::int64_t> devices;  // global device ids; tp * dp of them, tp-major groups
  std::int64_t tp = 1;
  std::int64_t dp = 1;
  std::int64_t first_unit = 0;  // inclusive
  std::int64_t last_unit = 0;   // inclusive
  RecomputeSet recompute;
  bool span_nodes = false;  // allow the stage's devices to sit in more than one node
  // Optional prediction carried in the file (written by the planner, ignored on input checks).
  std::optional<double> predicted_peak_memory_bytes;

  std::int64_t num_units() const { return last_unit - first_unit + 1; }
  bool operator==(const StagePlan&) const = default;
};

struct PipelinePlan {
  std::int64_t micro_batch_size = 1;  // m_p
  std::int64_t local_batch = 1;       // B_p
  std::vector<StagePlan> stages;

  // k_p = ceil(B_p / m_p); the last micro-batch holds B_p - (k_p - 1) * m_p samples.
  std::int64_t num_microbatches() const {
    return (local_batch + micro_batch_size - 1) / micro_batch_size;
  }
  std::int64_t last_microbatch_size() const {
    return local_batch - (num_microbatches() - 1) * micro_batch_size;
  }
  std::int64_t num_devices() const;
  bool operator==(const PipelinePlan&) const = default;
};

// Optimizer-state sharding (plan/sharding.h): none (every holder of a gradient block keeps the
// whole block's fp32 masters and Adam moments), even, or by each holder's free memory.
enum class OptimizerSharding : std::uint8_t { None, Even, Memory };

// The shard sizes of one block-wise gradient block (plan/blocks.h, aggregation_collectives in
// Block mode, same global order): holder i keeps elements [sum_{j<i} elements[j], + elements[i])
// of the block's element order.
struct BlockShards {
  std::vector<std::int64_t> holders;   // global device ids, ascending: the block's holders
  std::vector<std::int64_t> elements;  // one per holder, summing to the block's elements
  bool operator==(const BlockShards&) const = default;
};

struct Plan {
  ModelSpec model;
  bool model_is_preset = true;  // written back as the preset name when true
  std::int64_t gbs = 0;
  std::int64_t seq_len = 0;
  std::vector<PipelinePlan> pipelines;
  std::optional<ClusterSpec> cluster;  // optional: `--cluster` may supply it instead
  std::string schedule = "1f1b";
  OptimizerSharding optimizer_sharding = OptimizerSharding::None;  // absent in the file: None
  std::vector<BlockShards> optimizer_shards;  // one per block-wise block; empty for None
  JsonValue predicted;  // optional free-form predictions (null when absent)
  JsonValue search;     // optional search statistics from the planner (null when absent)

  std::int64_t num_devices() const;
  // Global device ids in ascending order (MPI rank i runs the i-th of these).
  std::vector<std::int64_t> device_ids() const;
  bool operator==(const Plan&) const = default;
};

// Parses the JSON form; structural problems (types, ranges, unknown fields) throw InputError
// naming `source` and the JSON path. Cross-field rules are left to validate_plan.
Plan parse_plan(const JsonCursor& c);
Json plan_to_json(const Plan& p);
Plan load_plan(const std::string& path);
void save_plan(const Plan& p, const std::string& path);  // atomic

}  // namespace eth
