// eth launch --elastic (elastic_launch.h): the loop over supervised launches, the files it
// watches while a run goes (the run's log for its steps, --lost-devices and --hostfile for
// devices that come and go), and the report of each recovery.
#include "cli/elastic_launch.h"

#include "cost/sharding_memory.h"

#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/launch_supervisor.h"
#include "cli/output.h"
#include "cli/plan_inputs.h"
#include "cli/train_args.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_file.h"
#include "cost/predictor.h"
#include "elastic/lost_devices.h"
#include "elastic/recovery.h"

namespace eth::cli {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// `args` without option `name`, given as "NAME VALUE" or "NAME=VALUE".
std::vector<std::string> without_option(const std::vector<std::string>& args,
                                        const std::string& name) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == name) {
      ++i;
    } else if (args[i].rfind(name + "=", 0) != 0) {
      out.push_back(args[i]);
    }
  }
  return out;
}

// eth train's own parser over the arguments after --: the values the supervisor needs (steps,
// log, cluster, ...) and every flag checked before the first launch.
TrainArgs parse_train_args(const std::vector<std::string>& args) {
  CLI::App app{"eth train"};
  TrainArgs t;
  add_train_options(&app, &t);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them reversed
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    throw UsageError("--", std::string("the arguments of eth train: ") + e.what());
  }
  for (const char* flag : {"--checkpoint-dir", "--checkpoint-every", "--resume", "--stop-file"}) {
    if (app.count(flag) > 0) {
      throw UsageError(flag, std::string("with --elastic, eth launch manages ") + flag +
                                 " (give --checkpoint-dir and --checkpoint-every to eth launch)");
    }
  }
  return t;
}

Json ids_json(const std::set<std::int64_t>& ids) {
  return Json(std::vector<std::int64_t>(ids.begin(), ids.end()));
}

std::string read_or_empty(const std::string& path, const std::string& component) {
  std::error_code ec;
  if (path.empty() || !fs::exists(path, ec)) return "";
  return read_text_file(path, component);
}

// The plan a launch runs, with its devices in the numbering of the run's full cluster.
struct CurrentPlan {
  Plan plan;
  std::string file;                    // what eth train gets
  bool user = true;                    // the plan eth launch was given (else a re-plan)
  std::vector<std::int64_t> original;  // device id of `plan` -> device id of the full cluster
  std::optional<double> predicted_ms;
  std::int64_t ranks() const { return plan.num_devices(); }
};

// One supervised launch, as the supervisor saw it.
struct Launch {
  LaunchOutcome outcome;
  Clock::time_point started;
  std::optional<Clock::time_point> first_step_at;
  std::optional<std::int64_t> first_step, last_step;  // steps the run logged
  bool stop_requested = false;                        // the supervisor asked it to stop
  std::vector<LaunchRank> ranks;                      // devices in the full cluster's ids
};

class ElasticRun {
 public:
  ElasticRun(const LaunchArgs& a, const ElasticArgs& e);
  int run();

 private:
  std::set<std::int64_t> lost_now(bool quiet);
  CurrentPlan plan_for(const std::set<std::int64_t>& lost, int index);
  Launch launch(const std::optional<ResumePoint>& from);
  void watch(Launch& l);
  void read_log(Launch& l);
  std::set<std::int64_t> taken_by(const LaunchOutcome& o) const;
  void record_loss(const std::set<std::int64_t>& devices, const std::string& why);
  void say(const std::string& line) const {
    std::cerr << "eth launch --elastic: " << line << "\n" << std::flush;
  }
  void event(Json j);
  int stop(int code, const std::string& message, Json j);
  std::string describe(const std::set<std::int64_t>& ids) const;
  std::optional<double> predicted_ms(const Plan& plan) const;

