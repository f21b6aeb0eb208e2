// The planner's flags, shared by eth plan, eth compare and eth launch --elastic (planner_args.h).
#include "cli/planner_args.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/plan_inputs.h"
#include "core/error.h"
#include "core/limits.h"
#include "plan/sharding.h"
#include "profile/analytic.h"
#include "profile/metis_format.h"

namespace eth::cli {

std::vector<CLI::Option*> add_planner_options(CLI::App* sub, PlannerArgs& a, bool with_method) {
  std::vector<CLI::Option*> o;
  if (with_method) {
    o.push_back(sub->add_option("--method", a.method, "eth (default), layer or uniform")
                    ->check(CLI::IsMember({"eth", "layer", "uniform"})));
  }
  o.push_back(sub->add_option("--profile", a.profile, "Profile directory (ETH or Metis format)"));
  o.push_back(
      sub->add_flag("--analytic", a.analytic, "Analytic profile from FLOP counts (the default)"));
  o.push_back(sub->add_option("--micro-batch-sizes", a.mbss,
                              "Candidate micro-batch sizes (default 1,2,4,8,16)")
                  ->delimiter(',')
                  ->check(CLI::Range(std::int64_t{1}, limits::kMaxMicroBatch)));
  o.push_back(sub->add_option("--tp", a.tps, "Candidate tp degrees per stage (default 1,2,4,8)")
                  ->delimiter(',')
                  ->check(CLI::Range(std::int64_t{1}, limits::kMaxTp)));
  o.push_back(
      sub->add_option("--max-pipelines", a.max_pipelines, "Most pipelines a plan may have (0: gbs)")
          ->check(CLI::Range(std::int64_t{0}, limits::kMaxGlobalBatch)));
  o.push_back(sub->add_option("--alpha", a.alpha,
                              "SES tolerance: skip a candidate whose lower bound >= best x (1 - "
                              "alpha) (default 0: exact)")
                  ->check(CLI::Range(0.0, 0.999)));
  o.push_back(sub->add_option("--v-inter", a.v_inter,
                              "Skip partitions whose slowest per-sample pipeline time exceeds the "
                              "fastest by more than this fraction")
                  ->check(CLI::Range(0.0, 1e6)));
  o.push_back(sub->add_option("--v-intra", a.v_intra,
                              "Drop a template's micro-batch option when its bottleneck stage "
                              "exceeds the mean stage time by more than this fraction")
                  ->check(CLI::Range(0.0, 1e6)));
  o.push_back(
      sub->add_flag("--no-cpc", a.no_cpc, "Do not cache unit splits of identical pipelines"));
  o.push_back(sub->add_flag("--no-ses", a.no_ses, "Do not skip candidates by their lower bound"));
  o.push_back(
      sub->add_flag("--no-oso", a.no_oso, "Visit candidates in generation order, not by bound"));
  o.push_back(
      sub->add_flag("--no-dpo", a.no_dpo, "Enumerate unit splits instead of the dynamic program"));
  o.push_back(sub->add_option("--max-partitions", a.max_partitions,
                              "Most partitions the eth search builds and bounds (default 3000000; "
                              "bounds the search's time; when it binds the plan says so)")
                  ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40)));
  o.push_back(sub->add_option("--top-k", a.top_k, "Finalists priced by the predictor (default 8)")
                  ->check(CLI::Range(std::int64_t{1}, std::int64_t{1000})));
  o.push_back(sub->add_flag("--layer-operator-recompute", a.layer_operator_recompute,
                            "Let the layer baseline's stages recompute single operators as eth's "
                            "do (by default, as in Metis and HexiScale, only nothing or the whole "
                            "unit)"));
  o.push_back(sub->add_option("--optimizer-sharding", a.optimizer_sharding,
                              "Shard each gradient block's fp32 masters and Adam moments across "
                              "its holders: none (default: every holder keeps them whole), even, "
                              "or memory (in proportion to what each holder's memory leaves "
                              "free); the shares are recorded in the plan file")
                  ->check(CLI::IsMember({"none", "even", "memory"})));
  return o;
}

PlannerOptions planner_options(const PlannerArgs& a) {
  PlannerOptions o;
  o.micro_batch_sizes = a.mbss;
  o.tp = a.tps;
  o.max_pipelines = a.max_pipelines;
  o.alpha = a.alpha;
  o.v_inter = a.v_inter;
  o.v_intra = a.v_intra;
  o.cpc = !a.no_cpc;
  o.ses = !a.no_ses;
  o.oso = !a.no_oso;
  o.dpo = !a.no_dpo;
  o.top_k = a.top_k;
  o.max_partitions = a.max_partitions;
  o.layer_operator_recompute = a.layer_operator_recompute;
  o.optimizer_sharding = *parse_optimizer_sharding(a.optimizer_sharding);
  return o;
}

PlanMethod planner_method(const PlannerArgs& a) {
  const auto method = parse_plan_method(a.method);
  if (!method) throw UsageError("--method", "expected one of: eth, layer, uniform");
  return *method;
}

PlannerProfile planner_profile(const PlannerArgs& a, const ModelSpec& model,
                               const ClusterSpec& cluster, std::int64_t seq) {
  if (!a.profile.empty() && a.analytic) {
    throw UsageError("--profile", "give --profile DIR or --analytic, not both");
  }
  if (a.profile.empty()) {
    // Analytic: every tp the model splits into, at every micro-batch size asked for.
    std::vector<std::int64_t> tps;
    for (auto t : a.tps) {
      if (model.tp_splits(t)) tps.push_back(t);
    }
    if (tps.empty()) throw InputError("cli", "--tp", "", "no tp degree divides the model's heads");
    return {analytic_profile_db(model, cluster, tps, a.mbss, seq), "analytic"};
  }
  const bool metis = is_metis_profile_dir(a.profile);
  PlannerProfile p{metis ? read_metis_profile_dir(a.profile, model, &cluster)
                         : read_profile_for_cluster(a.profile, model, cluster),
                   a.profile + (metis ? " (Metis format)" : " (ETH format)")};
  bool emulated = false;
  for (const auto& [name, type] : cluster.device_types) {
    emulated = emulated || type.emulated_slowdown != 1.0;
  }
  if (!metis && emulated) p.source += ", cpu times scaled to the EMULATED types";
  for (const auto& [key, e] : p.db.entries()) {
    if (e.seq_len != seq) {
      throw InputError("cli", "--seq", "",
                       "the profile " + a.profile + " was taken at sequence length " +
                           std::to_string(e.seq_len) + ", the plan asks for " +
                           std::to_string(seq));
    }
  }
  return p;
}

}  // namespace eth::cli
