// The ETH planner and its baselines (DESIGN.md section 4, docs/planner.md): finds an HPP plan for
// a model on a cluster from a profile, and prices it with cost/predictor.h so the planner and
// `eth simulate` agree. Pure and deterministic: no clock, no I/O; the caller times the search.
//
// How to use:
//   PlannerResult r = plan_training(PlanMethod::Eth, model, cluster, profile, gbs, seq, {});
//   r.plan is a valid plan (plan/validate.h) whose every device fits its memory under the
//   predictor; r.prediction is its prediction; r.stats says what the search did.
// Throws InputError for bad options and when no plan fits memory (the message names the first
// device that overflows in the least-bad candidate and by how much).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/cluster_spec.h"
#include "cost/predictor.h"
#include "plan/plan.h"
#include "profile/profile.h"

namespace eth {

enum class PlanMethod : std::uint8_t { Eth, Layer, Uniform };
std::string_view plan_method_name(PlanMethod m);  // "eth", "layer", "uniform"
std::optional<PlanMethod> parse_plan_method(std::string_view name);

// Every knob, with its exact meaning in docs/planner.md.
struct PlannerOptions {
  std::vector<std::int64_t> micro_batch_sizes{1, 2, 4, 8, 16};  // candidate m_p
  std::vector<std::int64_t> tp{1, 2, 4, 8};                     // candidate tp per stage
  std::int64_t max_pipelines = 0;                               // 0: at most gbs pipelines
  double alpha = 0.0;             // SES tolerance: skip when bound >= best * (1 - alpha)
  std::optional<double> v_inter;  // skip partitions whose per-sample times differ more
  std::optional<double> v_intra;  // drop template options whose bottleneck exceeds the mean more
  bool cpc = true;                // cache unit splits by (template, micro-batch size)
  bool ses = true;                // early skipping by the lower bound
  bool oso = true;                // visit partitions in increasing lower bound
  bool dpo = true;         // dynamic program for the unit split (false: enumerate every split)
  // With SES: apply the bound while generating (sub-products of pure options that cannot beat
  // the k-th best are counted, never built) and run a small first batch for an early
  // incumbent. Same plan either way at alpha 0; false is the search before issue 29, kept for
  // plan_scale_bench's comparison.
  bool bound_generation = true;
  std::int64_t top_k = 8;  // best candidates (by the search's own objective) priced by predict()
  double max_enumerated_splits = 2e6;  // without DPO: templates with more splits are refused
  // The most partitions the eth search builds and bounds (those failing the memory floor are
  // counted without being built). Bounds the search's time on any cluster (docs/planner.md,
  // "Scale"); when it binds, the plan is the best of the partitions visited and
  // SearchStats::limits says so.
  std::int64_t max_partitions = 3'000'000;
  // The layer baseline's stages choose only between no recompute and full recompute (Metis and
  // HexiScale have no operator-level recompute); true gives it eth's per-stage operator sets.
  bool layer_operator_recompute = false;
  // eth only: search the pure family alone (every pipeline on one device type; no mixed or
  // layer shapes). The paper's TypeSplit-HPP baseline (Fig. 11d).
  bool pure_only = false;
  // Shard each gradient block's optimizer state across its holders (plan/sharding.h): the
  // search charges each holder its share and the reduce-scatter's buffer
  // (search/cost_tables.h), so it finds the plans the freed memory allows; the plan carries
  // the shares. None (the default): today's search and plans.
  OptimizerSharding optimizer_sharding = OptimizerSharding::None;
};

struct SearchStats {
  std::int64_t generated = 0;  // candidate partitions (or baseline shapes) generated
  std::int64_t evaluated = 0;  // candidates whose objective was computed
  std::map<std::string, std::int64_t> skipped;  // candidates dropped, by reason
  std::int64_t cache_hits = 0;                  // unit splits answered from the CPC cache
  std::int64_t unit_splits = 0;  // unit splits computed (dynamic program or enumeration)
  // Template options (template, micro-batch size) refused, by reason.
  std::map<std::string, std::int64_t> rejected_options;
  std::int64_t predicted = 0;  // finalists priced by the predictor
  // Search limits that cut the search short, with their values ("max_partitions").
  std::map<std::string, std::int64_t> limits;
  std::int64_t skipped_total() const;
  Json to_json() const;  // "seconds" is the caller's to add
};

struct PlannerResult {
  PlanMethod method = PlanMethod::Eth;
  Plan plan;  // plan.predicted and plan.search filled; stages carry predicted peak bytes
  Prediction prediction;
  SearchStats stats;
  double objective_ms = 0;       // the search's own estimate of the plan: max_p T_p
  double best_objective_ms = 0;  // the smallest objective the search found (any candidate)
  std::string family;            // "pure", "mixed", "layer" or "uniform"
  std::int64_t idle_devices = 0;
};

PlannerResult plan_training(PlanMethod method, const ModelSpec& model, const ClusterSpec& cluster,
                            const ProfileDb& profile, std::int64_t gbs, std::int64_t seq_len,
                            const PlannerOptions& options);

}  // namespace eth
