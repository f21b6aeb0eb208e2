// `eth train --plan`: one rank per device of an HPP plan, under MPI (eth launch starts it) or as
// threads of this process (--backend threads). Checks everything before any rank computes and
// reports a bad plan once (rank 0), runs DistributedTrainer through the training loop
// (train/train_loop.h), writes the run's one log (rank 0), and ends with the measured iteration
// time beside the predictor's for the same plan and profile. Emulated heterogeneity is announced as such wherever it applies.
#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/device_choice.h"
#include "launch/fault_injection.h"
#include "cli/output.h"
#include "cli/plan_inputs.h"
#include "cli/precision_choice.h"
#include "cli/train_args.h"
#include "comm/local/local_comm.h"
#include "comm/mpi/mpi_comm.h"
#include "comm/nccl/nccl_comm.h"
#include "comm/staged_comm.h"
#include "core/atomic_file.h"
#include "kernels/cuda/runtime.h"
#include "core/error.h"
#include "core/json_file.h"
#include "cost/predictor.h"
#include "cost/sharding_memory.h"
#include "cost/stage_costs.h"
#include "runtime/dist_trainer.h"
#include "runtime/device_memory_policy.h"
#include "runtime/dist_training_run.h"
#include "runtime/placement.h"
#include "runtime/trace_recorder.h"
#include "train/measure_profile.h"
#include "train/train_loop.h"

