// eth launch --elastic (elastic_run.h): the loop over supervised launches, the files it watches
// while a run goes (the run's log for its steps, --lost-devices and --hostfile for devices that
// come and go), and the report of each recovery. What to do after a launch: restart.h.
#include "launch/elastic_run.h"

#include <chrono>
#include <fstream>
#include <optional>
#include <set>
#include <stdexcept>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/exit_codes.h"
#include "core/format.h"
#include "core/json_file.h"
#include "cost/predictor.h"
#include "elastic/lost_devices.h"
#include "launch/restart.h"
#include "launch/supervisor.h"

namespace eth {

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
  ElasticRun(const ElasticSetup& s, std::ostream& err);
  int run();

 private:
  std::set<std::int64_t> lost_now(bool quiet);
  RestartState state(std::set<std::int64_t> out) const {
    return RestartState{restarts_, s_.max_restarts, lost_, std::move(out)};
  }
  CurrentPlan plan_for(const std::set<std::int64_t>& lost, int index);
  Launch launch(const std::optional<ResumePoint>& from);
  void watch(Launch& l);
  void read_log(Launch& l);
  void report_restart_time(Json& r, const std::optional<Clock::time_point>& failed_at,
                           const Launch& l);
  void report_loss(const Launch& l, const std::set<std::int64_t>& taken, std::int64_t reached,
                   Json& r);
  std::optional<int> restart(const Decision& d, std::int64_t reached, Json& r);
  void record_loss(const std::set<std::int64_t>& devices, const std::string& why);
  void say(const std::string& line) const {
    err_ << "eth launch --elastic: " << line << "\n" << std::flush;
  }
  void event(Json j);
  int stop(int code, const std::string& message, Json j);
  std::string describe(const std::set<std::int64_t>& ids) const;
  std::optional<double> predicted_ms(const Plan& plan) const;

