// What an elastic run decides between two launches, without starting anything: the checkpoint
// to resume (the newest that reads back whole) and the plan for the devices left (the planner on
// the surviving cluster, with the model, global batch, sequence length and planner options of
// the run). The loop in launch/elastic_run.h does the processes, the clock and the files.
//
// How to use:
//   auto from = latest_whole_checkpoint(dir);  // nullopt: start from step 0
//   Replan r = replan(inputs, {2});            // device 2 of the full cluster lost
//   r.result.plan                              // devices numbered in r.surviving.cluster
//   r.surviving.original[d]                    // device d of the plan, in the full cluster
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cluster/cluster_spec.h"
#include "elastic/surviving.h"
#include "model/model_spec.h"
#include "plan/plan.h"
#include "profile/profile.h"
#include "search/planner.h"

namespace eth {

struct ResumePoint {
  std::filesystem::path path;
  std::int64_t step = 0;  // steps done: the run resumes at this step
};

// The checkpoint with the highest step in `dir` (step_*.safetensors) whose header and length read
// back (train/checkpoint.h read_checkpoint_meta); a newer one that does not is skipped and
// named in `skipped` with the reason, when given. Temporaries of a write cut short are never
// candidates. nullopt when there is none.
std::optional<ResumePoint> latest_whole_checkpoint(const std::filesystem::path& dir,
                                                   std::vector<std::string>* skipped = nullptr);

// Everything a re-plan keeps from the run it replaces.
struct ReplanInputs {
  ModelSpec model;
  ClusterSpec full;            // the cluster the run started on
  const ProfileDb* profile = nullptr;  // prices any device type of `full` (outlives the call)
  std::int64_t gbs = 0, seq_len = 0;
  PlanMethod method = PlanMethod::Eth;
  PlannerOptions options;
};

struct Replan {
  SurvivingCluster surviving;
  PlannerResult result;  // result.plan.cluster is surviving.cluster
};

// The plan for the devices of `full` not in `lost`. Throws InputError("elastic", ...) when no
// device is left or a lost id is not a device, and the planner's InputError when no plan fits
// the devices left (it names the stage and device type that overflow, and by how much).
Replan replan(const ReplanInputs& in, const std::set<std::int64_t>& lost);

// Whether `plan` runs on any device of `devices`.
bool plan_uses_any(const Plan& plan, const std::set<std::int64_t>& devices);

}  // namespace eth