namespace eth::cli {

void apply_emulation(ClusterSpec& cluster, const std::vector<std::string>& specs) {
  for (const std::string& spec : specs) {
    const auto eq = spec.find('=');
    double factor = 0;
    std::string type = spec.substr(0, eq);
    bool ok = eq != std::string::npos && eq > 0;
    if (ok) {
      std::istringstream in(spec.substr(eq + 1));
      ok = static_cast<bool>(in >> factor) && in.eof() && std::isfinite(factor) && factor >= 1;
    }
    if (!ok) {
      throw InputError("cli", "--emulate", "",
                       "expected TYPE=FACTOR with FACTOR >= 1 (e.g. cpu-slow=3), got \"" + spec +
                           "\"");
    }
    auto it = cluster.device_types.find(type);
    if (it == cluster.device_types.end()) {
      std::string names;
      for (const auto& [n, t] : cluster.device_types) names += (names.empty() ? "" : ", ") + n;
      throw InputError("cli", "--emulate", "",
                       "no device type \"" + type + "\" in the cluster; it has: " + names);
    }
    it->second.emulated_slowdown = factor;
  }
}

namespace {

// The profile's time for every stage's ops (the predictor's own per-stage figures), which
// emulated ranks' ops last under --emulate-from profile.
std::vector<std::vector<NominalStageTimes>> nominal_times(const Plan& plan,
                                                          const ClusterSpec& cluster,
                                                          const ProfileDb& profile,
                                                          Precision precision,
                                                          AggregationMode aggregation) {
  const std::vector<PipelineCosts> costs =
      compute_stage_costs(plan, cluster, profile, kDefaultP2pLatencyMs, precision, aggregation);
  std::vector<std::vector<NominalStageTimes>> out;
  for (const PipelineCosts& pc : costs) {
    std::vector<NominalStageTimes>& stages = out.emplace_back();
    for (std::size_t s = 0; s < pc.full.size(); ++s) {
      NominalStageTimes n;
      n.forward_ms = pc.full[s].forward_ms;
      n.backward_ms = pc.full[s].backward_ms;
      n.last_forward_ms = pc.last[s].forward_ms;
      n.last_backward_ms = pc.last[s].backward_ms;
      n.unit_backward_ms = pc.full[s].unit_backward_ms;
      n.last_unit_backward_ms = pc.last[s].unit_backward_ms;
      n.optimizer_ms = pc.optimizer_ms[s];
      stages.push_back(std::move(n));
    }
  }
  return out;
}

// Everything a rank needs, resolved and checked once before any rank starts.
struct PlanRun {
  Plan plan;
  ClusterSpec cluster;  // emulated_slowdown already overridden by --emulate
  DistTrainConfig config;
  std::optional<ProfileDb> profile;  // for the prediction, emulated types included
  std::optional<std::filesystem::path> resume;
  CommOptions comm;
  std::string precision_line;  // the run's first line (rank 0)
};

PlanRun prepare(const TrainArgs& a) {
  PlanRun r;
  const Device device = choose_device(a.device, "--device");
  const PrecisionChoice precision = choose_device_precision(device, a.precision, "--precision");
  r.precision_line = precision.line;
  if (device != Device::Cpu) {
    r.precision_line += std::string("; on the ") + compute_device_name(compute_device(device)) +
                        " device";
  }
  r.plan = load_plan(a.plan);
  r.cluster = cluster_for_plan(r.plan, a.cluster);
  apply_emulation(r.cluster, a.emulate);
  if (!a.model.empty() && !(load_model(a.model) == r.plan.model)) {
    throw InputError("cli", "--model", "",
                     "the plan trains " + r.plan.model.name + ", not " + a.model +
                         " (leave --model out to take the plan's)");
  }
  if (a.micro_batch != 0) {
    throw InputError("cli", "--micro-batch-size", "",
                     "not with --plan: each pipeline has its own micro-batch size in the plan");
  }
  if (a.recompute != "none") {
    throw InputError("cli", "--recompute", "",
                     "not with --plan: each stage has its own recompute set in the plan");
  }
  if (a.seq_len != 0 && a.seq_len != r.plan.seq_len) {
    throw InputError("cli", "--seq-len", "",
                     "the plan was made for sequences of " + std::to_string(r.plan.seq_len) +
                         " tokens, not " + std::to_string(a.seq_len));
  }
  TrainArgs b = a;
  b.batch = a.batch == 0 ? r.plan.gbs : a.batch;
  r.config.train = make_config(b, r.plan.model);
  r.config.train.seq_len = r.plan.seq_len;
  r.config.train.precision = precision.precision;
  r.config.train.device = compute_device(device);
  r.config.plan = r.plan;
  r.config.aggregation = *parse_aggregation_mode(a.allreduce);
  for (const auto& [name, type] : r.cluster.device_types) {
    if (type.emulated_slowdown != 1.0) r.config.slowdown[name] = type.emulated_slowdown;
  }
  if (!a.profile.empty()) {
    r.profile = read_profile_for_cluster(a.profile, r.plan.model, r.cluster);
    // A profile of other kernels would predict another run: refused before any rank starts.
    plan_precision(r.plan, *r.profile, precision.precision);
  }
  if (a.emulate_from == "profile" && a.profile.empty()) {
    throw InputError("cli", "--emulate-from", "",
                     "profile needs --profile DIR (the times the emulated ops last)");
  }
  if (r.profile && a.emulate_from != "cpu-time" && !r.config.slowdown.empty()) {
    r.config.nominal = nominal_times(r.plan, r.cluster, *r.profile, precision.precision,
                                     r.config.aggregation);
  }
  // Outputs before any rank computes: a bad --checkpoint-dir found at the end would throw the
  // whole run away.
  if (!a.checkpoint_dir.empty()) prepare_output_dir(a.checkpoint_dir, "checkpoint");
  if (!a.log.empty()) check_output_file(a.log, "log");
  if (!a.stop_file.empty() && a.checkpoint_dir.empty()) {
    throw InputError("cli", "--stop-file", "",
                     "give --checkpoint-dir too: a run stops at a checkpoint");
  }
  // The data are read by every rank: check them here, once, before any rank starts.
  const TokenFile data = open_training_data(r.config.train);
  training_sampler_config(r.config.train, r.plan.seq_len, data.size());
  r.resume = resolve_resume(a.resume);
  check_finetune_args(a.finetune, a.resume, r.plan.model, r.plan.seq_len);
  if (!a.trace_steps.empty() && a.trace.empty()) {
    throw InputError("cli", "--trace-steps", "", "give --trace FILE too");
  }
  if (!a.trace.empty()) {
    parse_trace_steps(a.trace_steps, 0, 1, "--trace-steps");  // syntax, before any rank starts
    const std::filesystem::path dir = std::filesystem::absolute(a.trace).parent_path();
    if (!std::filesystem::is_directory(dir)) {
      throw InputError("cli", "--trace", "", "no folder " + dir.string() + " to write into");
    }
  }
  r.comm.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(a.timeout_s * 1000));
  return r;
}

std::string stage_text(const StagePlan& st) {
  std::string s = st.device_type + " x" + std::to_string(st.dp) +
                  (st.tp > 1 ? " tp " + std::to_string(st.tp) : "") + " units " +
                  std::to_string(st.first_unit) + "-" + std::to_string(st.last_unit);
  if (!st.recompute.empty()) {
    std::string ops;
    for (const auto& n : st.recompute.names()) ops += (ops.empty() ? "" : ",") + n;
    s += " rc " + ops;
  }
  return s;
}

void print_header(const PlanRun& r, const DistributedTrainer& t, int ranks) {
  const Plan& p = r.plan;
  std::cerr << "training " << p.model.name << " under plan " << p.pipelines.size()
            << " pipeline(s) on " << ranks << " ranks (" << t.config().train.data.string()
            << "): global batch " << p.gbs << " x " << p.seq_len << " tokens, aggregation "
            << aggregation_mode_name(r.config.aggregation) << ", steps " << t.next_step() << ".."
            << t.config().train.steps - 1 << "\n";
  for (std::size_t i = 0; i < p.pipelines.size(); ++i) {
    const PipelinePlan& pp = p.pipelines[i];
    std::cerr << "  pipeline " << i << ": local batch " << pp.local_batch << ", micro-batch "
              << pp.micro_batch_size << " (" << pp.num_microbatches() << " micro-batches):";
    for (std::size_t s = 0; s < pp.stages.size(); ++s) {
      std::cerr << (s ? " | " : " ") << stage_text(pp.stages[s]);
    }
    std::cerr << "\n";
  }
  for (const auto& [type, f] : r.config.slowdown) {
    std::cerr << "  EMULATED: device type " << type << " stretches every forward, backward and "
              << "optimizer step to "
              << (r.config.nominal.empty()
                      ? fmt_num(f, 3) + "x its CPU time in this run"
                      : std::string("the profile's time for a device of the type"))
              << " by sleeping after each op; this is emulation on one machine, not a real "
                 "device\n";
  }
}

Json rank_times_json(const RankTimes& t) {
  return Json{{"compute_s", t.compute_s},
              {"wait_s", t.wait_s},
              {"sync_s", t.sync_s},
              {"optimizer_s", t.optimizer_s}};
}

// --pin: the calling thread to allowed core `local_rank` mod (allowed cores). Best effort: a
// refusal leaves the thread where it was (the run is still correct, only less repeatable).
void pin_to_core(int local_rank) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
  std::vector<int> cores;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed)) cores.push_back(c);
  }
  if (cores.empty()) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cores[static_cast<std::size_t>(local_rank) % cores.size()], &one);
  sched_setaffinity(0, sizeof one, &one);
}

