// Metis's profile, hostfile and clusterfile formats (metis_format.h). Metis keeps per layer
// only a compute time and a memory total; ETH rebuilds the rest from the analytic profile of the
// same (model, device, tp, micro-batch) by scaling it to Metis's totals, so what ETH writes reads
// back to the very same numbers. The conventions below were read off Metis's own files
// (docs/profile.md, "Metis mapping").
#include "profile/metis_format.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_file.h"
#include "core/limits.h"
#include "model/arithmetic.h"
#include "profile/analytic.h"

namespace eth {

namespace {

constexpr double kMiB = 1048576.0;  // Metis's "MB"
// Metis's parameters_per_layer_bytes counts the whole layer (not divided by tp) at 2 bytes per
// parameter; its memory figures charge 16 bytes per parameter held per tp rank (16-bit weight
// and gradient, fp32 master weight and Adam moments), with every parameter divided by tp.
constexpr double kMetisBytesPerParam = 2.0;
constexpr double kStateBytesPerParam = 16.0;

const std::pair<const char*, const char*> kNameMap[] = {
    {"B2", "910B2"}, {"B3", "910B3"}, {"B4", "910B4"}};

double state_bytes(double param_bytes, std::int64_t tp) {
  return kStateBytesPerParam * (param_bytes / kMetisBytesPerParam) / static_cast<double>(tp);
}

// What Metis calls a layer's activation parameter bytes: the 16-bit tensor a stage hands to the
// next (s*b*h), and for the head the vocabulary-parallel logits (s*b*V/tp).
std::int64_t metis_boundary_bytes(const ModelSpec& m, std::int64_t unit, std::int64_t tp,
                                  std::int64_t mbs, std::int64_t seq) {
  if (unit_kind(m, unit) == UnitKind::Head) return 2 * seq * mbs * m.vocab / tp;
  return 2 * seq * mbs * m.hidden;
}

// A per-layer list of exactly m.num_units() numbers, each 0 or a normal number in [min, max].
std::vector<double> read_layer_list(const JsonCursor& c, const ModelSpec& m, double min,
                                    double max) {
  if (!c.is_array()) c.fail("an array with one number per layer");
  if (static_cast<std::int64_t>(c.size()) != m.num_units()) {
    c.fail_detail("has " + std::to_string(c.size()) + " entries; model " + m.name + " has " +
                  std::to_string(m.num_units()) + " layers (embedding, " +
                  std::to_string(m.layers) + " blocks, head)");
  }
  std::vector<double> out;
  for (std::size_t i = 0; i < c.size(); ++i) out.push_back(c[i].as_quantity(min, max, true));
  return out;
}

// Scales `shape` so its forward + backward is `total_ms` and its activation total is
// `act_bytes`, keeping every proportion. When the totals equal the shape's (a file ETH wrote
// from this very shape), the factors are exactly 1 and the result is the shape, bit for bit.
UnitProfile scale_shape(const UnitProfile& shape, double total_ms, double act_bytes) {
  const double shape_ms = shape.forward_ms + shape.backward_ms;
  const double shape_act = shape.activation.total();
  const double rt = shape_ms > 0 ? total_ms / shape_ms : 0.0;
  UnitProfile u = shape;
  if (shape_ms > 0) {
    u.forward_ms = shape.forward_ms * rt;
    u.backward_ms = shape.backward_ms * rt;
  } else {  // no shape to follow: the usual backward = 2 x forward
    u.forward_ms = total_ms / 3.0;
    u.backward_ms = total_ms - u.forward_ms;
  }
  for (auto& r : u.recompute_ms) r *= rt;
  u.recompute_ms[static_cast<std::size_t>(RecomputeOp::Unit)] = u.forward_ms;
  if (shape_act > 0) {
    const double rm = act_bytes / shape_act;
    for (auto& b : u.activation.op) b *= rm;
    u.activation.other *= rm;
  } else {
    u.activation.op.fill(0.0);
    u.activation.other = act_bytes;
  }
  // The unit's input is one known tensor (it is what the previous stage sent): keep its size.
  u.activation.unit_input = std::min(shape.activation.unit_input, act_bytes);
  return u;
}

const DeviceType& resolve_device(const std::string& name, const ClusterSpec* cluster,
                                 const std::filesystem::path& file, DeviceType& storage) {
  if (cluster && cluster->device_types.count(name)) return cluster->device_types.at(name);
  if (auto preset = find_device_type_preset(name)) {
    storage = *preset;
    return storage;
  }
  throw InputError("profile", file.string(), "",
                   "device type " + name +
                       " is neither a preset nor in the cluster given; pass the cluster that "
                       "defines it (its figures split Metis's totals)");
}

// A positive decimal of at most 8 digits and at most `max`, or nullopt.
std::optional<std::int64_t> small_positive(const std::string& digits, std::int64_t max) {
  if (digits.empty() || digits.size() > 8) return std::nullopt;
  std::int64_t v = 0;
  for (char ch : digits) {
    if (ch < '0' || ch > '9') return std::nullopt;
    v = v * 10 + (ch - '0');
  }
  if (v < 1 || v > max) return std::nullopt;
  return v;
}

// `DeviceType.{NAME}_tp{T}_bs{B}.json` -> key in ETH's device naming, or nullopt.
std::optional<ProfileKey> parse_metis_file_name(const std::string& name) {
  const std::string prefix = "DeviceType.", suffix = ".json";
  if (!name.starts_with(prefix) || !name.ends_with(suffix)) return std::nullopt;
  const std::string stem = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  const auto bs = stem.rfind("_bs");
  if (bs == std::string::npos) return std::nullopt;
  const auto tp = stem.rfind("_tp", bs);
  if (tp == std::string::npos || tp == 0) return std::nullopt;
  const auto t = small_positive(stem.substr(tp + 3, bs - tp - 3), limits::kMaxTp);
  const auto b = small_positive(stem.substr(bs + 3), limits::kMaxMicroBatch);
  const std::string type = metis_to_eth_device_name(stem.substr(0, tp));
  if (!t || !b || !valid_device_type_name(type)) return std::nullopt;
  return ProfileKey{type, *t, *b};
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

}  // namespace

std::string metis_to_eth_device_name(const std::string& metis_name) {
  for (const auto& [metis, eth] : kNameMap) {
    if (metis_name == metis) return eth;
  }
  return metis_name;
}

std::string eth_to_metis_device_name(const std::string& eth_name) {
  for (const auto& [metis, eth] : kNameMap) {
    if (eth_name == eth) return metis;
  }
  return eth_name;
}

std::string metis_profile_file_name(const ProfileKey& key) {
  return "DeviceType." + eth_to_metis_device_name(key.device_type) + "_tp" +
         std::to_string(key.tp) + "_bs" + std::to_string(key.mbs) + ".json";
}

bool is_metis_profile_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return false;
  for (const auto& f : list_regular_files(dir, "profile")) {
    const std::string name = f.filename().string();
    if (name.starts_with("DeviceType.") && name.ends_with(".json")) return true;
  }
  return false;
}

Json metis_profile_to_json(const ModelSpec& m, const ProfileEntry& e) {
  if (e.seq_len != m.seq_len) {
    throw InputError("profile", metis_profile_file_name(e.key), "seq_len",
                     "Metis's format has no sequence length and is read at the model's (" +
                         std::to_string(m.seq_len) + "); this profile is at " +
                         std::to_string(e.seq_len));
  }
  const std::int64_t tp = e.key.tp;
  Json params = Json::array(), boundary = Json::array(), compute = Json::array(),
       memory = Json::array();
  std::int64_t total_param_bytes = 0;
  double fb_ms = 0, total_mb = 0;
  for (std::int64_t u = 0; u < m.num_units(); ++u) {
    const UnitProfile& p = e.units[static_cast<std::size_t>(u)];
    const std::int64_t bytes =
        static_cast<std::int64_t>(kMetisBytesPerParam) * unit_params(m, u, 1);
    const double ms = p.forward_ms + p.backward_ms;
    const double mb = (state_bytes(static_cast<double>(bytes), tp) + p.activation.total()) / kMiB;
    params.push_back(bytes);
    boundary.push_back(metis_boundary_bytes(m, u, tp, e.key.mbs, e.seq_len));
    compute.push_back(ms);
    memory.push_back(mb);
    total_param_bytes += bytes;
    fb_ms += ms;
    total_mb += mb;
  }
  // Metis's optimizer_time_ms is the whole model's step; its total charges optimizer / tp.
  const double optimizer_whole = e.optimizer_ms * static_cast<double>(tp);
  Json j;
  j["model"] = Json{{"model_name", m.name},
                    {"num_layers", m.num_units()},
                    {"parameters", Json{{"total_parameters_bytes", total_param_bytes},
                                        {"parameters_per_layer_bytes", params},
                                        {"activation_parameters_bytes", boundary}}}};
  j["execution_time"] = Json{{"total_time_ms", fb_ms + e.optimizer_ms},
                             {"forward_backward_time_ms", fb_ms},
                             {"batch_generator_time_ms", 0.0},
                             {"layernorm_grads_all_reduce_time_ms", 0.0},
                             {"embedding_grads_all_reduce_time_ms", 0.0},
                             {"optimizer_time_ms", optimizer_whole},
                             {"layer_compute_total_ms", compute}};
  j["execution_memory"] = Json{{"total_memory_mb", total_mb}, {"layer_memory_total_mb", memory}};
  return j;
}

ProfileEntry parse_metis_profile(const JsonCursor& c, const ModelSpec& m, const DeviceType& device,
                                 const ProfileKey& key) {
  // Metis's profiler adds fields between versions: unknown fields are not refused here, every
  // field ETH relies on is required.
  c.require_object();
  const JsonCursor model = c.at("model");
  model.require_object();
  model.at("model_name").as_string();
  const std::int64_t layers = model.at("num_layers").as_int(1, limits::kMaxLayers + 2);
  if (layers != m.num_units()) {
    model.at("num_layers")
        .fail_detail("is " + std::to_string(layers) + "; model " + m.name + " has " +
                     std::to_string(m.num_units()) + " layers in Metis's count (" +
                     std::to_string(m.layers) + " blocks + embedding + head)");
  }
  const JsonCursor params = model.at("parameters");
  params.require_object();
  params.at("total_parameters_bytes").as_quantity(1, 1e18, true);
  const JsonCursor per_layer = params.at("parameters_per_layer_bytes");
  const double max_param_bytes = kMetisBytesPerParam * static_cast<double>(limits::kMaxParams);
  const std::vector<double> param_bytes = read_layer_list(per_layer, m, 1, max_param_bytes);
  read_layer_list(params.at("activation_parameters_bytes"), m, 1, limits::kMaxBytes);

  const JsonCursor time = c.at("execution_time");
  time.require_object();
  for (const char* f :
       {"total_time_ms", "forward_backward_time_ms", "batch_generator_time_ms",
        "layernorm_grads_all_reduce_time_ms", "embedding_grads_all_reduce_time_ms"}) {
    time.at(f).as_quantity(limits::kMinTimeMs, 1e12, true);
  }
  const double optimizer_whole =
      time.at("optimizer_time_ms").as_quantity(limits::kMinTimeMs, limits::kMaxTimeMs, true);
  const std::vector<double> compute_ms = read_layer_list(
      time.at("layer_compute_total_ms"), m, limits::kMinTimeMs, limits::kMaxTimeMs);
  const JsonCursor mem = c.at("execution_memory");
  mem.require_object();
  mem.at("total_memory_mb").as_quantity(limits::kMinBytes / kMiB, 1e15, true);
  const JsonCursor layer_mem = mem.at("layer_memory_total_mb");
  const std::vector<double> memory_mb =
      read_layer_list(layer_mem, m, limits::kMinBytes / kMiB, limits::kMaxBytes / kMiB);

  const ProfileEntry shape = analytic_profile(m, device, key.tp, key.mbs, m.seq_len);
  ProfileEntry e;
  e.key = key;
  e.seq_len = m.seq_len;
  e.source = "metis";
  e.optimizer_ms = optimizer_whole / static_cast<double>(key.tp);
  for (std::int64_t u = 0; u < m.num_units(); ++u) {
    const auto i = static_cast<std::size_t>(u);
    // The model given must be the model profiled; 1% leaves room for a padded vocabulary.
    const double want = static_cast<double>(unit_params(m, u, 1));
    const double got = param_bytes[i] / kMetisBytesPerParam;
    if (std::abs(got - want) > 0.01 * want) {
      per_layer[i].fail_detail("is " + json_brief(per_layer[i].value()) +
                               " bytes = " + std::to_string(static_cast<std::int64_t>(got)) +
                               " parameters at 2 bytes each; layer " + std::to_string(u) +
                               " of model " + m.name + " has " +
                               std::to_string(static_cast<std::int64_t>(want)) +
                               " (is --model the profiled model?)");
    }
    const double act = memory_mb[i] * kMiB - state_bytes(param_bytes[i], key.tp);
    if (act < 0) {
      layer_mem[i].fail_detail("is " + json_brief(layer_mem[i].value()) +
                               " MB, less than the 16 bytes per parameter its weights, gradients "
                               "and optimizer state need at tp " +
                               std::to_string(key.tp));
    }
    UnitProfile p = scale_shape(shape.units[i], compute_ms[i], act);
    p.params = unit_params(m, u, key.tp);
    e.units.push_back(p);
  }
  return e;
}

std::size_t write_metis_profile_dir(const ProfileDb& db, const std::filesystem::path& dir) {
  prepare_output_dir(dir, "profile");
  for (const auto& [key, e] : db.entries()) {
    write_file_atomic(dir / metis_profile_file_name(key),
                      metis_profile_to_json(db.model(), e).dump(1) + "\n", "profile");
  }
  return db.entries().size();
}

ProfileDb read_metis_profile_dir(const std::filesystem::path& dir, const ModelSpec& m,
                                 const ClusterSpec* cluster) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    throw InputError("profile", dir.string(), "", "expected a Metis profile directory");
  }
  std::vector<std::filesystem::path> files;
  for (const auto& f : list_regular_files(dir, "profile")) {
    const std::string name = f.filename().string();
    if (name.starts_with("DeviceType.") && name.ends_with(".json")) files.push_back(f);
  }
  if (files.empty()) {
    throw InputError("profile", dir.string(), "",
                     "expected Metis profile files DeviceType.{NAME}_tp{T}_bs{B}.json, found none");
  }
  ProfileDb db(m);
  for (const auto& f : files) {
    const std::optional<ProfileKey> key = parse_metis_file_name(f.filename().string());
    if (!key) {
      throw InputError("profile", f.string(), "",
                       "file name must be DeviceType.{NAME}_tp{T}_bs{B}.json with T in 1.." +
                           std::to_string(limits::kMaxTp) + ", B in 1.." +
                           std::to_string(limits::kMaxMicroBatch) + " and NAME " +
                           device_type_name_rule());
    }
    DeviceType storage;
    const DeviceType& device = resolve_device(key->device_type, cluster, f, storage);
    const Json j = read_json_file(f, "profile");
    try {
      db.add(parse_metis_profile(JsonCursor(j, JsonOrigin{"profile", f.string(), ""}), m, device,
                                 *key));
    } catch (const InputErrors&) {
      throw;
    } catch (const InputError& err) {
      if (!err.source().empty()) throw;
      // Errors of the analytic shape (a tp the model cannot split) name the file too.
      throw InputError("profile", f.string(), err.path(), err.detail());
    }
  }
  return db;
}

