// Routing a plan's collectives into its pipelines' programs, and checking them. See
// plan_schedules.h.
#include "schedule/plan_schedules.h"

#include <algorithm>
#include <set>
#include <utility>

#include "core/error.h"
#include "schedule/generate.h"
#include "schedule/lower.h"

namespace eth {

namespace {

using Where = std::vector<std::pair<std::int64_t, std::int64_t>>;  // device -> (pipeline, stage)

Where stage_of_devices(const Plan& plan) {
  Where where;
  for (std::size_t p = 0; p < plan.pipelines.size(); ++p) {
    const auto& stages = plan.pipelines[p].stages;
    for (std::size_t s = 0; s < stages.size(); ++s) {
      for (std::int64_t d : stages[s].devices) {
        const auto du = static_cast<std::size_t>(d);
        if (du >= where.size()) where.resize(du + 1, {-1, -1});
        where[du] = {static_cast<std::int64_t>(p), static_cast<std::int64_t>(s)};
      }
    }
  }
  return where;
}

bool known(const Where& where, std::int64_t d) {
  return d >= 0 && static_cast<std::size_t>(d) < where.size() &&
         where[static_cast<std::size_t>(d)].first >= 0;
}

std::string stage_name(std::int64_t p, std::int64_t s) {
  return "pipeline " + std::to_string(p) + " stage " + std::to_string(s);
}

}  // namespace

std::vector<Schedule> lower_plan_schedules(const Plan& plan, ScheduleKind kind,
                                           const CollectiveHolders& holders) {
  const Where where = stage_of_devices(plan);
  std::vector<std::vector<std::vector<std::int64_t>>> blocks(plan.pipelines.size());
  for (std::size_t p = 0; p < plan.pipelines.size(); ++p) {
    blocks[p].resize(plan.pipelines[p].stages.size());
  }
  for (std::size_t c = 0; c < holders.size(); ++c) {
    for (std::int64_t h : holders[c]) {
      ETH_CHECK(known(where, h), "collective holder " + std::to_string(h) + " is not a device of the plan");
      const auto [p, s] = where[static_cast<std::size_t>(h)];
      auto& list = blocks[static_cast<std::size_t>(p)][static_cast<std::size_t>(s)];
      if (list.empty() || list.back() != static_cast<std::int64_t>(c)) {
        list.push_back(static_cast<std::int64_t>(c));
      }
    }
  }
  std::vector<Schedule> out;
  for (std::size_t p = 0; p < plan.pipelines.size(); ++p) {
    const PipelinePlan& pipe = plan.pipelines[p];
    Schedule s = make_schedule(kind, static_cast<std::int64_t>(pipe.stages.size()),
                               pipe.num_microbatches());
    insert_p2p(s);
    append_reductions(s, blocks[p]);
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<std::string> validate_plan_schedules(const Plan& plan,
                                                 const std::vector<Schedule>& schedules,
                                                 const CollectiveHolders& holders) {
  std::vector<std::string> out;
  if (schedules.size() != plan.pipelines.size()) {
    out.push_back(std::to_string(schedules.size()) + " schedules for " +
                  std::to_string(plan.pipelines.size()) + " pipelines");
    return out;
  }
  const Where where = stage_of_devices(plan);
  // (pipeline, stage) pairs whose program reduces each collective.
  std::vector<std::set<std::pair<std::int64_t, std::int64_t>>> reducers(holders.size());
  for (std::size_t p = 0; p < schedules.size(); ++p) {
    const Schedule& sch = schedules[p];
    const PipelinePlan& pipe = plan.pipelines[p];
    const auto P = static_cast<std::int64_t>(p);
    if (sch.num_stages != static_cast<std::int64_t>(pipe.stages.size()) ||
        sch.num_microbatches != pipe.num_microbatches() || sch.programs.size() != pipe.stages.size()) {
      out.push_back("pipeline " + std::to_string(p) + ": the schedule's stages or micro-batches "
                    "are not the plan's");
      continue;
    }
    for (const RankProgram& prog : sch.programs) {
      const std::int64_t opt = std::count_if(prog.actions.begin(), prog.actions.end(), [](const Action& a) {
        return a.kind == ActionKind::OptimizerStep;
      });
      if (opt != 1 || prog.actions.back().kind != ActionKind::OptimizerStep) {
        out.push_back(stage_name(P, prog.stage) + ": the program must end with one OptimizerStep");
      }
      for (const Action& a : prog.actions) {
        if (a.kind != ActionKind::ReduceGradients) continue;
        if (a.block < 0 || static_cast<std::size_t>(a.block) >= holders.size()) {
          out.push_back(stage_name(P, prog.stage) + " " + action_token(a) +
                        ": no such collective (there are " + std::to_string(holders.size()) + ")");
          continue;
        }
        reducers[static_cast<std::size_t>(a.block)].insert({P, prog.stage});
      }
    }
  }
  for (std::size_t c = 0; c < holders.size(); ++c) {
    std::set<std::pair<std::int64_t, std::int64_t>> held;
    for (std::int64_t h : holders[c]) {
      if (known(where, h)) held.insert(where[static_cast<std::size_t>(h)]);
    }
    const auto& by = reducers[c];
    for (const auto& [p, s] : by) {
      if (!held.contains({p, s})) {
        out.push_back(stage_name(p, s) + " RD" + std::to_string(c) +
                      ": no device of the stage holds this collective");
      }
    }
    if (by.empty()) continue;  // reduced by none of its holders: a run without it, as written
    for (const auto& [p, s] : held) {
      if (!by.contains({p, s})) {
        out.push_back(stage_name(p, s) + ": lacks RD" + std::to_string(c) +
                      ", which other holders' programs reduce (they would wait for it forever)");
      }
    }
  }
  return out;
}

}  // namespace eth
