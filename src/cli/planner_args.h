// The planner's flags as `eth plan` names them (--method, --profile, --tp, --micro-batch-sizes,
// --alpha, ...), declared once for every command that runs the planner: `eth plan`, `eth compare`
// and `eth launch --elastic`, which re-plans with the same options when devices come and go.
// Inputs that say what to plan for (cluster, model, batch) are each command's own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/cli_fwd.h"
#include "cluster/cluster_spec.h"
#include "model/model_spec.h"
#include "profile/profile.h"
#include "search/planner.h"

namespace eth::cli {

struct PlannerArgs {
  std::string method = "eth";
  std::string profile;  // ETH or Metis profile directory; empty: analytic
  bool analytic = false;
  std::vector<std::int64_t> mbss{1, 2, 4, 8, 16};
  std::vector<std::int64_t> tps{1, 2, 4, 8};
  std::int64_t max_pipelines = 0, top_k = 8, max_partitions = 3'000'000;
  double alpha = 0.0;
  std::optional<double> v_inter, v_intra;
  bool no_cpc = false, no_ses = false, no_oso = false, no_dpo = false;
  bool layer_operator_recompute = false;
  std::string optimizer_sharding = "none";  // none | even | memory (plan/sharding.h)
};

// Declares the flags on `sub` (--method too when `with_method`; `eth compare` runs every
// method). Returns them, so a command can tell whether any was given.
std::vector<CLI::Option*> add_planner_options(CLI::App* sub, PlannerArgs& a, bool with_method);

PlannerOptions planner_options(const PlannerArgs& a);
// --method as a PlanMethod; UsageError for an unknown name.
PlanMethod planner_method(const PlannerArgs& a);

struct PlannerProfile {
  ProfileDb db;
  std::string source;  // "analytic", "DIR (ETH format)", ...
};

// The profile the planner prices `cluster` with: --profile DIR (ETH format scaled to the
// cluster's emulated types, or Metis format) or, by default, the analytic profile at every tp
// of --tp the model splits into and every --micro-batch-sizes. UsageError for --profile with
// --analytic; InputError for a profile taken at another sequence length than `seq`, or no tp
// that divides the model's heads.
PlannerProfile planner_profile(const PlannerArgs& a, const ModelSpec& model,
                               const ClusterSpec& cluster, std::int64_t seq);

}  // namespace eth::cli