  LaunchArgs a_;
  ElasticArgs e_;
  TrainArgs train_;
  std::int64_t target_ = 0;  // the step the run ends at
  Plan user_plan_;
  ClusterSpec full_;
  std::optional<PlannerProfile> profile_;
  ReplanInputs replan_in_;
  std::vector<std::string> node_hosts_;  // hostfile at the start: node k runs on node_hosts_[k]
  fs::path dir_, stop_file_, train_log_;
  AppendFile log_;
  // Devices lost by failure: kept here without a --lost-devices file, written into it with one.
  std::set<std::int64_t> failed_;
  std::set<std::int64_t> lost_;  // what the current plan was made without
  std::optional<std::set<std::int64_t>> last_good_listed_, last_good_hosts_;
  CurrentPlan current_;
  int restarts_ = 0;
  // Watching a run: the log read so far, and the device files.
  std::uintmax_t log_offset_ = 0;
  std::string log_partial_;
  Clock::time_point next_file_check_{};
  std::optional<std::set<std::int64_t>> seen_change_;
};

ElasticRun::ElasticRun(const LaunchArgs& a, const ElasticArgs& e) : a_(a), e_(e) {
  if (a.dry_run) throw UsageError("--dry-run", "not with --elastic: its plans depend on the run");
  if (e.checkpoint_dir.empty() || e.checkpoint_every < 1) {
    throw UsageError(e.checkpoint_dir.empty() ? "--checkpoint-dir" : "--checkpoint-every",
                     "--elastic resumes from checkpoints: give --checkpoint-dir DIR and "
                     "--checkpoint-every N (N >= 1)");
  }
  train_ = parse_train_args(a.train_args);
  target_ = train_.stop_at > 0 ? std::min(train_.stop_at, train_.steps) : train_.steps;
  user_plan_ = load_plan(a.plan);
  full_ = cluster_for_plan(user_plan_, train_.cluster);
  apply_emulation(full_, train_.emulate);
  profile_ = planner_profile(e.planner, user_plan_.model, full_, user_plan_.seq_len);
  replan_in_.model = user_plan_.model;
  replan_in_.full = full_;
  replan_in_.profile = &profile_->db;
  replan_in_.gbs = user_plan_.gbs;
  replan_in_.seq_len = user_plan_.seq_len;
  replan_in_.method = planner_method(e.planner);
  replan_in_.options = planner_options(e.planner);
  current_.plan = user_plan_;
  current_.file = a.plan;
  current_.original = user_plan_.device_ids();
  current_.predicted_ms = predicted_ms(user_plan_);
  if (!a.hostfile.empty()) {
    node_hosts_ = parse_hostfile(read_text_file(a.hostfile, "hostfile"), a.hostfile);
  }
  dir_ = e.checkpoint_dir;
  prepare_output_dir(dir_, "checkpoint");
  stop_file_ = dir_ / "elastic-stop";
  train_log_ = train_.log.empty() ? dir_ / "train.jsonl" : fs::path(train_.log);
  if (!e.log.empty()) log_ = AppendFile(e.log, "elastic log");
  lost_now(false);  // a malformed --lost-devices is refused before any launch
}

// The devices the run must do without now: listed in --lost-devices, lost by failure, or on a
// host gone from --hostfile. A file that does not read or parse mid-run keeps its last reading.
std::set<std::int64_t> ElasticRun::lost_now(bool quiet) {
  try {
    last_good_listed_ = parse_lost_devices(read_or_empty(e_.lost_devices, "lost-devices"),
                                           e_.lost_devices, full_);
  } catch (const InputError& err) {
    if (!last_good_listed_) throw;
    if (!quiet) say(std::string("ignoring --lost-devices until it reads: ") + err.what());
  }
  std::set<std::int64_t> lost = *last_good_listed_;
  lost.insert(failed_.begin(), failed_.end());
  if (!node_hosts_.empty()) {
    try {
      last_good_hosts_ = devices_of_missing_hosts(
          full_, node_hosts_, parse_hostfile(read_or_empty(a_.hostfile, "hostfile"), a_.hostfile));
    } catch (const InputError& err) {
      if (!last_good_hosts_) throw;
      if (!quiet) say(std::string("ignoring --hostfile until it reads: ") + err.what());
    }
    lost.insert(last_good_hosts_->begin(), last_good_hosts_->end());
  }
  return lost;
}

