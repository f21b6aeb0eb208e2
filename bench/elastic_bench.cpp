// elastic_bench: what a recovery costs. For the paper's 13B and 70B clusters of both device
// families (predicted, analytic profile): the eth plan of the whole cluster, then the planning
// time after losing one device, one node, and a quarter of one device type, with the new plan's
// predicted iteration time beside the old one. The planner's time is measured here (wall and CPU
// seconds, with the CPU model and load); iteration times are the predictor's. Then, measured on
// this machine: `eth launch --elastic` on a four-rank tiny plan whose rank 3 is SIGKILLed at step
// 12, three times, with the recovery's detection, planning and relaunch times and the time from
// the rank's death to the resumed run's first step (the supervisor's own log, elastic.jsonl).
// Usage: elastic_bench [--format json]. Asserts nothing.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_util.h"
#include "cluster/cluster_spec.h"
#include "core/error.h"
#include "core/json_cursor.h"
#include "elastic/surviving.h"
#include "model/model_spec.h"
#include "profile/analytic.h"
#include "search/planner.h"

namespace {

using namespace eth;

struct Outcome {
  double wall_s = 0, cpu_s = 0, iteration_ms = 0;
  std::int64_t devices_used = 0;
  std::string error;
};

Outcome plan_on(const ModelSpec& model, const ClusterSpec& c, std::int64_t gbs) {
  std::vector<std::int64_t> tps;
  for (std::int64_t t : {1, 2, 4, 8}) {
    if (model.heads % t == 0 && model.ffn % t == 0) tps.push_back(t);
  }
  Outcome o;
  const bench::Stopwatch watch;
  try {
    // The profile is built inside the timed region: a supervisor re-plans from the model and
    // the surviving cluster, so building it is part of the recovery's planning time.
    const ProfileDb db = analytic_profile_db(model, c, tps, {1, 2, 4, 8, 16}, model.seq_len);
    const PlannerResult r = plan_training(PlanMethod::Eth, model, c, db, gbs, model.seq_len, {});
    o.iteration_ms = r.prediction.iteration_ms;
    o.devices_used = r.plan.num_devices();
  } catch (const InputError& e) {
    o.error = e.what();
  }
  o.cpu_s = watch.cpu_s();
  o.wall_s = watch.wall_s();
  return o;
}

struct Loss {
  std::string what;
  std::set<std::int64_t> devices;
};

// One device (the last of the first node), the first node, and the first quarter of the
// second device type's devices.
std::vector<Loss> losses(const ClusterSpec& c) {
  std::vector<Loss> out;
  const std::vector<std::int64_t> first = c.node_first_device();
  out.push_back({"one device", {c.nodes[0].devices - 1}});
  Loss node{"one node (" + std::to_string(c.nodes[0].devices) + " x " + c.nodes[0].device_type +
                ")",
            {}};
  for (std::int64_t d = 0; d < c.nodes[0].devices; ++d) node.devices.insert(d);
  out.push_back(node);
  const std::string type_b = c.nodes.back().device_type;
  std::vector<std::int64_t> of_b;
  for (std::int64_t d = 0; d < c.num_devices(); ++d) {
    if (c.device(d).device_type == type_b) of_b.push_back(d);
  }
  Loss quarter{"a quarter of " + type_b + " (" + std::to_string(of_b.size() / 4) + ")", {}};
  for (std::size_t i = 0; i < of_b.size() / 4; ++i) quarter.devices.insert(of_b[i]);
  out.push_back(quarter);
  return out;
}

// One elastic run killed at step 12: the recovery event of its log, or an error text.
Json measure_recovery(const std::filesystem::path& dir, int run) {
  namespace fs = std::filesystem;
  const fs::path ckpt = dir / ("ckpt-" + std::to_string(run));
  const fs::path log = dir / ("elastic-" + std::to_string(run) + ".jsonl");
  const std::string env =
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 "
      "ETH_TEST_KILL_RANK=3:12:kill@4 ";
  const int code = bench::run_capture(env + ETH_BINARY_PATH + " launch --plan " + (dir / "plan.json").string() +
                         " --elastic --checkpoint-dir " + ckpt.string() +
                         " --checkpoint-every 5 --elastic-log " + log.string() + " -- --data " +
                         (dir / "data.bin").string() +
                         " --steps 20 --print-every 0 --timeout 20 >/dev/null 2>" +
                         (dir / "stderr").string());
  if (code != 0) return Json{{"error", "eth launch --elastic exited " + std::to_string(code)}};
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) {
    const Json j = Json::parse(line);
    if (j["event"] == "recovery") return j;
  }
  return Json{{"error", "no recovery in " + log.string()}};
}

