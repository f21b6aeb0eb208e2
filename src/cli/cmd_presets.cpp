// `eth models`, `eth devices`, `eth clusters`: list the built-in presets.
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "cli/output.h"
#include "cluster/cluster_spec.h"
#include "model/arithmetic.h"
#include "model/model_spec.h"

namespace eth::cli {

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
    Table t({"name", "layers", "hidden", "heads", "ffn", "seq_len", "vocab", "params"});
    for (const auto& m : model_presets()) {
      const double params = static_cast<double>(total_params(m));
      t.add({m.name, std::to_string(m.layers), std::to_string(m.hidden), std::to_string(m.heads),
             std::to_string(m.ffn), std::to_string(m.seq_len), std::to_string(m.vocab),
             params >= 1e9 ? fmt_num(params / 1e9, 2) + " B" : fmt_num(params / 1e6, 2) + " M"});
    }
    std::cout << t.render()
              << "\nUnits: 0 = embedding, 1..layers = transformer blocks, layers+1 = final norm + "
                 "LM head.\nA model file holds {\"layers\", \"hidden\", \"heads\", \"seq_len\", "
                 "\"vocab\", \"ffn\"?}.\n";
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