// The predictor's iteration time of a plan on the full cluster; nullopt for a plan priced at a
// micro-batch size the profile lacks (its time is not known, the run goes on).
std::optional<double> ElasticRun::predicted_ms(const Plan& plan) const {
  try {
    return predict(plan, full_, profile_->db).iteration_ms;
  } catch (const InputError&) {
    return std::nullopt;
  }
}

std::string ElasticRun::describe(const std::set<std::int64_t>& ids) const {
  std::string s;
  for (std::int64_t d : ids) s += (s.empty() ? "" : ", ") + describe_device(full_, d);
  return s.empty() ? "none" : s;
}

void ElasticRun::event(Json j) {
  if (!log_) return;
  j["unix_time_s"] =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  log_.write_line(j.dump());
}

int ElasticRun::stop(int code, const std::string& message, Json j) {
  std::cerr << message << checkpoint_report(dir_) << "\n";
  const auto last = latest_whole_checkpoint(dir_);
  j["event"] = "stopped";
  j["exit_code"] = code;
  j["message"] = message;
  j["checkpoint"] = last ? Json(last->path.string()) : Json(nullptr);
  j["checkpoint_step"] = last ? Json(last->step) : Json(nullptr);
  event(j);
  std::error_code ec;
  fs::remove(stop_file_, ec);
  return code;
}

// The plan for the devices not in `lost`: the user's when it needs none of them (no device
// lost), else a re-plan written next to the checkpoints. Throws the planner's InputError when
// no plan fits.
CurrentPlan ElasticRun::plan_for(const std::set<std::int64_t>& lost, int index) {
  CurrentPlan c;
  if (lost.empty()) {
    c.plan = user_plan_;
    c.file = a_.plan;
    c.original = user_plan_.device_ids();
    c.predicted_ms = predicted_ms(user_plan_);
    return c;
  }
  Replan r = replan(replan_in_, lost);
  c.user = false;
  c.plan = std::move(r.result.plan);
  c.original = r.surviving.original;
  c.predicted_ms = r.result.prediction.iteration_ms;
  if (user_plan_.optimizer_sharding != OptimizerSharding::None) {
    // The re-plan shards the optimizer state as the run it replaces did (issue 28).
    c.plan = shard_optimizer_state(c.plan, user_plan_.optimizer_sharding, r.surviving.cluster,
                                   *replan_in_.profile);
    c.predicted_ms = predict(c.plan, r.surviving.cluster, *replan_in_.profile).iteration_ms;
  }
  // Which devices of the run's cluster the plan's ids stand for, for a person reading it.
  Json search = c.plan.search->is_object() ? *c.plan.search : Json::object();
  search["elastic"] = Json{{"full_cluster_device_of", c.original}, {"lost", ids_json(lost)}};
  c.plan.search = search;
  c.file = (dir_ / ("elastic-plan-" + std::to_string(index) + ".json")).string();
  save_plan(c.plan, c.file);  // atomic
  return c;
}

// What a failure took: every device of a host lost whole, else the lost rank's device.
std::set<std::int64_t> ElasticRun::taken_by(const LaunchOutcome& o) const {
  std::set<std::int64_t> out;
  if (!o.lost_host.empty()) {
    std::int64_t id = 0;
    for (std::size_t k = 0; k < full_.nodes.size(); ++k) {
      for (std::int64_t i = 0; i < full_.nodes[k].devices; ++i, ++id) {
        if (k < node_hosts_.size() && node_hosts_[k] == o.lost_host) out.insert(id);
      }
    }
  }
  if (out.empty() && o.lost_device >= 0) out.insert(o.lost_device);
  return out;
}

