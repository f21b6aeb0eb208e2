// `eth models`, `eth devices`, `eth clusters`: list the built-in presets.
#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/output.h"
#include "cluster/cluster_spec.h"
#include "model/arithmetic.h"
#include "model/model_spec.h"

namespace eth::cli {

namespace {
// "gpt", or the Llama family's parts in a few characters: "rms+rope+swiglu", "-bias", "tied".
std::string architecture_label(const ModelSpec& m) {
  if (m.is_gpt()) return "gpt";
  std::string s = m.norm == NormKind::RmsNorm ? "rms" : "ln";
  s += std::string("+") + positions_name(m.positions) + "+" + mlp_name(m.mlp);
  if (!m.bias) s += " -bias";
  if (m.tied_embeddings) s += " tied";
  return s;
}
}  // namespace

void add_models_command(CLI::App& app, Registry& r) {
  auto* sub = app.add_subcommand("models", "List the built-in model presets (use with --model)");
  auto format = std::make_shared<Format>(Format::Text);
  add_format_option(sub, format.get());
  r.on(sub, [format] {
    if (*format == Format::Json) {
      Json arr = Json::array();
      for (const auto& m : model_presets()) {
        Json j = model_to_json(m);
        j["params"] = total_params(m);
        arr.push_back(j);
      }
      print_json(arr);
      return kExitOk;
    }
    Table t({"name", "arch", "layers", "hidden", "heads", "kv", "ffn", "seq_len", "vocab",
             "params"});
    for (const auto& m : model_presets()) {
      const double params = static_cast<double>(total_params(m));
      t.add({m.name, architecture_label(m), std::to_string(m.layers), std::to_string(m.hidden),
             std::to_string(m.heads), std::to_string(m.num_kv_heads()), std::to_string(m.ffn),
             std::to_string(m.seq_len), std::to_string(m.vocab),
             params >= 1e9 ? fmt_num(params / 1e9, 2) + " B" : fmt_num(params / 1e6, 2) + " M"});
    }
    std::cout << t.render()
              << "\nUnits: 0 = embedding, 1..layers = transformer blocks, layers+1 = final norm + "
                 "LM head.\nA model file holds {\"layers\", \"hidden\", \"heads\", \"seq_len\", "
                 "\"vocab\", \"ffn\"?} and optionally the architecture: \"kv_heads\", "
                 "\"norm\", \"norm_eps\", \"positions\", \"rope_theta\", \"mlp\", \"bias\", "
                 "\"tied_embeddings\" (see `eth models --format json`).\n";
    return kExitOk;
  });
}

void add_devices_command(CLI::App& app, Registry& r) {
  auto* sub = app.add_subcommand("devices", "List the built-in device types");
  auto format = std::make_shared<Format>(Format::Text);
  add_format_option(sub, format.get());
  r.on(sub, [format] {
    if (*format == Format::Json) {
      Json arr = Json::array();
      // Each entry, as printed, is a valid "device_types" entry of a cluster file.
      for (const auto& d : device_type_presets()) {
        Json j = Json{{"name", d.name}};
        j.update(device_type_to_json(d));
        arr.push_back(j);
      }
      print_json(arr);
      return kExitOk;
    }
    Table t({"name", "TFLOPS (16-bit)", "memory GB", "intra-node Gbps"});
    for (const auto& d : device_type_presets()) {
      t.add({d.name, fmt_num(d.tflops, d.tflops < 1 ? 2 : 0), fmt_num(d.memory_gb, 0),
             fmt_num(d.intra_node_bandwidth_gbps, 0)});
    }
    std::cout << t.render() << "\nInter-node bandwidth is a cluster property (default "
              << fmt_num(ClusterSpec::kDefaultInterNodeGbps, 0)
              << " Gbps); a cluster file may define more types under \"device_types\".\n";
    return kExitOk;
  });
}

void add_clusters_command(CLI::App& app, Registry& r) {
  auto* sub = app.add_subcommand("clusters", "List the built-in cluster presets (use with --cluster)");
  auto format = std::make_shared<Format>(Format::Text);
  add_format_option(sub, format.get());
  r.on(sub, [format] {
    if (*format == Format::Json) {
      Json arr = Json::array();
      for (const auto& p : cluster_presets()) {
        Json j = cluster_to_json(p.spec);
        j["description"] = p.description;
        j["devices"] = p.spec.num_devices();
        arr.push_back(j);
      }
      print_json(arr);
      return kExitOk;
    }
    Table t({"name", "devices", "shape"});
    for (const auto& p : cluster_presets()) {
      t.add({p.name, std::to_string(p.spec.num_devices()), p.description});
    }
    std::cout << t.render();
    return kExitOk;
  });
}

}  // namespace eth::cli
