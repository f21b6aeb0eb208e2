// `eth validate --plan P [--cluster C]`: checks a plan against every rule of docs/plan-format.md
// and prints every violation (exit 2) or a summary of the valid plan (exit 0). The rules live in
// plan/validate.h; this file only chooses the cluster and renders the result.
#include <iostream>
#include <memory>
#include <optional>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/output.h"
#include "cli/plan_inputs.h"
#include "cluster/cluster_spec.h"
#include "core/error.h"
#include "plan/plan.h"
#include "plan/validate.h"

namespace eth::cli {

namespace {

struct ValidateOptions {
  std::string plan;
  std::string cluster;
  Format format = Format::Text;
};

// --cluster wins over the plan's own "cluster" field; one of them must be there.
// "910B2 2x1 x 4" (runs of equal stages collapsed) or "0-10,11-20,...": one table cell each.
std::string stage_types(const PipelinePlan& pipe) {
  std::vector<std::pair<std::string, int>> runs;
  for (const auto& st : pipe.stages) {
    std::string key = st.device_type + " " + std::to_string(st.tp) + "x" + std::to_string(st.dp);
    if (!runs.empty() && runs.back().first == key)
      ++runs.back().second;
    else
      runs.emplace_back(key, 1);
  }
  std::string out;
  for (const auto& [key, n] : runs) {
    out += (out.empty() ? "" : ", ") + key + (n > 1 ? " x " + std::to_string(n) : "");
  }
  return out;
}

std::string stage_units(const PipelinePlan& pipe) {
  std::string out;
  for (const auto& st : pipe.stages) {
    out += (out.empty() ? "" : ",") + std::to_string(st.first_unit) + "-" +
           std::to_string(st.last_unit);
  }
  return out;
}

void print_summary(const Plan& plan, const ClusterSpec& cluster) {
  std::cout << "plan OK: " << plan.pipelines.size()
            << (plan.pipelines.size() == 1 ? " pipeline, " : " pipelines, ") << plan.num_devices()
            << " of " << cluster.num_devices() << " devices (cluster " << cluster.name
            << "), model " << plan.model.name << " (" << plan.model.num_units() << " units), gbs "
            << plan.gbs << ", seq_len " << plan.seq_len << ", schedule " << plan.schedule << "\n\n";
  Table t({"pipeline", "mbs", "local batch", "micro-batches", "devices", "stages (type tp x dp)",
           "units"});
  for (std::size_t p = 0; p < plan.pipelines.size(); ++p) {
    const PipelinePlan& pipe = plan.pipelines[p];
    t.add({std::to_string(p), std::to_string(pipe.micro_batch_size),
           std::to_string(pipe.local_batch), std::to_string(pipe.num_microbatches()),
           std::to_string(pipe.num_devices()), stage_types(pipe), stage_units(pipe)});
  }
  std::cout << t.render();
}

Json violation_json(const std::string& source, const std::string& path, const std::string& msg) {
  return Json{{"source", source}, {"path", path}, {"message", msg}};
}

int run_validate(const ValidateOptions& o) {
  std::optional<Plan> plan;
  std::optional<ClusterSpec> cluster;
  try {
    plan = load_plan(o.plan);
    cluster = cluster_for_plan(*plan, o.cluster);
  } catch (const InputError& e) {
    if (o.format == Format::Text) throw;  // main prints it and exits 2
    // Scripts get one shape for every outcome: a file that does not parse is a violation too.
    print_json(
        Json{{"valid", false},
             {"plan", o.plan},
             {"violations", Json::array({violation_json(e.source(), e.path(), e.detail())})}});
    return kExitInput;
  }
  const std::vector<PlanViolation> violations = validate_plan(*plan, *cluster);
  if (o.format == Format::Json) {
    Json list = Json::array();
    for (const auto& v : violations) {
      Json j = violation_json(o.plan, v.path, v.message);
      if (v.elided > 0) j["elided"] = v.elided;
      list.push_back(j);
    }
    print_json(Json{{"valid", violations.empty()},
                    {"plan", o.plan},
                    {"cluster", cluster->name},
                    {"pipelines", plan->pipelines.size()},
                    {"devices", plan->num_devices()},
                    {"cluster_devices", cluster->num_devices()},
                    {"violations", list}});
    return violations.empty() ? kExitOk : kExitInput;
  }
  if (violations.empty()) {
    print_summary(*plan, *cluster);
    return kExitOk;
  }
  std::int64_t total = 0, elided = 0;
  for (const auto& v : violations) {
    std::cout << o.plan << ": " << v.path << ": " << message_text(v.message, 4096) << "\n";
    total += v.elided > 0 ? v.elided : 1;
    elided += v.elided;
  }
  std::cout << "plan INVALID: " << total << (total == 1 ? " violation" : " violations");
  if (elided > 0) std::cout << " (" << total - elided << " listed)";
  std::cout << " (rules: docs/plan-format.md)\n";
  return kExitInput;
}

}  // namespace

void add_validate_command(CLI::App& app, Registry& r) {
  auto* sub = app.add_subcommand(
      "validate",
      "Check a plan against every rule (units covered once per pipeline, devices, batches, tp, "
      "recompute; docs/plan-format.md) and print every violation; exit 2 when there is any");
  auto o = std::make_shared<ValidateOptions>();
  sub->add_option("--plan", o->plan, "Plan file (JSON, docs/plan-format.md)")->required();
  sub->add_option("--cluster", o->cluster,
                  "Cluster preset name (see `eth clusters`) or cluster file; default: the plan's "
                  "own \"cluster\" field");
  add_format_option(sub, &o->format);
  r.on(sub, [o] { return run_validate(*o); });
}

}  // namespace eth::cli
