// plan_training: checks the options, runs one method's search, turns its best candidates into
// plans, prices them with the predictor and keeps the fastest. Also the statistics' JSON form.
#include "search/planner.h"

#include <algorithm>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "cost/sharding_memory.h"
#include "plan/sharding.h"
#include "model/model_spec.h"
#include "search/engine.h"

namespace eth {

std::string_view plan_method_name(PlanMethod m) {
  switch (m) {
    case PlanMethod::Eth:
      return "eth";
    case PlanMethod::Layer:
      return "layer";
    case PlanMethod::Uniform:
      return "uniform";
  }
  return "unknown";
}

std::optional<PlanMethod> parse_plan_method(std::string_view name) {
  for (auto m : {PlanMethod::Eth, PlanMethod::Layer, PlanMethod::Uniform}) {
    if (plan_method_name(m) == name) return m;
  }
  return std::nullopt;
}

std::int64_t SearchStats::skipped_total() const {
  std::int64_t n = 0;
  for (const auto& [reason, count] : skipped) n += count;
  return n;
}

Json SearchStats::to_json() const {
  Json j;
  j["generated"] = generated;
  j["evaluated"] = evaluated;
  j["skipped"] = skipped_total();
  Json by = Json::object();
  for (const auto& [reason, count] : skipped) by[reason] = count;
  j["skipped_by_reason"] = by;
  j["cache_hits"] = cache_hits;
  j["unit_splits"] = unit_splits;
  Json rej = Json::object();
  for (const auto& [reason, count] : rejected_options) rej[reason] = count;
  j["rejected_template_options"] = rej;
  j["predicted"] = predicted;
  if (!limits.empty()) {
    Json lim = Json::object();
    for (const auto& [name, value] : limits) lim[name] = value;
    j["limits_reached"] = lim;
  }
  return j;
}

namespace {

void check_options(const ModelSpec& model, std::int64_t gbs, std::int64_t seq_len,
                   const PlannerOptions& o) {
  auto bad = [](const std::string& flag, const std::string& what) {
    throw InputError("planner", flag, "", what);
  };
  if (gbs < 1) bad("--gbs", "expected a global batch >= 1, got " + std::to_string(gbs));
  if (seq_len < 1 || seq_len > model.seq_len) {
    bad("--seq", "expected a sequence length in [1, " + std::to_string(model.seq_len) +
                     "] (the model's), got " + std::to_string(seq_len));
  }
  if (o.micro_batch_sizes.empty()) bad("--micro-batch-sizes", "expected at least one size");
  for (auto m : o.micro_batch_sizes) {
    if (m < 1) bad("--micro-batch-sizes", "expected sizes >= 1, got " + std::to_string(m));
  }
  if (o.tp.empty()) bad("--tp", "expected at least one tp degree");
  for (auto t : o.tp) {
    if (t < 1) bad("--tp", "expected tp degrees >= 1, got " + std::to_string(t));
  }
  if (o.max_pipelines < 0) bad("--max-pipelines", "expected a count >= 0 (0: no limit)");
  if (!(o.alpha >= 0 && o.alpha < 1)) bad("--alpha", "expected a tolerance in [0, 1)");
  if (o.v_inter && !(*o.v_inter >= 0)) bad("--v-inter", "expected a threshold >= 0");
  if (o.v_intra && !(*o.v_intra >= 0)) bad("--v-intra", "expected a threshold >= 0");
  if (o.max_partitions < 1) bad("--max-partitions", "expected a count >= 1");
}

bool is_preset(const ModelSpec& m) {
  for (const auto& p : model_presets()) {
    if (p == m) return true;
  }
  return false;
}

bool same_candidate(const search::Candidate& a, const search::Candidate& b) {
  if (a.pipelines.size() != b.pipelines.size()) return false;
  for (std::size_t p = 0; p < a.pipelines.size(); ++p) {
    const auto& x = a.pipelines[p];
    const auto& y = b.pipelines[p];
    if (x.mbs != y.mbs || x.batch != y.batch || x.stages.size() != y.stages.size()) return false;
    for (std::size_t s = 0; s < x.stages.size(); ++s) {
      const auto& u = x.stages[s];
      const auto& v = y.stages[s];
      if (u.device_type != v.device_type || u.tp != v.tp || u.devices != v.devices ||
          u.first_unit != v.first_unit || u.last_unit != v.last_unit ||
          !(u.recompute == v.recompute)) {
        return false;
      }
    }
  }
  return true;
}

Plan to_plan(const search::Context& ctx, const search::Candidate& c) {
  Plan plan;
  plan.model = ctx.model;
  plan.model_is_preset = is_preset(ctx.model);
  plan.gbs = ctx.gbs;
  plan.seq_len = ctx.seq_len;
  plan.cluster = ctx.cluster;
  plan.schedule = "1f1b";
  for (const auto& p : c.pipelines) {
    PipelinePlan pp;
    // A pipeline whose local batch is below its micro-batch size runs one micro-batch of the
    // whole local batch: write it so (a plan's micro-batch never exceeds its local batch).
    pp.micro_batch_size = std::min(p.mbs, p.batch);
    pp.local_batch = p.batch;
    for (const auto& s : p.stages) {
      StagePlan sp;
      sp.device_type = s.device_type;
      sp.devices = s.devices;
      sp.tp = s.tp;
      sp.dp = 1;
      sp.first_unit = s.first_unit;
      sp.last_unit = s.last_unit;
      sp.recompute = s.recompute;
      pp.stages.push_back(std::move(sp));
    }
    plan.pipelines.push_back(std::move(pp));
  }
  return plan;
}


// One pass of a method's search: its best candidates (empty, with `diagnosis`, when none fits).
std::vector<search::Candidate> run_search(PlanMethod method, search::Context& ctx,
                                          std::string& diagnosis) {
  std::vector<search::Candidate> cands;
  switch (method) {
    case PlanMethod::Eth: {
      cands = search::search_eth(ctx, diagnosis);
      // The layer baseline's plans belong to eth's space (equal data is one data split), so eth
      // prices them too and is never slower than layer (unless restricted to the pure family).
      if (ctx.opt.pure_only) break;
      std::string ignored;
      for (auto& c : search::search_layer(ctx, ignored)) cands.push_back(std::move(c));
      break;
    }
    case PlanMethod::Layer:
      cands = search::search_layer(ctx, diagnosis);
      break;
    case PlanMethod::Uniform:
      cands = search::search_uniform(ctx, diagnosis);
      break;
  }
  return cands;
}

// The least holder counts of the sharded search's passes (engine.h): 0, the unsharded search
// (a plan that fits whole fits sharded: a holder's share and the reduce-scatter's buffer
// never exceed its whole state), then 2, 4, 8, ... pipelines up to the most a plan may have.
// A plan of P pipelines is found by the pass of the largest power of two <= P, which charges
// it at most twice its even share; use_freed_memory then spends what that leaves.
std::vector<std::int64_t> shard_passes(const search::Context& ctx) {
  std::vector<std::int64_t> out{0};
  const std::int64_t most = std::min(ctx.max_pipelines(), ClusterIndex(ctx.cluster).num_devices());
  for (std::int64_t d = 2; d <= most; d *= 2) out.push_back(d);
  return out;
}

void add_stats(SearchStats& into, const SearchStats& from) {
  into.generated += from.generated;
  into.evaluated += from.evaluated;
  for (const auto& [k, v] : from.skipped) into.skipped[k] += v;
  into.cache_hits += from.cache_hits;
  into.unit_splits += from.unit_splits;
  for (const auto& [k, v] : from.rejected_options) into.rejected_options[k] += v;
  into.predicted += from.predicted;
  for (const auto& [k, v] : from.limits) into.limits[k] = v;
}

// A finalist with the requested optimizer sharding. Memory-proportional shares can overflow a
// holder that an even split would not (its blocks' other holders having less free memory);
// then the even split, which the search's charge bounds, is used and the plan says so.
Plan shard_finalist(const Plan& plan, OptimizerSharding mode, const ClusterSpec& cluster,
                    const ProfileDb& profile, const PredictOptions& o, Prediction& pred) {
  Plan out = shard_optimizer_state(plan, mode, cluster, profile, o);
  pred = predict(out, cluster, profile, o);
  if (pred.fits || mode != OptimizerSharding::Memory) return out;
  Plan even = with_optimizer_sharding(plan, OptimizerSharding::Even);
  Prediction even_pred = predict(even, cluster, profile, o);
  if (!even_pred.fits) return out;
  pred = std::move(even_pred);
  return even;
}

}  // namespace

PlannerResult plan_training(PlanMethod method, const ModelSpec& model, const ClusterSpec& cluster,
                            const ProfileDb& profile, std::int64_t gbs, std::int64_t seq_len,
                            const PlannerOptions& options) {
  check_options(model, gbs, seq_len, options);
  if (!(profile.model() == model)) {
    throw InputError("planner", "--profile", "",
                     "the profile describes model " + profile.model().name + ", not " + model.name);
  }
  const OptimizerSharding sharding = options.optimizer_sharding;
  search::Context ctx(model, cluster, profile, gbs, seq_len, options);
  std::string diagnosis;
  std::vector<search::Candidate> cands = run_search(method, ctx, diagnosis);
  if (sharding != OptimizerSharding::None) {
    const std::vector<std::int64_t> passes = shard_passes(ctx);
    for (std::size_t k = 1; k < passes.size(); ++k) {
      search::Context pass(model, cluster, profile, gbs, seq_len, options, passes[k]);
      std::string ignored;
      for (auto& c : run_search(method, pass, ignored)) cands.push_back(std::move(c));
      add_stats(ctx.stats, pass.stats);
    }
  }
  if (cands.empty()) {
    // The diagnosis is the unsharded pass's (its tables charge the whole state).
    const std::string sharded_too =
        sharding == OptimizerSharding::None
            ? ""
            : " (and none with the optimizer state sharded, in any pass: docs/planner.md)";
    throw InputError("planner", "", "",
                     std::string("no ") + std::string(plan_method_name(method)) +
                         (ctx.limits_not_memory ? " plan within the search limits: "
                                                : " plan fits memory: ") +
                         diagnosis + sharded_too);
  }
  PlannerResult best;
  best.method = method;
  best.best_objective_ms = std::numeric_limits<double>::infinity();
  for (const auto& c : cands)
    best.best_objective_ms = std::min(best.best_objective_ms, c.objective_ms);
  double best_ms = std::numeric_limits<double>::infinity();
  std::string overflow;
  // Finalists are ranked on the block-wise aggregation alone (the mode plans are priced in);
  // the winner is priced again below with every mode for the report.
  PredictOptions rank_options;
  rank_options.all_modes = false;
  for (std::size_t ci = 0; ci < cands.size(); ++ci) {
    const auto& c = cands[ci];
    // eth's finalists include the layer baseline's, often the same plan: price each once.
    bool seen = false;
    for (std::size_t e = 0; e < ci && !seen; ++e) seen = same_candidate(cands[e], c);
    if (seen) continue;
    Plan plan = to_plan(ctx, c);
    Prediction pred;
    if (sharding == OptimizerSharding::None) {
      pred = predict(plan, cluster, profile, rank_options);
    } else {
      plan = shard_finalist(plan, sharding, cluster, profile, rank_options, pred);
    }
    ++ctx.stats.predicted;
    if (!pred.fits) {
      // The search's memory model is the predictor's with every stage's in-flight count at its
      // maximum, so this is a bug unless the profile is inconsistent across micro-batch sizes.
      ++ctx.stats.skipped["predictor_overflow"];
      if (overflow.empty()) overflow = "device " + std::to_string(pred.oversubscribed.front());
      continue;
    }
    if (pred.iteration_ms < best_ms) {
      best_ms = pred.iteration_ms;
      best.plan = std::move(plan);
      best.prediction = std::move(pred);
      best.objective_ms = c.objective_ms;
      best.family = c.family;
      best.idle_devices = c.idle_devices;
    }
  }
  if (best_ms == std::numeric_limits<double>::infinity()) {
    throw InputError("planner", "", "",
                     "no plan fits memory under the predictor (first overflow: " + overflow + ")");
  }
  std::vector<std::string> spent;
  if (sharding != OptimizerSharding::None) {
    // The passes charge up to twice a holder's share: what that leaves goes to larger
    // micro-batches (among the candidate sizes) and less recompute.
    const std::int64_t largest =
        *std::max_element(options.micro_batch_sizes.begin(), options.micro_batch_sizes.end());
    best.plan = use_freed_memory(best.plan, cluster, profile, &spent, largest);
  }
  best.prediction = predict(best.plan, cluster, profile);
  // Per-stage predicted peaks (the stage's largest device peak: sharded shares differ) and the
  // plan-level prediction travel in the plan file.
  for (std::size_t p = 0; p < best.plan.pipelines.size(); ++p) {
    auto& stages = best.plan.pipelines[p].stages;
    for (std::size_t s = 0; s < stages.size(); ++s) {
      stages[s].predicted_peak_memory_bytes = best.prediction.pipelines[p].stages[s].memory.total();
    }
  }
  if (sharding != OptimizerSharding::None) {
    for (auto& pipe : best.plan.pipelines) {
      for (auto& st : pipe.stages) st.predicted_peak_memory_bytes = 0.0;
    }
    for (const DevicePrediction& d : best.prediction.devices) {
      auto& peak = best.plan.pipelines[static_cast<std::size_t>(d.pipeline)]
                       .stages[static_cast<std::size_t>(d.stage)]
                       .predicted_peak_memory_bytes;
      peak = std::max(*peak, d.peak_bytes);
    }
  }
  best.plan.predicted = Json{{"method", std::string(plan_method_name(method))},
                             {"iteration_ms", best.prediction.iteration_ms},
                             {"ideal_iteration_ms", best.prediction.ideal_iteration_ms},
                             {"pipeline_ms", best.prediction.pipeline_ms},
                             {"sync_exposed_ms", best.prediction.sync.exposed_ms},
                             {"optimizer_ms", best.prediction.optimizer_ms},
                             {"tokens_per_s", best.prediction.tokens_per_s},
                             {"mfu", best.prediction.mfu},
                             {"search_objective_ms", best.objective_ms},
                             {"idle_devices", best.idle_devices}};
  if (sharding != OptimizerSharding::None) {
    (*best.plan.predicted)["optimizer_sharding"] =
        std::string(optimizer_sharding_name(best.plan.optimizer_sharding));
    (*best.plan.predicted)["shard_gather_ms"] = best.prediction.shard_gather_ms;
    (*best.plan.predicted)["freed_memory_spent_on"] = spent;
  }
  best.stats = ctx.stats;
  best.plan.search = best.stats.to_json();
  return best;
}

}  // namespace eth
