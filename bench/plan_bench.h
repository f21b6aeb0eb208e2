// What plan_bench's sections share (one section a file, bench/plan_bench_<section>.cpp): a
// planner call timed in wall and CPU seconds, the analytic profile every section plans with, one
// method's plan as the figures read it, and the paper's scenarios; and the sections themselves,
// each a run_<section> that computes its rows and a print_<section> that prints them as text.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "bench_json.h"
#include "cluster/cluster_spec.h"
#include "model/model_spec.h"
#include "search/planner.h"

namespace eth::bench {

struct Options {
  bool quick = false;
  std::filesystem::path data;  // bench/data: Metis's inputs and recorded figures
};

// Wall and process CPU seconds of one call (the machine is shared: CPU time is the stable one).
struct Timed {
  std::optional<PlannerResult> result;
  std::string error;
  double wall_s = 0, cpu_s = 0;
};

Timed timed_plan(PlanMethod m, const ModelSpec& model, const ClusterSpec& c, const ProfileDb& db,
                 std::int64_t gbs, std::int64_t seq, const PlannerOptions& o);

// The analytic profile of `m` on `c` for every tp that divides its heads and ffn (up to 8) and
// micro-batch sizes 1-16.
ProfileDb analytic_for(const ModelSpec& m, const ClusterSpec& c, std::int64_t seq);

// One method's plan as the figures read it. Numbers are null when no plan fits (`error` says
// why). busy_ms: mean device busy time (the rest of pipeline_ms is bubble and imbalance);
// latency_ratio: the slowest device's busy time over the fastest's (the paper's Fig. 3).
Json method_json(const Timed& t);

// The predicted iteration time of the plan, 0 when none fits.
double ms(const Timed& t);

struct Scenario {
  std::string model, cluster, family;
  std::int64_t gbs;
};

// Table 2's models on their cluster shapes. Global batch: 512 up to 6.7B, 1024 for 13B and 70B
// (the Metis inputs use the same sizes for 6.7B, 13B and 70B).
std::vector<Scenario> paper_scenarios(const Options& o, const std::vector<std::string>& families);

// The sections (--quick: a few small cases each); the sharding one is in plan_bench_sharding.h.
Json run_scenarios(const Options& opt);
void print_scenarios(const Json& rows);
Json run_uneven(const Options& opt);
void print_uneven(const Json& rows);
Json run_ablation(const Options& opt);
void print_ablation(const Json& rows);
Json run_alpha(const Options& opt);
void print_alpha(const Json& rows);
Json run_scale(const Options& opt);
void print_scale(const Json& rows);
Json run_llama(const Options& opt);
void print_llama(const Json& rows);
Json run_metis(const Options& opt);
void print_metis(const Json& rows);
Json run_pure(const Options& opt);
void print_pure(const Json& rows);
Json run_memory(const Options& opt);
void print_memory(const Json& rows);
Json run_table3(const Options& opt);
void print_table3(const Json& rows);

}  // namespace eth::bench
