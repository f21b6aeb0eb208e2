// `eth profile`: writes the analytic profile of every device type of a cluster (ETH's format or
// Metis's), measures the training kernels' own profile on a compute device (--device cpu: device
// type `cpu`; cuda: the GPU's preset, e.g. H200; emulated: device type `emulated`), or shows a
// profile directory of either format. The profile library (profile/) and the trainer's measurement
// (train/measure_profile.h) do the work; this file only parses, checks memory and prints.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/device_choice.h"
#include "cli/output.h"
#include "cli/precision_choice.h"
#include "cli/resources.h"
#include "cli/train_args.h"
#include "cluster/cluster_spec.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/limits.h"
#include "profile/analytic.h"
#include "profile/metis_format.h"
#include "profile/profile_io.h"
#include "comm/mpi/mpi_comm.h"
#include "train/measure_profile.h"

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
  std::string format;    // eth|metis with --analytic, text|json with --show and --measure
  int threads = 1;       // --measure: OpenMP threads (the `cpu` device type is one core)
  int repeats = 3;       // --measure: timed runs per unit (median kept)
  double dropout = 0;    // --measure: dropout probability (masks held and measured)
  std::string precision;  // --measure: fp32 | bf16; empty: the CPU's default
  std::string device;   // --measure: cpu | emulated | cuda (device_choice.h); empty: cpu
  std::string device_type;  // --measure: the entries' device type; empty: the device's own
  std::string cache = "cold";  // --measure: caches flushed before each timed op, or warm
  int optimizer_neighbours = -1;  // -1: every other core (available_cores() / threads - 1)
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
    if (t <= std::max<std::int64_t>(largest, 1) && m.tp_splits(t)) {
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
    throw UsageError("--out", "missing: the folder to write the profile to");
  if (o.cluster.empty()) throw UsageError("--cluster", "missing: a preset name or a cluster file");
  const std::string format = o.format.empty() ? "eth" : o.format;
  if (format != "eth" && format != "metis") {
    throw UsageError("--format", "with --analytic expected eth or metis, got " + format);
  }
  const ModelSpec m = load_model(o.model);
  const ClusterSpec c = load_cluster(o.cluster);
  const std::int64_t seq = o.seq == 0 ? m.seq_len : o.seq;
  if (format == "metis" && seq != m.seq_len) {
    throw InputError("cli", "--seq", "",
                     "Metis's format has no sequence length (readers assume the model's, " +
                         std::to_string(m.seq_len) + "); drop --seq or use --format eth");
  }
  prepare_output_dir(o.out, "profile");  // before any work: --out naming a file is an error
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

double entry_step_ms(const ProfileEntry& e) {
  double ms = e.optimizer_ms;
  for (const auto& u : e.units) ms += u.forward_ms + u.backward_ms;
  return ms;
}

// What a training rank of this machine holds before any model buffer: this process's resident
// set (the binary and its libraries, nothing of a model yet) plus what MPI_Init adds, as `eth
// launch` starts every rank (about 10 MB here). MPI is initialized in a forked child that
// reports its growth and leaves with _exit: MPI cannot be initialized twice in one process, and
// Open MPI keeps allocations until exit by design, which a leak checker would blame on this
// command. The growth is an upper bound: a forked child faults in again the pages of shared
// libraries this process already holds, and those MPI_Init touches count twice (2-3 MB here).
// Without MPI in the build, or when the child cannot report, this process alone.
double training_process_baseline_bytes() {
  const double here = process_resident_bytes();
  if (!mpi_compiled()) return here;
  int fds[2];
  if (::pipe(fds) != 0) return here;
  std::cout.flush();
  std::cerr.flush();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    double added = -1;
    try {
      const double before = process_resident_bytes();
      const MpiSession mpi;
      added = process_resident_bytes() - before;
    } catch (const std::exception&) {
      added = -1;
    }
    const ssize_t n = ::write(fds[1], &added, sizeof added);
    ::_exit(n == sizeof added ? 0 : 1);
  }
  ::close(fds[1]);
  double added = -1;
  const bool got = pid > 0 && ::read(fds[0], &added, sizeof added) == sizeof added;
  ::close(fds[0]);
  if (pid > 0) ::waitpid(pid, nullptr, 0);
  return got && added > 0 ? here + added : here;
}