// The steps --trace records, checked against the run's [first, end).
std::vector<std::int64_t> traced_steps(const TrainArgs& a, std::int64_t first, std::int64_t end) {
  std::vector<std::int64_t> steps = parse_trace_steps(a.trace_steps, first, end, "--trace-steps");
  for (std::int64_t s : steps) {
    if (s < first || s >= end) {
      throw InputError("cli", "--trace-steps", "",
                       "step " + std::to_string(s) + " is not in this run (steps " +
                           std::to_string(first) + ".." + std::to_string(end - 1) + ")");
    }
  }
  return steps;
}

// Collective: brings every rank's trace to rank 0, which writes it atomically.
void write_trace(const PlanRun& r, const TrainArgs& a, const TraceRecorder& rec,
                 const Communicator& world) {
  const std::vector<RankTrace> all = gather_trace(rec, world);
  if (world.rank() != 0) return;
  TraceInfo info;
  info.plan = r.plan;
  info.aggregation = aggregation_mode_name(r.config.aggregation);
  info.slowdown = r.config.slowdown;
  info.precision = r.config.train.precision;
  info.steps = rec.steps();
  write_file_atomic(a.trace, measured_trace_json(all, info).dump() + "\n");
  std::size_t events = 0;
  for (const RankTrace& t : all) events += t.events.size();
  std::cerr << "trace: " << a.trace << " (" << events << " events of steps";
  for (std::int64_t s : rec.steps()) std::cerr << " " << s;
  std::cerr << "; open in https://ui.perfetto.dev, or `eth simulate --plan " << a.plan
            << " --measured " << a.trace << "`)\n";
}

// The loop's report on this rank: eth train's log line with every rank's times (rank 0: the
// loop reports only there), and ETH_TEST_KILL_RANK's faults (every rank).
class RankReport final : public TrainReport {
 public:
  RankReport(AppendFile& log, const TrainArgs& a, const std::vector<RankPlace>& places,
             const Communicator& world, const DistTrainingRun& run)
      : TrainReport(log), a_(a), places_(places), world_(world), run_(run) {}
  void before_step(std::int64_t step) override {
    maybe_fail_before_step(world_.rank(), world_.size(), step, a_.stop_file);
  }
  void before_checkpoint(std::int64_t next_step) override {
    maybe_fail_in_checkpoint(world_.rank(), world_.size(), next_step, a_.checkpoint_dir);
  }