ClusterSpec read_metis_cluster(const std::filesystem::path& hostfile,
                               const std::filesystem::path& clusterfile,
                               const std::map<std::string, double>& tflops) {
  const std::string host_text = read_text_file(hostfile, "cluster");
  const Json cj = read_json_file(clusterfile, "cluster");
  const JsonCursor root(cj, JsonOrigin{"cluster", clusterfile.string(), ""});
  // One lookup per hostfile line: index the clusterfile once.
  std::unordered_map<std::string, JsonCursor> hosts;
  for (auto& [ip, node] : root.members()) hosts.emplace(ip, node);

  ClusterSpec out;
  out.name = "metis:" + clusterfile.parent_path().filename().string();
  std::map<std::string, std::string> defined_by;  // type -> the IP whose figures define it
  double min_inter = 0;
  std::int64_t total_devices = 0;
  std::istringstream lines(host_text);
  std::string line;
  for (int line_no = 1; std::getline(lines, line); ++line_no) {
    line = trim(line);
    if (line.empty() || line[0] == '#') continue;
    const std::string where = "line " + std::to_string(line_no);
    std::istringstream words(line);
    std::string ip, slots, extra;
    words >> ip >> slots;
    std::optional<std::int64_t> n;
    if (slots.starts_with("slots=") && !(words >> extra)) {
      n = small_positive(slots.substr(6), limits::kMaxDevicesPerNode);
    }
    if (!n) {
      throw InputError("cluster", hostfile.string(), where,
                       "expected \"IP slots=N\" with N in 1.." +
                           std::to_string(limits::kMaxDevicesPerNode) + ", got \"" +
                           message_text(line, 80) + "\"");
    }
    total_devices += *n;
    if (total_devices > limits::kMaxClusterDevices) {
      throw InputError("cluster", hostfile.string(), where,
                       "brings the cluster to " + std::to_string(total_devices) +
                           " devices; at most " + std::to_string(limits::kMaxClusterDevices) +
                           " are allowed (the most the planner searches in bounded time)");
    }
    const auto host = hosts.find(ip);
    if (host == hosts.end()) root.at(ip);  // throws: names the missing host
    const JsonCursor& node = host->second;
    node.require_object();
    const std::string metis_type = node.at("instance_type").as_string();
    const std::string type = metis_to_eth_device_name(metis_type);
    if (!valid_device_type_name(type)) node.at("instance_type").fail(device_type_name_rule());
    auto gbps = [&](const char* field) {
      const JsonCursor f = node.at(field);
      const double v = f.as_positive_number();
      // Metis's README once gave bandwidths in bytes/s; here they are GB/s.
      if (v > 1e5) f.fail("a bandwidth in GB/s (this looks like bytes/s)");
      return f.as_quantity(limits::kMinBandwidthGbps / 8, 1e5) * 8.0;
    };
    DeviceType d;
    if (auto preset = find_device_type_preset(type)) {
      d = *preset;
    } else {
      auto it = tflops.find(type);
      if (it == tflops.end()) it = tflops.find(metis_type);
      if (it == tflops.end() || !(it->second >= limits::kMinTflops) ||
          !(it->second <= limits::kMaxTflops)) {
        node.at("instance_type")
            .fail_detail(
                "device type \"" + metis_type +
                "\" is not an ETH preset and Metis's files carry no peak TFLOPS: give its 16-bit "
                "peak TFLOPS, or describe the cluster in ETH's cluster format");
      }
      d.name = type;
      d.tflops = it->second;
    }
    d.memory_gb = node.at("memory").as_quantity(limits::kMinMemoryGb, limits::kMaxMemoryGb);
    d.intra_node_bandwidth_gbps = gbps("intra_bandwidth");
    d.inter_node_bandwidth_gbps = gbps("inter_bandwidth");
    min_inter = min_inter == 0 ? *d.inter_node_bandwidth_gbps
                               : std::min(min_inter, *d.inter_node_bandwidth_gbps);
    auto known = out.device_types.find(type);
    if (known == out.device_types.end() &&
        out.device_types.size() >= static_cast<std::size_t>(limits::kMaxDeviceTypes)) {
      node.at("instance_type")
          .fail_detail("is one device type too many: a cluster has at most " +
                       std::to_string(limits::kMaxDeviceTypes));
    }
    if (known == out.device_types.end()) {
      out.device_types[type] = d;
      out.custom_types.push_back(type);  // figures from the clusterfile, so written out in full
      defined_by[type] = ip;
    } else if (!(known->second == d)) {
      node.fail_detail("differs from " + defined_by[type] + " of the same instance_type \"" +
                       metis_type + "\"; ETH describes a device type by one set of figures");
    }
    out.nodes.push_back(NodeSpec{type, *n});
  }
  if (out.nodes.empty()) {
    throw InputError("cluster", hostfile.string(), "", "expected \"IP slots=N\" lines, found none");
  }
  out.inter_node_bandwidth_gbps = min_inter;
  return out;
}

}  // namespace eth