  const ElasticSetup& s_;
  std::ostream& err_;
  const ClusterSpec& full_;
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

ElasticRun::ElasticRun(const ElasticSetup& s, std::ostream& err)
    : s_(s), err_(err), full_(s.full) {
  current_.plan = s.user_plan;
  current_.file = s.launch.plan;
  current_.original = s.user_plan.device_ids();
  current_.predicted_ms = predicted_ms(s.user_plan);
  if (!s.launch.hostfile.empty()) {
    node_hosts_ =
        parse_hostfile(read_text_file(s.launch.hostfile, "hostfile"), s.launch.hostfile);
  }
  dir_ = s.checkpoint_dir;
  prepare_output_dir(dir_, "checkpoint");
  stop_file_ = dir_ / "elastic-stop";
  train_log_ = s.train_log.empty() ? dir_ / "train.jsonl" : fs::path(s.train_log);
  if (!s.log.empty()) log_ = AppendFile(s.log, "elastic log");
  lost_now(false);  // a malformed --lost-devices is refused before any launch
}

// The devices the run must do without now: listed in --lost-devices, lost by failure, or on a
// host gone from --hostfile. A file that does not read or parse mid-run keeps its last reading.
std::set<std::int64_t> ElasticRun::lost_now(bool quiet) {
  try {
    last_good_listed_ = parse_lost_devices(read_or_empty(s_.lost_devices, "lost-devices"),
                                           s_.lost_devices, full_);
  } catch (const InputError& err) {
    if (!last_good_listed_) throw;
    if (!quiet) say(std::string("ignoring --lost-devices until it reads: ") + err.what());
  }
  std::set<std::int64_t> lost = *last_good_listed_;
  lost.insert(failed_.begin(), failed_.end());
  if (!node_hosts_.empty()) {
    try {
      last_good_hosts_ = devices_of_missing_hosts(
          full_, node_hosts_, parse_hostfile(read_or_empty(s_.launch.hostfile, "hostfile"), s_.launch.hostfile));
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
    return predict(plan, full_, *s_.replan.profile).iteration_ms;
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
  err_ << message << checkpoint_report(dir_) << "\n";
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
    c.plan = s_.user_plan;
    c.file = s_.launch.plan;
    c.original = s_.user_plan.device_ids();
    c.predicted_ms = predicted_ms(s_.user_plan);
    return c;
  }
  Replan r = replan(s_.replan, lost);
  c.user = false;
  c.plan = std::move(r.result.plan);
  c.original = r.surviving.original;
  c.predicted_ms = r.result.prediction.iteration_ms;
  // Which devices of the run's cluster the plan's ids stand for, for a person reading it.
  Json search = c.plan.search->is_object() ? *c.plan.search : Json::object();
  search["elastic"] = Json{{"full_cluster_device_of", c.original}, {"lost", ids_json(lost)}};
  c.plan.search = search;
  c.file = (dir_ / ("elastic-plan-" + std::to_string(index) + ".json")).string();
  save_plan(c.plan, c.file);  // atomic
  return c;
}

// A lost device stays out until a person says it is back: it goes into --lost-devices (to be
// removed from there), or, without that file, out for the rest of the run.
void ElasticRun::record_loss(const std::set<std::int64_t>& devices, const std::string& why) {
  if (s_.lost_devices.empty()) {
    failed_.insert(devices.begin(), devices.end());
    return;
  }
  std::string text = read_or_empty(s_.lost_devices, "lost-devices");
  for (std::int64_t d : devices) text = add_lost_device(text, d, why);
  write_file_atomic(s_.lost_devices, text, "lost-devices");
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
  if (!may_restart(state(lost))) return;
  const DeviceChange c = device_change(lost_, lost);
  write_file_atomic(stop_file_, "devices changed\n", "elastic");
  l.stop_requested = true;
  say(std::string(c.back.empty() ? "" : "device(s) " + describe(c.back) + " back") +
      (c.back.empty() || c.gone.empty() ? "" : "; ") +
      (c.gone.empty() ? "" : "device(s) " + describe(c.gone) + " to be left out") +
      ": the run stops at its next checkpoint to re-plan");
}

Launch ElasticRun::launch(const std::optional<ResumePoint>& from) {
  std::vector<std::string> args = s_.launch.train_args;
  if (!current_.user) args = without_option(args, "--cluster");  // the re-plan carries its own
  args.insert(args.end(), {"--checkpoint-dir", dir_.string(), "--checkpoint-every",
                           std::to_string(s_.checkpoint_every), "--stop-file",
                           stop_file_.string()});
  if (s_.train_log.empty()) args.insert(args.end(), {"--log", train_log_.string()});
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
    hosts = place_on_hosts(node_of_rank, node_hosts_, s_.launch.hostfile);
  }
  for (LaunchRank& r : ranks) {
    r.device = current_.original[static_cast<std::size_t>(r.device)];  // messages name these
    r.host = host_of_rank(hosts, r.rank);
  }
  const int n = static_cast<int>(current_.ranks());
  const std::vector<std::string> argv =
      train_launch_argv(s_.launch, current_.file, n, hosts, args, /*kill_at_once=*/true);
  err_ << "launching " << n << " ranks: " << command_line_text(argv) << "\n" << std::flush;
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
  hooks.echo = &err_;
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

// The relaunch a recovery `r` led to has logged its first step (or ended first): how long that
// took from the relaunch and from the failure.
void ElasticRun::report_restart_time(Json& r, const std::optional<Clock::time_point>& failed_at,
                                     const Launch& l) {
  r["restart_s"] = l.first_step_at ? Json(seconds(l.started, *l.first_step_at)) : Json(nullptr);
  // From the failure (the dying rank's own timestamp when it gave one) to the resumed run's
  // first logged step: what a loss costs in wall time besides the steps redone.
  const bool whole = l.first_step_at && failed_at;
  r["failure_to_first_step_s"] =
      whole ? Json(seconds(*failed_at, *l.first_step_at)) : Json(nullptr);
  if (l.first_step_at) {
    say("restart " + std::to_string(r["restart"].get<int>()) + ": the resumed run took its "
        "first step " + fmt_num(seconds(l.started, *l.first_step_at), 2) +
        " s after the relaunch" +
        (whole ? ", " + fmt_num(seconds(*failed_at, *l.first_step_at), 2) + " s after the failure"
               : std::string()));
  }
  event(r);
}

// A launch that lost devices (`taken`; none known: a restart on the same devices): said, logged
// in `r` and recorded as lost.
void ElasticRun::report_loss(const Launch& l, const std::set<std::int64_t>& taken,
                             std::int64_t reached, Json& r) {
  const LaunchOutcome& o = l.outcome;
  const std::string how =
      !o.lost_host.empty()
          ? "host " + o.lost_host + " lost"
      : o.lost_rank >= 0 ? describe_rank(l.ranks, o.lost_rank) + " " + o.lost_cause
                         : "the run failed (exit " + std::to_string(o.exit_code) +
                               ") without naming a rank: restarting on the same devices";
  r["cause"] = how;
  const double detect = o.failed_at ? seconds(*o.failed_at, o.ended_at) : 0.0;
  r["detection_s"] = o.failed_at ? Json(detect) : Json(nullptr);
  say((taken.empty() ? "" : "lost device(s) " + describe(taken) + ": ") + how + " at step " +
      std::to_string(reached) +
      (o.failed_at ? "; detected in " + fmt_num(detect, 3) + " s" : ""));
  if (!taken.empty()) {
    record_loss(taken, how + " at step " + std::to_string(reached) +
                           " (added by eth launch --elastic; remove the line when it is back)");
  }
}

// Re-plans on the devices `d` leaves and makes that plan current; the exit code when no plan
// fits them, else nullopt (the loop relaunches). `r` is the recovery's log record.
std::optional<int> ElasticRun::restart(const Decision& d, std::int64_t reached, Json& r) {
  restarts_ = d.restart;
  const CurrentPlan old = current_;
  const auto t0 = Clock::now();
  try {
    current_ = plan_for(d.lost, restarts_);
  } catch (const InputError& err) {
    r["lost"] = ids_json(d.lost);
    return stop(kExitNoPlan,
                "error: [elastic] no plan fits the " +
                    std::to_string(full_.num_devices() -
                                   static_cast<std::int64_t>(d.lost.size())) +
                    " devices left (without " + describe(d.lost) + "): " + err.what() +
                    "; bring devices back (--lost-devices, --hostfile) and run the same "
                    "command again to continue",
                r);
  }
  const double planning = seconds(t0, Clock::now());
  lost_ = d.lost;
  const auto resume = latest_whole_checkpoint(dir_);
  const std::int64_t resume_step = resume ? resume->step : 0;
  const std::int64_t redone = std::max<std::int64_t>(0, reached - resume_step);
  r["restart"] = restarts_;
  r["lost"] = ids_json(d.lost);
  r["returned"] = ids_json(d.change.back);
  r["planning_s"] = planning;
  r["resumed_from_step"] = resume_step;
  r["steps_redone"] = redone;
  r["new_plan"] = plan_json(current_);
  say("restart " + std::to_string(restarts_) + " of at most " +
      std::to_string(s_.max_restarts) + ": planned in " + fmt_num(planning, 3) + " s on " +
      std::to_string(current_.ranks()) + " of " + std::to_string(full_.num_devices()) +
      " devices (out: " + describe(d.lost) + "), predicted iteration " +
      ms_text(old.predicted_ms) + " -> " + ms_text(current_.predicted_ms) + " (" +
      current_.file + "); resuming from step " + std::to_string(resume_step) + ", " +
      std::to_string(redone) + " step(s) redone");
  return std::nullopt;
}

int ElasticRun::run() {
  lost_ = lost_now(false);
  if (plan_uses_any(s_.user_plan, lost_)) {
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
             {"steps", s_.target}});
  std::optional<Json> pending;  // a recovery whose restart time the next launch measures
  std::optional<Clock::time_point> pending_failed_at;  // when its failure showed
  for (;;) {
    std::vector<std::string> skipped;
    const std::optional<ResumePoint> from = latest_whole_checkpoint(dir_, &skipped);
    for (const std::string& s : skipped) {
      say("passing over a checkpoint that does not read back: " + s);
    }
    if (from && from->step >= s_.target) break;
    Launch l = launch(from);
    const LaunchOutcome& o = l.outcome;
    if (pending) {
      report_restart_time(*pending, pending_failed_at, l);
      pending.reset();
    }
    const auto after = latest_whole_checkpoint(dir_);
    LaunchEnd end{o.ended, o.exit_code, devices_taken(o, full_, node_hosts_), l.stop_requested,
                  after && after->step >= s_.target};
    const bool may_go_on = o.ended == Ended::DeviceLost || o.ended == Ended::AllOk;
    const Decision d = decide_restart(end, state(may_go_on ? lost_now(false) : lost_));
    const std::int64_t reached = l.last_step ? *l.last_step + 1 : (from ? from->step : 0);
    using Action = Decision::Action;
    if (d.action == Action::Finish) break;
    if (d.action == Action::Interrupted) {
      err_ << o.message << "\n";
      event(Json{{"event", "stopped"}, {"exit_code", o.exit_code}, {"message", o.message}});
      return d.exit_code;
    }
    if (d.why == Decision::Why::EndedUnasked) {
      throw std::runtime_error("eth train ended at step " + std::to_string(reached) + " of " +
                               std::to_string(s_.target) + " without being asked to");
    }
    if (o.ended != Ended::AllOk && !o.message.empty()) err_ << o.message << "\n";
    if (d.why == Decision::Why::OwnError) {
      return stop(d.exit_code, "eth launch --elastic: the run stopped on an error that is not "
                               "a lost device", Json{{"failed_at_step", reached}});
    }
    Json r{{"event", "recovery"}, {"old_plan", plan_json(current_)}};
    r["failed_at_step"] = reached;
    if (o.ended == Ended::DeviceLost) {
      report_loss(l, d.taken, reached, r);
    } else {
      r["cause"] = "devices changed";
    }
    r["lost_now"] = ids_json(d.taken);
    if (d.action == Action::GiveUp) {
      r["event"] = "stopped";
      return stop(d.exit_code, "error: [elastic] --max-restarts " +
                                   std::to_string(s_.max_restarts) + " reached: not restarting",
                  r);
    }
    if (const std::optional<int> code = restart(d, reached, r)) return *code;
    pending = r;
    pending_failed_at = o.failed_at;
  }
  std::error_code ec;
  fs::remove(stop_file_, ec);
  say("done: step " + std::to_string(s_.target) + " reached after " + std::to_string(restarts_) +
      " restart(s); devices out: " + describe(lost_));
  event(Json{{"event", "finished"}, {"steps", s_.target}, {"restarts", restarts_},
             {"lost", ids_json(lost_)}});
  return kExitOk;
}

}  // namespace

int run_elastic(const ElasticSetup& setup, std::ostream& err) {
  ElasticRun run(setup, err);
  return run.run();
}

}  // namespace eth
