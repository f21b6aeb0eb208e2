// The rules every HPP plan obeys (DESIGN.md section 2; docs/plan-format.md lists them), checked
// against a cluster. Reports every violation, not only the first. Not a cost model: a valid plan
// may still be slow or run out of memory (cost/ says so).
//
// How to use: parse with load_plan (structure: types, ranges, unknown fields), then
// validate_plan (cross-field rules) or check_plan, which throws them all as one InputErrors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cluster/cluster_spec.h"
#include "plan/plan.h"

namespace eth {

struct PlanViolation {
  std::string path;     // JSON path in the plan's file form, e.g. "pipelines[1].stages[0].units"
  std::string message;  // what is wrong, with the values involved and what was expected
  // > 0 on the entry that stands for violations not listed: how many it stands for.
  std::int64_t elided = 0;
  bool operator==(const PlanViolation&) const = default;
};

// Every violated rule, in plan order (plan fields, then each pipeline's fields and stages, then
// that pipeline's unit coverage). Empty when the plan is valid. Never throws on a bad plan and
// never reads out of range, whatever the values (device ids, units, tp) hold. Violations of one
// kind (the same path up to its indices, "pipelines[*].stages[*].units") are listed up to 10
// times; one last entry per kind says how many more were elided, so the report stays linear in
// the plan's size.
std::vector<PlanViolation> validate_plan(const Plan& plan, const ClusterSpec& cluster);

// Throws InputErrors holding one InputError("plan", source, path, message) per violation;
// returns normally when the plan is valid.
void check_plan(const Plan& plan, const ClusterSpec& cluster, const std::string& source);

}  // namespace eth
