// Internal to search/: the state one planner run shares (inputs, cost tables, the cluster's
// types, statistics) and the candidate form every method hands to the final pricing step.
// Not a public API: planner.h is.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "search/cost_tables.h"
#include "search/partition.h"
#include "search/planner.h"
#include "search/unit_split.h"

namespace eth::search {

struct Context {
  // `shard_holders` > 0: a pass of the sharded search (planner.cpp) whose tables charge the
  // optimizer state shared by that many holders, so it builds only plans of at least that
  // many pipelines (min_pipelines).
  Context(const ModelSpec& m, const ClusterSpec& c, const ProfileDb& p, std::int64_t batch,
          std::int64_t seq, const PlannerOptions& o, std::int64_t shard_holders = 0);

  const ModelSpec& model;
  const ClusterSpec& cluster;
  const ProfileDb& profile;
  std::int64_t gbs;
  std::int64_t seq_len;
  const PlannerOptions& opt;
  CostTables tables;        // every candidate recompute set (eth, uniform)
  CostTables layer_tables;  // none or full recompute only, unless opt.layer_operator_recompute
  std::vector<TypeInfo> types;        // tps filled: allowed and profiled
  std::int64_t unusable_devices = 0;  // devices of types with no usable tp
  SearchStats stats;
  // Set by explain_overflow when the closest candidate fits memory: search limits, not memory,
  // left the search without a plan.
  bool limits_not_memory = false;

  std::int64_t min_pipelines = 1;

  std::int64_t num_units() const { return model.num_units(); }
  std::int64_t max_pipelines() const;
};

struct StageChoice {
  std::string device_type;
  std::int64_t tp = 1;
  std::vector<std::int64_t> devices;
  std::int64_t first_unit = 0, last_unit = 0;
  RecomputeSet recompute;
};

struct PipelineChoice {
  std::int64_t mbs = 1;
  std::int64_t batch = 1;
  std::vector<StageChoice> stages;
};

// A complete plan in the search's terms, ranked by objective_ms (max_p T_p).
struct Candidate {
  double objective_ms = 0;
  std::string family;
  std::int64_t idle_devices = 0;
  std::vector<PipelineChoice> pipelines;
};

// The best candidates of each method by objective (at most opt.top_k), best first. Empty when
// nothing fits; then `diagnosis` says why.
std::vector<Candidate> search_eth(Context& ctx, std::string& diagnosis);
std::vector<Candidate> search_layer(Context& ctx, std::string& diagnosis);
std::vector<Candidate> search_uniform(Context& ctx, std::string& diagnosis);

// Stages of a template with their cost tables at micro-batch size mbs; empty when the profile
// does not cover some (type, tp) at mbs.
std::vector<StageSlot> template_slots(Context& ctx, const PipelineTemplate& t, std::int64_t mbs);
std::vector<StageSlot> template_slots(Context& ctx, CostTables& tables, const PipelineTemplate& t,
                                      std::int64_t mbs);
// The least-bad way a set of templates could be laid out, as the sentence that names the first
// overflowing device (type, stage, units, bytes needed vs capacity).
std::string explain_overflow(Context& ctx, const TemplateSet& templates);
// Which search limits dropped candidates, with counts and the flag that sets each ("none
// recorded" when none did).
std::string limits_that_bound(const Context& ctx);

}  // namespace eth::search
