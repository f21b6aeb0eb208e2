// `eth profile`: writes the analytic profile of every device type of a cluster (ETH's format or
// Metis's), or shows a profile directory of either format. Measured profiles come with the CPU
// runtime; the profile library (profile/) does the work, this file only parses and prints.
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include "cli/command.h"
#include "cli/output.h"
#include "cluster/cluster_spec.h"
#include "core/error.h"
#include "profile/analytic.h"
#include "profile/metis_format.h"
#include "profile/profile_io.h"

namespace eth::cli {

namespace {

struct ProfileOptions {
  bool analytic = false;
  bool measure = false;
  std::string show;
  std::string model;
  std::string cluster;
  std::string out;
  std::vector<std::int64_t> tps;
  std::vector<std::int64_t> mbss{1, 2, 4, 8, 16};
  std::int64_t seq = 0;  // 0: the model's
  std::string format;    // eth|metis with --analytic, text|json with --show
};

// The tp degrees to profile for one device type: --tp as given, or by default 1, 2, 4, 8 where
// the model splits that way and a node of this type has that many devices (tp stays in a node).
std::vector<std::int64_t> tps_for(const ProfileOptions& o, const ModelSpec& m, const ClusterSpec& c,
                                  const std::string& type) {
  if (!o.tps.empty()) return o.tps;
  std::int64_t largest = 0;
  for (const auto& n : c.nodes) {
    if (n.device_type == type) largest = std::max(largest, n.devices);
  }
  std::vector<std::int64_t> out;
  for (std::int64_t t : {1, 2, 4, 8}) {
    if (t <= std::max<std::int64_t>(largest, 1) && m.heads % t == 0 && m.ffn % t == 0) {
      out.push_back(t);
    }
  }
  return out;
}

// Milliseconds with 4 significant digits: tiny models run in microseconds, big ones in seconds.
std::string ms_cell(double ms) {
  std::ostringstream s;
  s << std::setprecision(4) << ms;
  return s.str();
}

std::string block_ms(const ProfileEntry& e, bool forward) {
  if (e.units.size() < 3) return "-";
  return ms_cell(forward ? e.units[1].forward_ms : e.units[1].backward_ms);
}

std::string block_act(const ProfileEntry& e) {
  if (e.units.size() < 3) return "-";
  return fmt_bytes(e.units[1].activation.total());
}

int run_analytic(const ProfileOptions& o) {
  if (o.out.empty())
    throw InputError("cli", "--out", "", "missing: the folder to write the profile to");
  if (o.cluster.empty())
    throw InputError("cli", "--cluster", "", "missing: a preset name or a cluster file");
  const std::string format = o.format.empty() ? "eth" : o.format;
  if (format != "eth" && format != "metis") {
    throw InputError("cli", "--format", "", "with --analytic expected eth or metis, got " + format);
  }
  const ModelSpec m = load_model(o.model);
  const ClusterSpec c = load_cluster(o.cluster);
  const std::int64_t seq = o.seq == 0 ? m.seq_len : o.seq;
  if (format == "metis" && seq != m.seq_len) {
    throw InputError("cli", "--seq", "",
                     "Metis's format has no sequence length (readers assume the model's, " +
                         std::to_string(m.seq_len) + "); drop --seq or use --format eth");
  }
  ProfileDb db(m);
  for (const auto& [name, type] : c.device_types) {
    for (std::int64_t tp : tps_for(o, m, c, name)) {
      for (std::int64_t mbs : o.mbss) db.add(analytic_profile(m, type, tp, mbs, seq));
    }
  }
  const std::size_t files =
      format == "metis" ? write_metis_profile_dir(db, o.out) : write_profile_dir(db, o.out);

  Table t({"device type", "tp", "mbs", "block fwd ms", "block bwd ms", "block activation"});
  for (const auto& [key, e] : db.entries()) {
    t.add({key.device_type, std::to_string(key.tp), std::to_string(key.mbs), block_ms(e, true),
           block_ms(e, false), block_act(e)});
  }
  std::cout << "analytic profile of " << m.name << " (seq " << seq << ") on the device types of "
            << c.name << ":\n\n"
            << t.render() << "\nwrote " << files << " files (" << format << " format) to " << o.out
            << "\n";
  return kExitOk;
}

int run_show(const ProfileOptions& o) {
  const std::string format = o.format.empty() ? "text" : o.format;
  if (format != "text" && format != "json") {
    throw InputError("cli", "--format", "", "with --show expected text or json, got " + format);
  }
  const ModelSpec m = load_model(o.model);
  const bool metis = is_metis_profile_dir(o.show);
  std::optional<ClusterSpec> cluster;
  if (!o.cluster.empty()) cluster = load_cluster(o.cluster);
  const ProfileDb db = metis ? read_metis_profile_dir(o.show, m, cluster ? &*cluster : nullptr)
                             : read_profile_dir(o.show, m);
  if (format == "json") {
    Json entries = Json::array();
    for (const auto& [key, e] : db.entries()) entries.push_back(profile_entry_to_json(m, e));
    print_json(Json{{"dir", o.show}, {"format", metis ? "metis" : "eth"}, {"entries", entries}});
    return kExitOk;
  }
  Table t({"device type", "tp", "mbs", "source", "seq", "block fwd ms", "block bwd ms",
           "block activation", "head fwd ms", "optimizer ms"});
  for (const auto& [key, e] : db.entries()) {
    t.add({key.device_type, std::to_string(key.tp), std::to_string(key.mbs), e.source,
           std::to_string(e.seq_len), block_ms(e, true), block_ms(e, false), block_act(e),
           ms_cell(e.units.back().forward_ms), ms_cell(e.optimizer_ms)});
  }
  std::cout << o.show << " (" << (metis ? "Metis" : "ETH") << " format), model " << m.name << ", "
            << db.entries().size() << " entries:\n\n"
            << t.render();
  return kExitOk;
}

}  // namespace

void add_profile_command(CLI::App& app, Registry& r) {
  auto* sub = app.add_subcommand(
      "profile",
      "Write the analytic profile of a cluster's device types (--analytic), or show a profile "
      "directory in ETH's or Metis's format (--show)");
  auto o = std::make_shared<ProfileOptions>();
  sub->add_flag("--analytic", o->analytic,
                "Profile from FLOP counts and device peaks (docs/profile.md)");
  sub->add_flag("--measure", o->measure,
                "Measure on the runtime's kernels (comes with the CPU runtime)");
  sub->add_option("--show", o->show, "Print the profile directory DIR (ETH or Metis format)");
  sub->add_option("--model", o->model, "Model preset name or model JSON file")->required();
  sub->add_option("--cluster", o->cluster,
                  "Cluster preset name or file (with --show: defines the device types of a Metis "
                  "directory that are not presets)");
  sub->add_option("--out", o->out, "Folder to write the profile files to");
  sub->add_option("--tp", o->tps, "Tensor-parallel degrees (default 1,2,4,8 where they fit)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  sub->add_option("--micro-batch-sizes", o->mbss, "Micro-batch sizes (default 1,2,4,8,16)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  sub->add_option("--seq", o->seq, "Sequence length (default: the model's)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--format", o->format,
                  "--analytic: eth (default) or metis; --show: text (default) or json");
  r.on(sub, [o] {
    const int modes = (o->analytic ? 1 : 0) + (o->measure ? 1 : 0) + (o->show.empty() ? 0 : 1);
    if (modes != 1) {
      throw InputError("cli", "--analytic", "",
                       "choose exactly one of --analytic, --measure, --show");
    }
    if (o->measure) {
      throw InputError("cli", "--measure", "",
                       "measured profiles come with the CPU runtime, which is not built yet; "
                       "use --analytic, or --show a Metis profile directory");
    }
    return o->analytic ? run_analytic(*o) : run_show(*o);
  });
}

}  // namespace eth::cli
