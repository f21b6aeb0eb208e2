// Reading and writing ETH's profile directories (profile_io.h): strict JSON through JsonCursor,
// files written atomically. Doubles are written in shortest round-trip form, so a profile read
// back equals the one written.
#include "profile/profile_io.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster/cluster_spec.h"
#include "core/error.h"
#include "core/json_file.h"
#include "core/limits.h"

namespace eth {

namespace {

constexpr int kNumClasses = kNumRecomputeOps - 1;  // the op[] entries of ActivationBytes

std::string op_name(int i) { return std::string(recompute_op_name(static_cast<RecomputeOp>(i))); }

Json unit_to_json(const UnitProfile& u) {
  Json act = Json::object();
  for (int i = 0; i < kNumClasses; ++i)
    act[op_name(i)] = u.activation.op[static_cast<std::size_t>(i)];
  act["other"] = u.activation.other;
  act["unit_input"] = u.activation.unit_input;
  Json rc = Json::object();
  for (int i = 0; i < kNumRecomputeOps; ++i)
    rc[op_name(i)] = u.recompute_ms[static_cast<std::size_t>(i)];
  return Json{{"forward_ms", u.forward_ms},
              {"backward_ms", u.backward_ms},
              {"params", u.params},
              {"activation_bytes", act},
              {"recompute_ms", rc}};
}

double read_ms(const JsonCursor& c);
double read_bytes(const JsonCursor& c);

// Every key of an object of named non-negative numbers: `names` exactly, no more, no fewer.
void read_named(const JsonCursor& c, const std::vector<std::string>& names, double* out[],
                double (*read)(const JsonCursor&)) {
  c.require_object();
  for (const auto& key : c.keys()) {
    if (std::find(names.begin(), names.end(), key) == names.end()) {
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      c.at(key).fail_detail("unknown field \"" + key + "\"; expected the fields " + list);
    }
  }
  for (std::size_t i = 0; i < names.size(); ++i) *out[i] = read(c.at(names[i]));
}

// A time per unit and micro-batch: 0, or a normal number of milliseconds in range.
double read_ms(const JsonCursor& c) {
  return c.as_quantity(limits::kMinTimeMs, limits::kMaxTimeMs, true);
}
double read_bytes(const JsonCursor& c) {
  return c.as_quantity(limits::kMinBytes, limits::kMaxBytes, true);
}

UnitProfile parse_unit(const JsonCursor& c) {
  c.require_object();
  c.allow_only({"forward_ms", "backward_ms", "params", "activation_bytes", "recompute_ms"});
  UnitProfile u;
  u.forward_ms = read_ms(c.at("forward_ms"));
  u.backward_ms = read_ms(c.at("backward_ms"));
  u.params = c.at("params").as_int(0, limits::kMaxParams);

  std::vector<std::string> act_names;
  std::vector<double*> act_out;
  for (int i = 0; i < kNumClasses; ++i) {
    act_names.push_back(op_name(i));
    act_out.push_back(&u.activation.op[static_cast<std::size_t>(i)]);
  }
  act_names.insert(act_names.end(), {"other", "unit_input"});
  act_out.insert(act_out.end(), {&u.activation.other, &u.activation.unit_input});
  read_named(c.at("activation_bytes"), act_names, act_out.data(), read_bytes);

  std::vector<std::string> rc_names;
  std::vector<double*> rc_out;
  for (int i = 0; i < kNumRecomputeOps; ++i) {
    rc_names.push_back(op_name(i));
    rc_out.push_back(&u.recompute_ms[static_cast<std::size_t>(i)]);
  }
  read_named(c.at("recompute_ms"), rc_names, rc_out.data(), read_ms);
  return u;
}

}  // namespace

std::string profile_file_name(const ProfileKey& key) {
  return key.device_type + "_tp" + std::to_string(key.tp) + "_mbs" + std::to_string(key.mbs) +
         ".json";
}

Json profile_entry_to_json(const ModelSpec& m, const ProfileEntry& e) {
  Json units = Json::array();
  for (const auto& u : e.units) units.push_back(unit_to_json(u));
  Json j{{"format", kProfileFormat},
              {"version", kProfileFormatVersion},
              {"model", model_to_json(m)},
              {"device_type", e.key.device_type},
              {"tp", e.key.tp},
              {"micro_batch_size", e.key.mbs},
              {"seq_len", e.seq_len},
              {"source", e.source},
              {"precision", std::string(precision_name(e.precision))},
              {"optimizer_ms", e.optimizer_ms},
              {"units", units}};
  // Optional: written where measured, so profiles without it keep their bytes.
  if (e.process_baseline_bytes > 0) j["process_baseline_bytes"] = e.process_baseline_bytes;
  return j;
}

ProfileEntry parse_profile_entry(const JsonCursor& c, const ModelSpec& m) {
  c.require_object();
  c.allow_only({"format", "version", "model", "device_type", "tp", "micro_batch_size", "seq_len",
                "source", "precision", "optimizer_ms", "units", "process_baseline_bytes"});
  if (c.at("format").as_string() != kProfileFormat) c.at("format").fail("\"eth-profile\"");
  const std::int64_t version = c.at("version").as_int();
  if (version != 1 && version != kProfileFormatVersion) {
    c.at("version").fail("version 1 or " + std::to_string(kProfileFormatVersion));
  }
  const ModelSpec file_model = parse_model(c.at("model"));
  if (file_model != m) {
    c.at("model").fail_detail("profile is of model " + file_model.name + ", not of " + m.name +
                              " (dimensions differ); profile the model first");
  }
  ProfileEntry e;
  e.key.device_type = c.at("device_type").as_string();
  if (!valid_device_type_name(e.key.device_type)) {
    c.at("device_type").fail(device_type_name_rule());
  }
  e.key.tp = c.at("tp").as_int(1, limits::kMaxTp);
  e.key.mbs = c.at("micro_batch_size").as_int(1, limits::kMaxMicroBatch);
  e.seq_len = c.at("seq_len").as_int(1, m.seq_len);
  e.source = c.at("source").as_string();
  if (e.source != "analytic" && e.source != "metis" && e.source != "measured") {
    c.at("source").fail("one of analytic, metis, measured");
  }
  if (version == 1) {
    if (auto pr = c.find("precision")) pr->fail_detail("version 1 files have no precision");
    e.precision = e.source == "measured" ? Precision::Fp32 : Precision::Mixed16;
  } else {
    const auto p = parse_precision(c.at("precision").as_string());
    if (!p) c.at("precision").fail("one of fp32, bf16, mixed16");
    e.precision = *p;
  }
  e.optimizer_ms = read_ms(c.at("optimizer_ms"));
  if (auto b = c.find("process_baseline_bytes")) e.process_baseline_bytes = read_bytes(*b);
  JsonCursor units = c.at("units");
  if (static_cast<std::int64_t>(units.size()) != m.num_units()) {
    units.fail_detail("has " + std::to_string(units.size()) + " units; model " + m.name + " has " +
                      std::to_string(m.num_units()) + " (embedding, " + std::to_string(m.layers) +
                      " blocks, head)");
  }
  for (std::size_t i = 0; i < units.size(); ++i) {
    e.units.push_back(parse_unit(units[i]));
  }
  return e;
}

std::size_t write_profile_dir(const ProfileDb& db, const std::filesystem::path& dir) {
  prepare_output_dir(dir, "profile");
  for (const auto& [key, e] : db.entries()) {
    write_file_atomic(dir / profile_file_name(key),
                      profile_entry_to_json(db.model(), e).dump(1) + "\n", "profile");
  }
  return db.entries().size();
}

ProfileDb read_profile_dir(const std::filesystem::path& dir, const ModelSpec& m) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    throw InputError("profile", dir.string(), "", "expected a profile directory");
  }
  // Sorted: the first bad file is always the same.
  std::vector<std::filesystem::path> files;
  for (const auto& f : list_regular_files(dir, "profile")) {
    if (f.extension() == ".json") files.push_back(f);
  }
  if (files.empty()) {
    throw InputError("profile", dir.string(), "",
                     "expected profile files <device_type>_tp<T>_mbs<B>.json, found none");
  }
  ProfileDb db(m);
  std::map<std::string, std::pair<Precision, std::filesystem::path>> precision_of;  // by type
  for (const auto& f : files) {
    const Json j = read_json_file(f, "profile");
    const JsonCursor c(j, JsonOrigin{"profile", f.string(), ""});
    ProfileEntry e = parse_profile_entry(c, m);
    if (f.filename().string() != profile_file_name(e.key)) {
      throw InputError(
          "profile", f.string(), "",
          "file name disagrees with its content: expected " + profile_file_name(e.key));
    }
    // One device type, one precision: lookups interpolate between its entries.
    const auto [it, first] = precision_of.try_emplace(e.key.device_type, e.precision, f);
    if (!first && it->second.first != e.precision) {
      throw InputError("profile", f.string(), "precision",
                       "is " + std::string(precision_name(e.precision)) + " but " +
                           it->second.second.filename().string() + " of the same device type is " +
                           std::string(precision_name(it->second.first)) +
                           "; measure every micro-batch size in one precision");
    }
    db.add(std::move(e));
  }
  return db;
}

}  // namespace eth