// The device type a measured profile is written under: --device-type as given, else cpu's
// "cpu", the emulated device's "emulated" (its times are the host CPU's: no GPU's type), and on
// cuda the GPU's preset (H200 on the GPU machine of docs/gpu.md).
std::string measured_device_type(const ProfileOptions& o, Device d) {
  if (!o.device_type.empty()) {
    if (!valid_device_type_name(o.device_type)) {
      throw UsageError("--device-type", device_type_name_rule() + ", got " + o.device_type);
    }
    return o.device_type;
  }
  if (d == Device::Cpu) return "cpu";
  if (d == Device::Emulated) return "emulated";
  const DeviceMemoryInfo gpu = device_memory(ComputeDevice::Cuda);
  const std::string preset = gpu_device_type_preset(gpu.name);
  if (preset.empty()) {
    throw UsageError("--device-type", "missing: this GPU (" + gpu.name +
                                          ") has no device type preset; name the type its "
                                          "profile is for (and define it in the cluster file)");
  }
  return preset;
}

// The memory a measurement may use: the host's on the CPU, the GPU's free memory on cuda, and
// on the emulated device the lesser of its free memory and the host's (its pages are host
// pages).
double measure_memory_limit(Device d) {
  if (d == Device::Cpu) return available_memory_bytes();
  const DeviceMemoryInfo dev = device_memory(compute_device(d));
  if (d == Device::Emulated) return std::min(dev.free_bytes, available_memory_bytes());
  return dev.free_bytes;
}