// A lost device stays out until a person says it is back: it goes into --lost-devices (to be
// removed from there), or, without that file, out for the rest of the run.
void ElasticRun::record_loss(const std::set<std::int64_t>& devices, const std::string& why) {
  if (e_.lost_devices.empty()) {
    failed_.insert(devices.begin(), devices.end());
    return;
  }
  std::string text = read_or_empty(e_.lost_devices, "lost-devices");
  for (std::int64_t d : devices) text = add_lost_device(text, d, why);
  write_file_atomic(e_.lost_devices, text, "lost-devices");
}

void ElasticRun::read_log(Launch& l) {
  std::error_code ec;
  const std::uintmax_t size = fs::file_size(train_log_, ec);
  if (ec || size <= log_offset_) return;
  std::ifstream in(train_log_, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(log_offset_));
  std::string chunk(static_cast<std::size_t>(size - log_offset_), '\0');
  in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
  chunk.resize(static_cast<std::size_t>(in.gcount()));
  log_offset_ += chunk.size();
  log_partial_ += chunk;
  for (std::size_t nl; (nl = log_partial_.find('\n')) != std::string::npos;) {
    const std::string line = log_partial_.substr(0, nl);
    log_partial_.erase(0, nl + 1);
    try {
      const Json j = Json::parse(line);
      if (!j.contains("step")) continue;
      const std::int64_t step = j["step"];
      if (!l.first_step) {
        l.first_step = step;
        l.first_step_at = Clock::now();
      }
      l.last_step = step;
    } catch (const Json::exception&) {
      // Not a step line of eth train: someone else's text in a shared log.
    }
  }
}

// While a run goes: its steps, and devices that come or go (acted on at its next checkpoint,
// once the change has read the same twice, so a file caught half-saved by an editor is not).
void ElasticRun::watch(Launch& l) {
  read_log(l);
  const Clock::time_point now = Clock::now();
  if (now < next_file_check_ || l.stop_requested) return;
  next_file_check_ = now + std::chrono::milliseconds(250);
  const std::set<std::int64_t> lost = lost_now(true);
  if (lost == lost_) {
    seen_change_.reset();
    return;
  }
  if (seen_change_ != lost) {
    seen_change_ = lost;
    return;
  }
  if (restarts_ >= e_.max_restarts) return;
  std::set<std::int64_t> back, gone;
  for (std::int64_t d : lost_) {
    if (lost.count(d) == 0) back.insert(d);
  }
  for (std::int64_t d : lost) {
    if (lost_.count(d) == 0) gone.insert(d);
  }
  write_file_atomic(stop_file_, "devices changed\n", "elastic");
  l.stop_requested = true;
  say(std::string(back.empty() ? "" : "device(s) " + describe(back) + " back") +
      (back.empty() || gone.empty() ? "" : "; ") +
      (gone.empty() ? "" : "device(s) " + describe(gone) + " to be left out") +
      ": the run stops at its next checkpoint to re-plan");
}