Json measured_recoveries(bool print) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("eth_elastic_bench_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  // tiny on two fast and two slow devices, the plan of tests/launch/elastic_launch_test.cpp.
  fs::copy_file(ETH_ELASTIC_PLAN, dir / "plan.json", fs::copy_options::overwrite_existing);
  Json out = Json::array();
  if (bench::run_capture(std::string(ETH_BINARY_PATH) + " data --synthetic 20000 --out " +
            (dir / "data.bin").string() + " >/dev/null 2>&1") != 0) {
    fs::remove_all(dir);
    return out;
  }
  if (print) {
    std::printf("\nmeasured on this machine: eth launch --elastic, tiny on 4 ranks (2 fast + 2 "
                "slow), rank 3 SIGKILLed at step 12, checkpoints every 5 steps\ncpu: %s, load "
                "%.2f\n%-4s %12s %12s %12s %22s\n",
                bench::cpu_model_name().c_str(), bench::load_1m(), "run", "detect s", "plan s", "relaunch s",
                "death -> 1st step s");
  }
  for (int run = 0; run < 3; ++run) {
    Json r = measure_recovery(dir, run);
    r["load"] = bench::load_1m();
    out.push_back(r);
    if (!print) continue;
    if (r.contains("error")) {
      std::printf("%-4d %s\n", run, r["error"].get<std::string>().c_str());
      continue;
    }
    const auto num = [&](const char* k) { return r[k].is_number() ? r[k].get<double>() : -1.0; };
    std::printf("%-4d %12.3f %12.3f %12.3f %22.3f   (load %.2f)\n", run, num("detection_s"),
                num("planning_s"), num("restart_s"), num("failure_to_first_step_s"),
                r["load"].get<double>());
  }
  fs::remove_all(dir);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const bool json = argc == 3 && std::string(argv[1]) == "--format" && std::string(argv[2]) == "json";
  if (argc > 1 && !json) {
    std::fprintf(stderr, "usage: elastic_bench [--format json]\n");
    return 1;
  }
  Json out;
  out["cpu"] = bench::cpu_model_name();
  out["load_before"] = bench::load_1m();
  out["profile"] = "analytic";
  out["rows"] = Json::array();
  if (!json) {
    std::printf("elastic_bench: re-planning after a loss (PREDICTED iteration times, analytic "
                "profile; planning time measured)\ncpu: %s, load %.2f\n\n",
                bench::cpu_model_name().c_str(), bench::load_1m());
    std::printf("%-22s %-40s %9s %9s %10s %10s %7s\n", "cluster", "lost", "plan s", "cpu s",
                "old ms", "new ms", "new/old");
  }
  const std::pair<const char*, std::int64_t> models[] = {{"13b", 1024}, {"70b", 1024}};
  for (const char* family : {"910b2-910b4", "a100-rtx3090"}) {
    for (const auto& [tag, gbs] : models) {
      const std::string cname = std::string(tag) + "-" + family;
      const ClusterSpec full = load_cluster(cname);
      const ModelSpec model = load_model(std::string("gpt3-") + tag);
      const Outcome base = plan_on(model, full, gbs);
      for (const Loss& loss : losses(full)) {
        const SurvivingCluster s = surviving_cluster(full, loss.devices);
        const Outcome o = plan_on(model, s.cluster, gbs);
        Json row{{"cluster", cname},         {"model", model.name},
                 {"lost", loss.what},        {"lost_devices", loss.devices.size()},
                 {"plan_wall_s", o.wall_s},  {"plan_cpu_s", o.cpu_s},
                 {"old_ms", base.iteration_ms}, {"new_ms", o.iteration_ms},
                 {"full_plan_wall_s", base.wall_s}, {"error", o.error}};
        out["rows"].push_back(row);
        if (json) continue;
        if (!o.error.empty()) {
          std::printf("%-22s %-40s %9.2f %9.2f %10.0f %10s  no plan: %s\n", cname.c_str(),
                      loss.what.c_str(), o.wall_s, o.cpu_s, base.iteration_ms, "-",
                      o.error.c_str());
          continue;
        }
        std::printf("%-22s %-40s %9.2f %9.2f %10.0f %10.0f %7.3f\n", cname.c_str(),
                    loss.what.c_str(), o.wall_s, o.cpu_s, base.iteration_ms, o.iteration_ms,
                    o.iteration_ms / base.iteration_ms);
      }
      std::fflush(stdout);
    }
  }
  out["measured_recoveries"] = measured_recoveries(!json);
  out["load_after"] = bench::load_1m();
  if (json) std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
