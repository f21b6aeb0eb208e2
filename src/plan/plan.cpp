#include "plan/plan.h"

#include <algorithm>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_file.h"
#include "core/limits.h"

namespace eth {

std::int64_t PipelinePlan::num_devices() const {
  std::int64_t n = 0;
  for (const auto& s : stages) n += static_cast<std::int64_t>(s.devices.size());
  return n;
}

std::int64_t Plan::num_devices() const {
  std::int64_t n = 0;
  for (const auto& p : pipelines) n += p.num_devices();
  return n;
}

std::vector<std::int64_t> Plan::device_ids() const {
  std::vector<std::int64_t> ids;
  ids.reserve(static_cast<std::size_t>(num_devices()));
  for (const auto& p : pipelines)
    for (const auto& s : p.stages) ids.insert(ids.end(), s.devices.begin(), s.devices.end());
  std::sort(ids.begin(), ids.end());
  return ids;
}

namespace {

// Device ids listed so far in the whole plan: every stage lists at least one, and a plan for
// the largest cluster lists each id once, so the total bounds the plan's size.
struct Budget {
  std::int64_t device_entries = 0;
};

StagePlan parse_stage(const JsonCursor& c, const ModelSpec& model, Budget& budget) {
  c.require_object();
  c.allow_only({"device_type", "devices", "tp", "dp", "units", "recompute", "span_nodes",
                "predicted"});
  StagePlan s;
  s.device_type = c.at("device_type").as_string();
  if (!valid_device_type_name(s.device_type)) c.at("device_type").fail(device_type_name_rule());
  JsonCursor devs = c.at("devices");
  if (devs.size() == 0) devs.fail("a non-empty array of global device ids");
  budget.device_entries += static_cast<std::int64_t>(devs.size());
  if (budget.device_entries > limits::kMaxClusterDevices) {
    devs.fail_detail("brings the plan to " + std::to_string(budget.device_entries) +
                     " device entries; a plan uses at most " +
                     std::to_string(limits::kMaxClusterDevices) + " devices");
  }
  for (std::size_t i = 0; i < devs.size(); ++i) {
    s.devices.push_back(devs[i].as_int(0, limits::kMaxClusterDevices - 1));
  }
  s.tp = c.find("tp") ? c.at("tp").as_int(1, limits::kMaxTp) : 1;
  s.dp = c.find("dp") ? c.at("dp").as_int(1, limits::kMaxClusterDevices) : 1;
  JsonCursor units = c.at("units");
  if (!units.is_array() || units.size() != 2) units.fail("[first, last] (two unit indices)");
  // Units past the model's are the validator's to name (it says which units exist); the bound
  // here only keeps the numbers small.
  const std::int64_t max_unit = std::max(model.num_units() - 1, limits::kMaxLayers + 1);
  s.first_unit = units[0].as_int(0, max_unit);
  s.last_unit = units[1].as_int(0, max_unit);
  if (auto rc = c.find("recompute")) {
    for (std::size_t i = 0; i < rc->size(); ++i) {
      JsonCursor op = (*rc)[i];
      auto parsed = parse_recompute_op(op.as_string());
      if (!parsed) op.fail("an operator name (" + recompute_op_names() + ")");
      if (s.recompute.has(*parsed)) op.fail_detail("operator listed twice: " + op.as_string());
      s.recompute.add(*parsed);
    }
  }
  if (auto v = c.find("span_nodes")) s.span_nodes = v->as_bool();
  if (auto pred = c.find("predicted")) {
    pred->require_object();
    if (auto m = pred->find("peak_memory_bytes")) {
      s.predicted_peak_memory_bytes = m->as_quantity(limits::kMinBytes, 1e18, true);
    }
  }
  return s;
}

PipelinePlan parse_pipeline(const JsonCursor& c, const ModelSpec& model, Budget& budget) {
  c.require_object();
  c.allow_only({"micro_batch_size", "local_batch", "stages", "predicted"});
  PipelinePlan p;
  p.micro_batch_size = c.at("micro_batch_size").as_int(1, limits::kMaxMicroBatch);
  p.local_batch = c.at("local_batch").as_int(1, limits::kMaxGlobalBatch);
  JsonCursor stages = c.at("stages");
  if (stages.size() == 0) stages.fail("a non-empty array of stages");
  for (std::size_t i = 0; i < stages.size(); ++i) {
    p.stages.push_back(parse_stage(stages[i], model, budget));
  }
  return p;
}

}  // namespace

Plan parse_plan(const JsonCursor& c) {
  c.require_object();
  c.allow_only({"format", "version", "model", "gbs", "seq_len", "pipelines", "cluster",
                "schedule", "predicted", "search", "optimizer_sharding", "optimizer_shards"});
  if (auto f = c.find("format"); f && f->as_string() != kPlanFormat) f->fail("\"eth-plan\"");
  if (auto v = c.find("version")) v->as_int(kPlanVersion, kPlanVersion);
  Plan p;
  JsonCursor model = c.at("model");
  p.model = parse_model(model);
  p.model_is_preset = model.is_string();
  p.gbs = c.at("gbs").as_int(1, limits::kMaxGlobalBatch);
  p.seq_len = c.find("seq_len") ? c.at("seq_len").as_int(1, limits::kMaxSeqLen) : p.model.seq_len;
  JsonCursor pipes = c.at("pipelines");
  if (pipes.size() == 0) pipes.fail("a non-empty array of pipelines");
  Budget budget;
  for (std::size_t i = 0; i < pipes.size(); ++i) {
    p.pipelines.push_back(parse_pipeline(pipes[i], p.model, budget));
  }
  if (auto cl = c.find("cluster")) p.cluster = parse_cluster(*cl);
  if (auto s = c.find("schedule")) {
    p.schedule = s->as_string();
    if (p.schedule != "1f1b" && p.schedule != "gpipe") s->fail("\"1f1b\" or \"gpipe\"");
  }
  if (auto os = c.find("optimizer_sharding")) {
    const std::string name = os->as_string();
    if (name == "none") {
      p.optimizer_sharding = OptimizerSharding::None;
    } else if (name == "even") {
      p.optimizer_sharding = OptimizerSharding::Even;
    } else if (name == "memory") {
      p.optimizer_sharding = OptimizerSharding::Memory;
    } else {
      os->fail("\"none\", \"even\" or \"memory\"");
    }
  }
  if (auto sh = c.find("optimizer_shards")) {
    // One entry per gradient block; each lists its holders, so the device budget bounds both.
    if (sh->size() > static_cast<std::size_t>(limits::kMaxClusterDevices)) {
      sh->fail("at most " + std::to_string(limits::kMaxClusterDevices) + " blocks");
    }
    std::int64_t entries = 0;
    for (std::size_t i = 0; i < sh->size(); ++i) {
      JsonCursor b = (*sh)[i];
      b.require_object();
      b.allow_only({"holders", "elements"});
      BlockShards shards;
      JsonCursor holders = b.at("holders"), elements = b.at("elements");
      if (holders.size() == 0) holders.fail("a non-empty array of device ids");
      entries += static_cast<std::int64_t>(holders.size());
      if (entries > limits::kMaxClusterDevices * 64) holders.fail_detail("too many holders");
      for (std::size_t k = 0; k < holders.size(); ++k) {
        shards.holders.push_back(holders[k].as_int(0, limits::kMaxClusterDevices - 1));
      }
      for (std::size_t k = 0; k < elements.size(); ++k) {
        shards.elements.push_back(elements[k].as_int(0, std::numeric_limits<std::int64_t>::max() / 2));
      }
      p.optimizer_shards.push_back(std::move(shards));
    }
  }
  if (auto pr = c.find("predicted")) p.predicted = pr->value();
  if (auto se = c.find("search")) p.search = se->value();
  return p;
}

Json plan_to_json(const Plan& p) {
  Json j;
  j["format"] = kPlanFormat;
  j["version"] = kPlanVersion;
  j["model"] = p.model_is_preset ? Json(p.model.name) : model_to_json(p.model);
  j["gbs"] = p.gbs;
  j["seq_len"] = p.seq_len;
  j["schedule"] = p.schedule;
  if (p.cluster) j["cluster"] = cluster_to_json(*p.cluster);
  j["pipelines"] = Json::array();
  for (const auto& pipe : p.pipelines) {
    Json jp;
    jp["micro_batch_size"] = pipe.micro_batch_size;
    jp["local_batch"] = pipe.local_batch;
    jp["stages"] = Json::array();
    for (const auto& s : pipe.stages) {
      Json js;
      js["device_type"] = s.device_type;
      js["devices"] = s.devices;
      js["tp"] = s.tp;
      js["dp"] = s.dp;
      js["units"] = Json::array({s.first_unit, s.last_unit});
      js["recompute"] = s.recompute.names();
      if (s.span_nodes) js["span_nodes"] = true;
      if (s.predicted_peak_memory_bytes) {
        js["predicted"] = Json{{"peak_memory_bytes", *s.predicted_peak_memory_bytes}};
      }
      jp["stages"].push_back(js);
    }
    j["pipelines"].push_back(jp);
  }
  if (p.optimizer_sharding != OptimizerSharding::None) {
    j["optimizer_sharding"] = p.optimizer_sharding == OptimizerSharding::Even ? "even" : "memory";
  }
  if (!p.optimizer_shards.empty()) {
    j["optimizer_shards"] = Json::array();
    for (const BlockShards& b : p.optimizer_shards) {
      j["optimizer_shards"].push_back(Json{{"holders", b.holders}, {"elements", b.elements}});
    }
  }
  if (!p.predicted->is_null()) j["predicted"] = *p.predicted;
  if (!p.search->is_null()) j["search"] = *p.search;
  return j;
}

Plan load_plan(const std::string& path) {
  Json j = read_json_file(path, "plan");
  return parse_plan(JsonCursor(j, JsonOrigin{"plan", path, ""}));
}

void save_plan(const Plan& p, const std::string& path) {
  write_file_atomic(path, plan_to_json(p).dump(2) + "\n", "plan");
}

}  // namespace eth