Launch ElasticRun::launch(const std::optional<ResumePoint>& from) {
  std::vector<std::string> args = a_.train_args;
  if (!current_.user) args = without_option(args, "--cluster");  // the re-plan carries its own
  args.insert(args.end(), {"--checkpoint-dir", dir_.string(), "--checkpoint-every",
                           std::to_string(e_.checkpoint_every), "--stop-file",
                           stop_file_.string()});
  if (train_.log.empty()) args.insert(args.end(), {"--log", train_log_.string()});
  if (from) {
    // A resumed run takes its weights from the checkpoint: --init-from only starts the first.
    args = without_option(args, "--init-from");
    args.insert(args.end(), {"--resume", from->path.string()});
  }
  std::vector<LaunchRank> ranks = launch_ranks(current_.plan);
  std::vector<HostRanks> hosts;
  if (!node_hosts_.empty()) {
    std::vector<std::int64_t> node_of_rank;
    for (const LaunchRank& r : ranks) {
      const std::int64_t d = current_.original[static_cast<std::size_t>(r.device)];
      node_of_rank.push_back(full_.device(d).node);
    }
    hosts = place_on_hosts(node_of_rank, node_hosts_, a_.hostfile);
  }
  for (LaunchRank& r : ranks) {
    r.device = current_.original[static_cast<std::size_t>(r.device)];  // messages name these
    r.host = host_of_rank(hosts, r.rank);
  }
  const int n = static_cast<int>(current_.ranks());
  const std::vector<std::string> argv =
      train_launch_argv(a_, current_.file, n, hosts, args, /*kill_at_once=*/true);
  std::cerr << "launching " << n << " ranks: " << command_line_text(argv) << "\n" << std::flush;
  std::error_code ec;
  fs::remove(stop_file_, ec);
  log_offset_ = fs::exists(train_log_, ec) ? fs::file_size(train_log_, ec) : 0;
  log_partial_.clear();
  seen_change_.reset();
  Launch l;
  l.started = Clock::now();
  SuperviseHooks hooks;
  hooks.poll_interval = std::chrono::milliseconds(20);
  hooks.on_poll = [&] { watch(l); };
  l.ranks = ranks;
  l.outcome = supervise_launch(argv, ranks, dir_, hooks);
  read_log(l);
  return l;
}

Json plan_json(const CurrentPlan& c) {
  return Json{{"file", c.file},
              {"ranks", c.ranks()},
              {"devices", c.original},
              {"predicted_iteration_ms", c.predicted_ms ? Json(*c.predicted_ms) : Json(nullptr)}};
}

std::string ms_text(const std::optional<double>& ms) {
  return ms ? fmt_num(*ms, 1) + " ms" : std::string("? ms");
}