int run_measure(const ProfileOptions& o) {
  // Every check before any work: measuring gpt2-small takes minutes.
  const Device device = choose_device(o.device, "--device");
  const bool gpu = device != Device::Cpu;
  if (o.out.empty())
    throw UsageError("--out", "missing: the folder to write the profile to");
  if (!o.cluster.empty()) {
    throw UsageError("--cluster", "not used with --measure (it measures this machine's device; "
                                  "name the entries' type with --device-type)");
  }
  if (gpu && o.optimizer_neighbours > 0) {
    throw UsageError("--optimizer-neighbours",
                     "only with --device cpu (a GPU's optimizer step streams its own memory)");
  }
  const std::string device_type = measured_device_type(o, device);
  if (!o.tps.empty()) throw UsageError("--tp", "--measure measures tp 1 only (one process)");
  const std::string format = o.format.empty() ? "text" : o.format;
  if (format != "text" && format != "json") {
    throw UsageError("--format", "with --measure expected text or json, got " + format);
  }
  const PrecisionChoice precision = choose_device_precision(device, o.precision, "--precision");
  std::set<std::int64_t> seen;
  for (std::int64_t b : o.mbss) {
    if (!seen.insert(b).second) {
      throw UsageError("--micro-batch-sizes", "size " + std::to_string(b) + " given twice");
    }
  }
  const ModelSpec m = load_model(o.model);
  require_trainable(m);
  std::vector<MeasureOptions> runs;
  const double memory = measure_memory_limit(device);
  for (std::int64_t b : seen) {  // ascending
    MeasureOptions mo;
    mo.model = m;
    mo.micro_batch = b;
    mo.seq_len = o.seq;
    mo.threads = o.threads;
    mo.repeats = o.repeats;
    mo.dropout = static_cast<float>(o.dropout);
    mo.precision = precision.precision;
    mo.cold_cache = !gpu && o.cache == "cold";
    mo.device = compute_device(device);
    mo.device_type = device_type;
    mo.optimizer_neighbours =
        gpu ? 0
            : o.optimizer_neighbours >= 0
                  ? o.optimizer_neighbours
                  : std::max(0, available_cores() / std::max(1, o.threads) - 1);
    check_measure_options(mo, memory);
    runs.push_back(mo);
  }
  const std::int64_t seq = o.seq == 0 ? m.seq_len : o.seq;
  prepare_output_dir(o.out, "profile");  // before measuring: that takes minutes
  // On a GPU the baseline is device memory, which each measurement reads itself.
  const double baseline = gpu ? -1 : training_process_baseline_bytes();
  for (MeasureOptions& mo : runs) mo.process_baseline_bytes = baseline;
  const std::string on = gpu ? "device " + std::string(o.device) + " (" +
                                   device_memory(compute_device(device)).name + ")"
                             : std::string("this CPU");

  std::cerr << precision.line << "\n" << std::flush;
  ProfileDb db(m);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    std::cerr << "[profile] " << m.name << " mbs " << runs[i].micro_batch << " (" << i + 1 << "/"
              << runs.size() << ", seq " << seq << ", " << o.threads << " thread"
              << (o.threads == 1 ? "" : "s") << ", on " << on << "): measuring "
              << m.num_units() << " units..." << std::flush;
    ProfileEntry e = measure_profile(runs[i]);
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double step = entry_step_ms(e);
    std::cerr << " done in " << fmt_num(s, 1) << " s (step " << fmt_ms(step) << ", "
              << fmt_num(static_cast<double>(runs[i].micro_batch * seq) / step * 1e3, 0)
              << " tok/s)\n";
    db.add(std::move(e));
  }
  // Written only once every size is measured; each file atomically.
  const std::size_t files = write_profile_dir(db, o.out);

  if (format == "json") {
    Json entries = Json::array();
    for (const auto& [key, e] : db.entries()) {
      Json j = profile_entry_to_json(m, e);
      const double step = entry_step_ms(e);
      entries.push_back(Json{{"mbs", key.mbs},
                             {"step_ms", step},
                             {"tokens_per_s", static_cast<double>(key.mbs * seq) / step * 1e3},
                             {"profile", j}});
    }
    print_json(Json{{"model", m.name},
                    {"device", gpu ? o.device : std::string("cpu")},
                    {"device_type", device_type},
                    {"precision", std::string(precision_name(precision.precision))},
                    {"seq", seq},
                    {"threads", o.threads},
                    {"dropout", o.dropout},
                    {"cache", gpu ? std::string("-") : o.cache},
                    {"out", o.out},
                    {"files", files},
                    {"entries", entries}});
    return kExitOk;
  }
  Table t({"mbs", "embed fwd+bwd ms", "block fwd ms", "block bwd ms", "block activation",
           "head fwd+bwd ms", "optimizer ms", "step ms", "tok/s"});
  for (const auto& [key, e] : db.entries()) {
    const auto& embed = e.units.front();
    const auto& head = e.units.back();
    const double step = entry_step_ms(e);
    t.add({std::to_string(key.mbs), ms_cell(embed.forward_ms + embed.backward_ms),
           block_ms(e, true), block_ms(e, false), block_act(e),
           ms_cell(head.forward_ms + head.backward_ms), ms_cell(e.optimizer_ms), ms_cell(step),
           fmt_num(static_cast<double>(key.mbs * seq) / step * 1e3, 0)});
  }
  std::cout << "measured profile of " << m.name << " on " << on << " ("
            << precision_name(precision.precision) << ", seq " << seq << ", " << o.threads
            << " thread" << (o.threads == 1 ? "" : "s")
            << (gpu ? std::string() : ", caches " + o.cache) << ", dropout " << o.dropout
            << ", device type " << device_type << ", tp 1; block = unit 1, median of "
            << o.repeats << "):\n\n"
            << t.render() << "\nwrote " << files << " files (eth format) to " << o.out << "\n";
  if (device == Device::Emulated) {
    std::cout << "(the emulated device runs the GPU kernel set on this CPU: its times are the "
                 "host's, not a GPU's)\n";
  }
  return kExitOk;
}