 private:
  Json step_json(const StepStats& s) const override {
    Json j = TrainReport::step_json(s);
    const std::vector<RankTimes>& times = run_.last_rank_times();
    Json ranks = Json::array();
    for (std::size_t i = 0; i < times.size(); ++i) {
      Json rank = rank_times_json(times[i]);
      rank["rank"] = i;
      rank["device"] = places_[i].device;
      rank["pipeline"] = places_[i].pipeline;
      rank["stage"] = places_[i].stage;
      ranks.push_back(rank);
    }
    j["ranks"] = ranks;
    return j;
  }
  const TrainArgs& a_;
  const std::vector<RankPlace>& places_;
  const Communicator& world_;
  const DistTrainingRun& run_;
};

// One rank's whole run; rank 0 reports. Returns the exit code.
// `device_world`: the communicator of device buffers (DistributedTrainer), `world` on the CPU.
int run_rank(const PlanRun& r, const TrainArgs& a, const Communicator& world,
             const Communicator& device_world) {
  const bool lead = world.rank() == 0;
  if (lead) std::cerr << r.precision_line << "\n" << std::flush;
  TraceRecorder recorder({});
  DistTrainConfig config = r.config;
  if (!a.trace.empty()) config.trace = &recorder;
  // Resident memory before the model's buffers: libraries, MPI, threads (the baseline the
  // predictor charges from the profile's process_baseline_bytes).
  const double baseline_rss = process_resident_bytes();
  DistributedTrainer t(config, world, device_world, r.resume);
  const std::vector<RankPlace> places = place_ranks(r.plan);
  AppendFile log;
  if (lead) {
    print_header(r, t, world.size());
    if (!a.log.empty()) log = AppendFile(a.log, "log");
  }
  // Every rank opens the set (under MPI each its own process); rank 0 evaluates it.
  const std::unique_ptr<ValidationSet> validation =
      make_validation(a.finetune, r.plan.model, r.plan.seq_len);
  DistTrainingRun run(t, world, validation.get());
  TrainLoop loop(run, loop_options(a));
  const std::int64_t first = loop.first_step();
  if (!a.trace.empty()) recorder.choose_steps(traced_steps(a, first, loop.end_step()));
  RankReport report(log, a, places, world, run);
  const TrainLoopResult done = loop.run(report);
  const RunTimes& summary = run.times();
  const std::int64_t end = done.end_step;
  const std::string checkpoint = done.checkpoint.string();
  if (!a.trace.empty()) write_trace(r, a, recorder, world);  // collective
  const std::vector<RankMemory> memory = t.gather_memory();  // collective
  const std::vector<double> baselines =
      world.gather(std::span<const double>(&baseline_rss, 1));  // collective
  if (!lead) return kExitOk;
  log.close();

  const double measured_ms = summary.mean_step_s() * 1e3;
  std::optional<double> predicted_ms;
  std::optional<Prediction> prediction;
  if (r.profile) {
    PredictOptions po;
    po.aggregation = r.config.aggregation;
    po.precision = r.config.train.precision;  // message sizes follow the run's precision
    prediction = predict(r.plan, r.cluster, *r.profile, po);
    predicted_ms = prediction->iteration_ms;
  }
  if (a.format == Format::Json) {
    Json ranks = Json::array();
    for (std::size_t i = 0; i < places.size() && summary.steps() > 0; ++i) {
      Json j = rank_times_json(summary.mean_rank(i));
      j["rank"] = i;
      j["device"] = places[i].device;
      ranks.push_back(j);
    }
    Json ranks_memory = Json::array();
    for (std::size_t i = 0; i < memory.size(); ++i) {
      const RankMemory& m = memory[i];
      Json j{{"rank", i},
             {"weights_bytes", m.weights},
             {"gradients_bytes", m.gradients},
             {"optimizer_state_bytes", m.optimizer_state},
             {"activations_bytes", m.activations},
             {"buffers_bytes", m.buffers},
             {"baseline_rss_bytes", i < baselines.size() ? baselines[i] : 0.0},
             {"peak_rss_bytes", m.peak_rss}};
      if (prediction) {
        // The predictor's memory of this rank's device (its stage's, its own optimizer shards).
        j["predicted"] = memory_to_json(device_memory(*prediction, places[i].device));
      }
      ranks_memory.push_back(j);
    }
    print_json(Json{{"model", r.plan.model.name},
                    {"precision", std::string(precision_name(r.config.train.precision))},
                    {"ranks", world.size()},
                    {"aggregation", aggregation_mode_name(r.config.aggregation)},
                    {"emulated_slowdown", r.config.slowdown},
                    {"first_step", first},
                    {"next_step", t.next_step()},
                    {"final_loss", done.last ? Json(done.last->loss) : Json(nullptr)},
                    {"measured_iteration_ms", measured_ms},
                    {"predicted_iteration_ms", predicted_ms ? Json(*predicted_ms) : Json(nullptr)},
                    {"emulated_from", r.config.slowdown.empty() ? Json(nullptr)
                                      : Json(r.config.nominal.empty() ? "cpu-time" : "profile")},
                    {"rank_times", ranks},
                    {"rank_memory", ranks_memory},
                    {"checkpoint", checkpoint.empty() ? Json(nullptr) : Json(checkpoint)}});
    return kExitOk;
  }
  if (first >= end) {
    std::cout << "nothing to do: the run is already at step " << first << " of " << end << "\n";
    return kExitOk;
  }
  Table tab({"rank", "device", "pipeline", "stage", "compute ms", "wait ms", "sync ms",
             "optimizer ms"});
  for (std::size_t i = 0; i < places.size(); ++i) {
    const RankTimes m = summary.mean_rank(i);
    tab.add({std::to_string(i), std::to_string(places[i].device),
             std::to_string(places[i].pipeline), std::to_string(places[i].stage),
             fmt_num(m.compute_s * 1e3, 1), fmt_num(m.wait_s * 1e3, 1),
             fmt_num(m.sync_s * 1e3, 1), fmt_num(m.optimizer_s * 1e3, 1)});
  }
  std::cout << "trained steps " << first << ".." << end - 1 << ": final loss "
            << fmt_num(done.last->loss, 4) << "\n"
            << "per-rank time per step (mean"
            << (summary.steps() > 1 ? ", first step left out" : "") << "):\n";
  std::cout << tab.render();
  std::cout << "measured iteration: " << fmt_num(measured_ms, 1) << " ms";
  if (predicted_ms) {
    std::cout << "   predicted: " << fmt_num(*predicted_ms, 1) << " ms   (predicted / measured "
              << fmt_num(*predicted_ms / measured_ms, 2) << ")";
  } else {
    std::cout << "   (pass --profile DIR from `eth profile --measure` for the predicted time)";
  }
  std::cout << "\n";
  // Memory per rank: the arenas by role and the process's peak, beside the predictor's stage.
  std::vector<std::string> cols{"rank", "weights", "gradients", "optimizer", "activations",
                                "buffers", "peak RSS"};
  if (prediction) cols.push_back("predicted");
  Table mem(cols);
  for (std::size_t i = 0; i < memory.size(); ++i) {
    const RankMemory& m = memory[i];
    std::vector<std::string> row{std::to_string(i),        fmt_bytes(m.weights),
                                 fmt_bytes(m.gradients),   fmt_bytes(m.optimizer_state),
                                 fmt_bytes(m.activations), fmt_bytes(m.buffers),
                                 fmt_bytes(m.peak_rss)};
    if (prediction) {
      row.push_back(fmt_bytes(prediction->pipelines[static_cast<std::size_t>(places[i].pipeline)]
                                  .stages[static_cast<std::size_t>(places[i].stage)]
                                  .memory.total()));
    }
    mem.add(row);
  }
  std::cout << "memory per rank (" << precision_name(r.config.train.precision) << "):\n"
            << mem.render();
  if (!checkpoint.empty()) std::cout << "checkpoint: " << checkpoint << "\n";
  return kExitOk;
}