int ElasticRun::run() {
  lost_ = lost_now(false);
  if (plan_uses_any(user_plan_, lost_)) {
    say("devices " + describe(lost_) +
        " are out (--lost-devices, --hostfile): planning without them");
    try {
      current_ = plan_for(lost_, 0);
    } catch (const InputError& err) {
      return stop(kExitNoPlan, "error: [elastic] no plan fits the devices left: " +
                                   std::string(err.what()), Json{{"lost", ids_json(lost_)}});
    }
  }
  event(Json{{"event", "start"}, {"plan", plan_json(current_)}, {"lost", ids_json(lost_)},
             {"steps", target_}});
  std::optional<Json> pending;  // a recovery whose restart time the next launch measures
  std::optional<Clock::time_point> pending_failed_at;  // when its failure showed
  for (;;) {
    std::vector<std::string> skipped;
    const std::optional<ResumePoint> from = latest_whole_checkpoint(dir_, &skipped);
    for (const std::string& s : skipped) {
      say("passing over a checkpoint that does not read back: " + s);
    }
    if (from && from->step >= target_) break;
    Launch l = launch(from);
    const LaunchOutcome& o = l.outcome;
    if (pending) {
      Json& r = *pending;
      r["restart_s"] =
          l.first_step_at ? Json(seconds(l.started, *l.first_step_at)) : Json(nullptr);
      // From the failure (the dying rank's own timestamp when it gave one) to the resumed run's
      // first logged step: what a loss costs in wall time besides the steps redone.
      const bool whole = l.first_step_at && pending_failed_at;
      r["failure_to_first_step_s"] =
          whole ? Json(seconds(*pending_failed_at, *l.first_step_at)) : Json(nullptr);
      if (l.first_step_at) {
        say("restart " + std::to_string(r["restart"].get<int>()) + ": the resumed run took its "
            "first step " + fmt_num(seconds(l.started, *l.first_step_at), 2) +
            " s after the relaunch" +
            (whole ? ", " + fmt_num(seconds(*pending_failed_at, *l.first_step_at), 2) +
                         " s after the failure"
                   : std::string()));
      }
      event(r);
      pending.reset();
    }
    if (o.interrupted != 0) {
      std::cerr << o.message << "\n";
      event(Json{{"event", "stopped"}, {"exit_code", o.exit_code}, {"message", o.message}});
      return o.exit_code;
    }
    const auto after = latest_whole_checkpoint(dir_);
    if (o.exit_code == kExitOk && after && after->step >= target_) break;
    Json r{{"event", "recovery"}, {"old_plan", plan_json(current_)}};
    const std::int64_t reached = l.last_step ? *l.last_step + 1 : (from ? from->step : 0);
    r["failed_at_step"] = reached;
    std::set<std::int64_t> taken;
    if (o.exit_code == kExitOk) {
      if (!l.stop_requested) {
        throw std::runtime_error("eth train ended at step " + std::to_string(reached) +
                                 " of " + std::to_string(target_) + " without being asked to");
      }
      r["cause"] = "devices changed";
    } else {
      if (!o.message.empty()) std::cerr << o.message << "\n";
      if (o.exit_code == kExitInput || o.exit_code == kExitInternal ||
          (o.exit_code != kExitComm && o.lost_rank < 0 && o.lost_host.empty())) {
        // A rank's own error (bad input, a bug): another plan would meet it again.
        return stop(o.exit_code, "eth launch --elastic: the run stopped on an error that is not "
                                 "a lost device", Json{{"failed_at_step", reached}});
      }
      taken = taken_by(o);
      const std::string how =
          !o.lost_host.empty()
              ? "host " + o.lost_host + " lost"
          : o.lost_rank >= 0 ? describe_rank(l.ranks, o.lost_rank) + " " + o.lost_cause
                             : "the run failed (exit " + std::to_string(o.exit_code) +
                                   ") without naming a rank: restarting on the same devices";
      r["cause"] = how;
      const double detect = o.failed_at ? seconds(*o.failed_at, o.ended) : 0.0;
      r["detection_s"] = o.failed_at ? Json(detect) : Json(nullptr);
      say((taken.empty() ? "" : "lost device(s) " + describe(taken) + ": ") + how +
          " at step " + std::to_string(reached) +
          (o.failed_at ? "; detected in " + fmt_num(detect, 3) + " s" : ""));
      if (!taken.empty()) {
        record_loss(taken, how + " at step " + std::to_string(reached) +
                               " (added by eth launch --elastic; remove the line when it is back)");
      }
    }
    r["lost_now"] = ids_json(taken);
    if (restarts_ >= e_.max_restarts) {
      r["event"] = "stopped";
      return stop(o.exit_code == kExitOk ? kExitComm : o.exit_code,
                  "error: [elastic] --max-restarts " + std::to_string(e_.max_restarts) +
                      " reached: not restarting",
                  r);
    }
    ++restarts_;
    const std::set<std::int64_t> lost = lost_now(false);
    std::set<std::int64_t> back;
    for (std::int64_t d : lost_) {
      if (lost.count(d) == 0) back.insert(d);
    }
    const CurrentPlan old = current_;
    const auto t0 = Clock::now();
    try {
      current_ = plan_for(lost, restarts_);
    } catch (const InputError& err) {
      r["lost"] = ids_json(lost);
      return stop(kExitNoPlan,
                  "error: [elastic] no plan fits the " +
                      std::to_string(full_.num_devices() -
                                     static_cast<std::int64_t>(lost.size())) +
                      " devices left (without " + describe(lost) + "): " + err.what() +
                      "; bring devices back (--lost-devices, --hostfile) and run the same "
                      "command again to continue",
                  r);
    }
    const double planning = seconds(t0, Clock::now());
    lost_ = lost;
    const auto resume = latest_whole_checkpoint(dir_);
    const std::int64_t resume_step = resume ? resume->step : 0;
    const std::int64_t redone = std::max<std::int64_t>(0, reached - resume_step);
    r["restart"] = restarts_;
    r["lost"] = ids_json(lost);
    r["returned"] = ids_json(back);
    r["planning_s"] = planning;
    r["resumed_from_step"] = resume_step;
    r["steps_redone"] = redone;
    r["new_plan"] = plan_json(current_);
    say("restart " + std::to_string(restarts_) + " of at most " +
        std::to_string(e_.max_restarts) + ": planned in " + fmt_num(planning, 3) + " s on " +
        std::to_string(current_.ranks()) + " of " + std::to_string(full_.num_devices()) +
        " devices (out: " + describe(lost) + "), predicted iteration " +
        ms_text(old.predicted_ms) + " -> " + ms_text(current_.predicted_ms) + " (" +
        current_.file + "); resuming from step " + std::to_string(resume_step) + ", " +
        std::to_string(redone) + " step(s) redone");
    pending = r;
    pending_failed_at = o.failed_at;
  }
  std::error_code ec;
  fs::remove(stop_file_, ec);
  say("done: step " + std::to_string(target_) + " reached after " + std::to_string(restarts_) +
      " restart(s); devices out: " + describe(lost_));
  event(Json{{"event", "finished"}, {"steps", target_}, {"restarts", restarts_},
             {"lost", ids_json(lost_)}});
  return kExitOk;
}

}  // namespace