int run_show(const ProfileOptions& o) {
  const std::string format = o.format.empty() ? "text" : o.format;
  if (format != "text" && format != "json") {
    throw UsageError("--format", "with --show expected text or json, got " + format);
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
  Table t({"device type", "tp", "mbs", "source", "precision", "seq", "block fwd ms",
           "block bwd ms", "block activation", "head fwd ms", "optimizer ms"});
  for (const auto& [key, e] : db.entries()) {
    t.add({key.device_type, std::to_string(key.tp), std::to_string(key.mbs), e.source,
           std::string(precision_name(e.precision)),
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
      "Write the analytic profile of a cluster's device types (--analytic), measure this "
      "machine's (--measure: device type cpu, or the GPU's with --device cuda), or show a "
      "profile directory in ETH's or Metis's format (--show)");
  auto o = std::make_shared<ProfileOptions>();
  sub->add_flag("--analytic", o->analytic,
                "Profile from FLOP counts and device peaks (docs/profile.md)");
  sub->add_flag("--measure", o->measure,
                "Measure every unit on the training kernels of --device (tp 1) and write an "
                "ETH-format profile to --out");
  sub->add_option("--show", o->show, "Print the profile directory DIR (ETH or Metis format)");
  sub->add_option("--model", o->model, "Model preset name or model JSON file")->required();
  sub->add_option("--cluster", o->cluster,
                  "Cluster preset name or file (with --show: defines the device types of a Metis "
                  "directory that are not presets)");
  sub->add_option("--out", o->out, "Folder to write the profile files to");
  sub->add_option("--tp", o->tps, "Tensor-parallel degrees (default 1,2,4,8 where they fit)")
      ->delimiter(',')
      ->check(CLI::Range(std::int64_t{1}, limits::kMaxTp));
  sub->add_option("--micro-batch-sizes", o->mbss, "Micro-batch sizes (default 1,2,4,8,16)")
      ->delimiter(',')
      ->check(CLI::Range(std::int64_t{1}, limits::kMaxMicroBatch));
  sub->add_option("--seq", o->seq, "Sequence length (default: the model's)")
      ->check(CLI::Range(std::int64_t{1}, limits::kMaxSeqLen));
  sub->add_option("--format", o->format,
                  "--analytic: eth (default) or metis; --show, --measure: text (default) or json");
  sub->add_option("--threads", o->threads,
                  "--measure: OpenMP threads (default 1: the cpu device type is one core; on the "
                  "emulated device the threads its kernels use; cuda: the host side only)")
      ->check(CLI::Range(1, 1024));
  sub->add_option("--repeats", o->repeats, "--measure: timed runs per unit, median kept (3)")
      ->check(CLI::Range(1, 1000));
  sub->add_option("--precision", o->precision,
                  "--measure: fp32 or bf16 kernels (default: bf16 where the CPU has bf16 matrix "
                  "instructions, fp32 otherwise); the profile records it, and eth train --plan "
                  "--profile refuses a profile of another precision than its run")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  sub->add_option("--dropout", o->dropout,
                  "--measure: dropout probability; > 0 also holds the dropout masks (default 0)")
      ->check(CLI::Range(0.0, 0.95));
  sub->add_option("--device", o->device,
                  "--measure: the kernels measured: cpu (default; device type cpu), cuda (the GPU "
                  "kernel set in bf16, device memory; device type the GPU's preset, e.g. H200; "
                  "refused with the reason where there is no CUDA build or no GPU) or emulated "
                  "(the same set on the host-emulated GPU, device type emulated: its times are "
                  "this CPU's, for CI)")
      ->check(CLI::IsMember(kDeviceNames));
  sub->add_option("--device-type", o->device_type,
                  "--measure: the device type the entries are written under (default: cpu, "
                  "emulated, or the GPU's preset); a preset, or defined in the cluster file "
                  "the profile is planned with");
  sub->add_option("--cache", o->cache,
                  "--measure --device cpu: cold (default) flushes the caches before each timed op, "
                  "as a rank sharing its core (emulation) or running a stage larger than the "
                  "caches finds them; warm times back-to-back repeats (docs/runtime.md); a GPU's "
                  "caches are not the host's, so the GPU devices ignore it")
      ->check(CLI::IsMember({"cold", "warm"}))
      ->capture_default_str();
  sub->add_option("--optimizer-neighbours", o->optimizer_neighbours,
                  "--measure --device cpu: other cores that take an optimizer step of their own "
                  "while the optimizer step is timed, as the ranks of a full node do at once after "
                  "the gradient sync (the step is bound by the memory bandwidth they share); "
                  "default: every other core this process may use; 0 times it alone (a GPU "
                  "device: always 0)")
      ->check(CLI::Range(0, 1024));
  r.on(sub, [o] {
    const int modes = (o->analytic ? 1 : 0) + (o->measure ? 1 : 0) + (o->show.empty() ? 0 : 1);
    if (modes != 1) {
      throw UsageError("--analytic", "choose exactly one of --analytic, --measure, --show");
    }
    if (o->measure) return run_measure(*o);
    if (!o->device.empty()) {
      throw UsageError("--device", "only with --measure (analytic and Metis profiles are "
                                   "computed, not run)");
    }
    if (!o->precision.empty()) {
      throw UsageError("--precision", "only with --measure (analytic and Metis profiles describe "
                                      "16-bit training, precision mixed16)");
    }
    return o->analytic ? run_analytic(*o) : run_show(*o);
  });
}

}  // namespace eth::cli