// The error of a failed threads run worth showing: a rank's own failure before the timeouts
// it caused in the others.
std::exception_ptr root_cause(const std::vector<std::exception_ptr>& errors) {
  std::exception_ptr first;
  for (const auto& e : errors) {
    if (!e) continue;
    if (!first) first = e;
    try {
      std::rethrow_exception(e);
    } catch (const CommError&) {
    } catch (...) {
      return e;
    }
  }
  return first;
}

// The communicator of device buffers for a rank process under MPI: the world itself on the
// CPU; on the emulated device (each process its own) a duplicate of the world staging device
// buffers through explicit host copies; on CUDA the NCCL communicator over the GPU of this
// rank's local index, bootstrapped over the world (one GPU per rank: NCCL refuses two ranks on
// one GPU).
Communicator mpi_device_world(ComputeDevice device, const Communicator& world) {
  if (device == ComputeDevice::Cpu) return world;
  const Communicator host = world.split(0, world.rank());  // its own message order
  if (device == ComputeDevice::Emulated) {
    return make_host_staged_communicator(host, *runtime_memory(device).comm_ops());
  }
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  return make_nccl_communicator(host, local ? std::max(0, std::atoi(local)) : world.rank());
}

}  // namespace

int run_train_plan(const TrainArgs& a) {
  if (a.backend == "threads") {
    const PlanRun r = prepare(a);
    const int n = static_cast<int>(r.plan.num_devices());
    check_runnable(r.plan, r.cluster, n, a.plan, r.config.train.global_batch);
    check_plan_train_memory(r.plan, r.config.train, n,
                            !a.checkpoint_dir.empty() || !a.finetune.val_data.empty());
    LocalWorld world(n, r.comm);
    // On a GPU set the ranks share the one device: a second world of the same threads carries
    // the device buffers, device to device (each rank's work on its own thread's stream).
    const DeviceMemoryOps* ops = runtime_memory(r.config.train.device).comm_ops();
    std::optional<LocalWorld> device_world;
    if (ops != nullptr) device_world.emplace(n, r.comm, *ops);
    // The threads share the cores: one OpenMP thread each.
    std::vector<int> codes(static_cast<std::size_t>(n), kExitOk);
    const int threads = a.threads > 0 ? a.threads : 1;
    auto errors = run_on_threads(world, [&](Communicator c) {
      if (a.pin) pin_to_core(c.rank());
      omp_set_num_threads(threads);
      const Communicator d = device_world ? device_world->comm(c.rank()) : c;
      codes[static_cast<std::size_t>(c.rank())] = run_rank(r, a, c, d);
    });
    if (auto e = root_cause(errors)) std::rethrow_exception(e);
    return codes[0];
  }
  MpiSession mpi;
  PlanRun r;
  Communicator world;
  try {
    r = prepare(a);
    // MpiSession takes calls from a second thread; NCCL's requests stay on the rank's thread
    // (its GPU is that thread's current device).
    r.config.background_progress = r.config.train.device != ComputeDevice::Cuda;
    world = mpi.world(r.comm);
    check_runnable(r.plan, r.cluster, world.size(), a.plan, r.config.train.global_batch);
    const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    const int ranks_here = local ? std::max(1, std::atoi(local)) : world.size();
    if (r.config.train.device == ComputeDevice::Cuda && ranks_here > cuda::device_count()) {
      throw InputError("train", "--device", "",
                       "cuda under MPI takes one GPU per rank (NCCL refuses two ranks on one "
                       "GPU): " + std::to_string(ranks_here) + " ranks on this host, " +
                           std::to_string(cuda::device_count()) +
                           " GPUs; --backend threads runs every rank on one GPU");
    }
    check_plan_train_memory(r.plan, r.config.train, ranks_here,
                            !a.checkpoint_dir.empty() || !a.finetune.val_data.empty());
  } catch (const InputError& e) {
    // Every rank finds the same problem; one message is enough.
    int rank = 0;
    if (!world.is_null()) rank = world.rank();
    else if (const char* env = std::getenv("OMPI_COMM_WORLD_RANK")) rank = std::atoi(env);
    if (rank == 0) std::cerr << "error: " << e.what() << "\n";
    return kExitInput;
  }
  int threads = a.threads;
  if (threads == 0) {
    const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    const int ranks_here = local ? std::max(1, std::atoi(local)) : world.size();
    threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / ranks_here);
  }
  omp_set_num_threads(threads);
  if (a.pin) {
    const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    pin_to_core(local ? std::max(0, std::atoi(local)) : world.rank());
  }
  try {
    return run_rank(r, a, world, mpi_device_world(r.config.train.device, world));
  } catch (const std::exception& e) {
    // This rank cannot go on; the others would only wait for it until their timeout.
    const bool comm = dynamic_cast<const CommError*>(&e) != nullptr;
    const bool input = dynamic_cast<const InputError*>(&e) != nullptr;
    std::cerr << "error: rank " << world.rank() << ": " << e.what() << "\n" << std::flush;
    MpiSession::abort_job(comm ? kExitComm : input ? kExitInput : kExitInternal);
  }
}

}  // namespace eth::cli