void add_elastic_options(CLI::App* sub, ElasticArgs& e) {
  const char* group = "Elastic (--elastic)";
  sub->add_flag("--elastic", e.enabled,
                "Survive lost devices: when a rank dies or stops answering (or its host goes), "
                "re-plan on the devices left and resume from the last checkpoint, until --steps; "
                "devices listed in or removed from --lost-devices are acted on at the next "
                "checkpoint (docs/runtime.md, Recovery)")
      ->group(group);
  auto& o = e.options;
  o.push_back(sub->add_option("--checkpoint-dir", e.checkpoint_dir,
                              "Checkpoints, re-plans (elastic-plan-N.json) and the run's log "
                              "(train.jsonl, unless --log after --) go here")
                  ->group(group));
  o.push_back(sub->add_option("--checkpoint-every", e.checkpoint_every,
                              "Checkpoint period in steps: the most steps a failure costs")
                  ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40))
                  ->group(group));
  o.push_back(sub->add_option("--lost-devices", e.lost_devices,
                              "File of device ids (of the plan's cluster) not to use: ids or "
                              "ranges A-B, # comments; a failed device is added to it, and "
                              "removing a line brings the device back at the next checkpoint")
                  ->group(group));
  o.push_back(sub->add_option("--elastic-log", e.log,
                              "Append one JSON line per event (start, recovery with its "
                              "detection, planning and restart times, stop, finish)")
                  ->group(group));
  o.push_back(sub->add_option("--max-restarts", e.max_restarts,
                              "Most relaunches (after failures or device changes) before "
                              "giving up")
                  ->check(CLI::Range(0, 1000000))
                  ->capture_default_str()
                  ->group(group));
  for (CLI::Option* p : add_planner_options(sub, e.planner, true)) {
    p->group("Elastic re-planning (as eth plan; default eth, analytic profile)");
    // One comma-separated word each: a list left open would take the `--` before eth train's
    // arguments as its own end.
    p->allow_extra_args(false);
    o.push_back(p);
  }
}

void refuse_elastic_options(const ElasticArgs& e) {
  for (const CLI::Option* p : e.options) {
    if (p->count() > 0) throw UsageError(p->get_name(), "only with --elastic");
  }
}

int run_elastic_launch(const LaunchArgs& a, const ElasticArgs& e) {
  ElasticRun run(a, e);
  return run.run();
}

}  // namespace eth::cli
