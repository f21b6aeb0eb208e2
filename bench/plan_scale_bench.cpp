// plan_scale_bench: how the eth planner scales with the cluster. GPT-3 70B (gbs 16384, analytic
// profile) on clusters of two, three and four device types (910B2, 910B4, then A100, then H100,
// in nodes of 8, as equal shares as the node count allows) of 100 to 100,000 devices; for each,
// the search's wall and CPU seconds, the process's peak resident memory, the partitions the
// search generated and the chosen plan's predicted iteration time, beside the same figures of
// the search before issue 29 (PlannerOptions::bound_generation = false), run in the same
// process tree. Each search runs in a child process of its own so its peak memory is its own.
// Prints the load average and the CPU model beside the figures: the machine is shared, so CPU
// seconds are the stable figure. Asserts nothing.
// Usage: plan_scale_bench [--types 2,3,4] [--big] [--no-baseline] [--model NAME] [DEVICES...]
//   default sizes 100 300 1000 3000 10000; --big adds 30000 and 100000. With ETH_SCALE_STATS
//   set, each search's statistics (JSON) go to stderr.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_util.h"
#include "cluster/cluster_spec.h"
#include "core/error.h"
#include "model/model_spec.h"
#include "profile/analytic.h"
#include "search/planner.h"

namespace {

using namespace eth;

const char* const kTypes[] = {"910B2", "910B4", "A100", "H100"};

ClusterSpec cluster_of(std::int64_t devices, int n_types) {
  ClusterSpec c;
  c.name = "scale-" + std::to_string(devices) + "-" + std::to_string(n_types);
  const std::int64_t nodes = devices / 8;
  for (int t = 0; t < n_types; ++t) {
    const std::int64_t n = nodes / n_types + (t < nodes % n_types ? 1 : 0);
    for (std::int64_t i = 0; i < n; ++i) c.nodes.push_back({kTypes[t], 8});
    c.device_types[kTypes[t]] = *find_device_type_preset(kTypes[t]);
  }
  return c;
}

struct Row {
  double wall = 0, cpu = 0, peak_mb = 0, ms = 0;
  long long generated = 0, devices = 0;
  std::string note;  // a refusal or a limit that bound
  bool ok = false;
};

// Runs in the child: plans and writes "devices wall cpu generated ms|note" to stdout.
int plan_one(const std::string& model, std::int64_t devices, int n_types, bool bound_generation) {
  const ModelSpec m = model_preset(model);
  const ClusterSpec c = cluster_of(devices, n_types);
  const ProfileDb db = analytic_profile_db(m, c, {1, 2, 4, 8}, {1, 2, 4, 8, 16}, m.seq_len);
  PlannerOptions o;
  o.bound_generation = bound_generation;
  const auto w0 = std::chrono::steady_clock::now();
  const std::clock_t c0 = std::clock();
  std::string note;
  long long generated = 0;
  double ms = 0;
  try {
    const PlannerResult r = plan_training(PlanMethod::Eth, m, c, db, 16384, m.seq_len, o);
    generated = r.stats.generated;
    ms = r.prediction.iteration_ms;
    note = std::to_string(r.plan.pipelines.size()) + " pipelines";
    for (const auto& [name, value] : r.stats.limits) note += ", limit " + name + " reached";
    if (std::getenv("ETH_SCALE_STATS")) {
      std::fprintf(stderr, "%s\n", r.stats.to_json().dump().c_str());
    }
  } catch (const InputError& e) {
    note = std::string("refused: ") + e.what();
  }
  const double cpu = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  std::printf("%lld %.17g %.17g %lld %.17g|%s", static_cast<long long>(c.num_devices()), wall, cpu,
              generated, ms, note.c_str());
  std::fflush(stdout);
  return 0;
}

Row run_child(const std::string& model, std::int64_t devices, int n_types,
              bool bound_generation) {
  Row row;
  int fds[2];
  if (::pipe(fds) != 0) return row;
  std::fflush(stdout);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    ::close(fds[1]);
    std::_Exit(plan_one(model, devices, n_types, bound_generation));
  }
  ::close(fds[1]);
  std::string text;
  char buf[4096];
  for (ssize_t got; (got = ::read(fds[0], buf, sizeof buf)) > 0;) {
    text.append(buf, static_cast<std::size_t>(got));
  }
  ::close(fds[0]);
  int status = 0;
  rusage ru{};
  ::wait4(pid, &status, 0, &ru);
  row.peak_mb = static_cast<double>(ru.ru_maxrss) / 1024.0;
  const auto bar = text.find('|');
  if (bar == std::string::npos) {
    row.note = "(child failed)";
    return row;
  }
  std::istringstream in(text.substr(0, bar));
  in >> row.devices >> row.wall >> row.cpu >> row.generated >> row.ms;
  row.note = text.substr(bar + 1);
  row.ok = row.ms > 0;
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::int64_t> sizes;
  std::vector<int> type_counts{2, 3, 4};
  bool big = false, baseline = true;
  std::string model = "gpt3-70b";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--big") {
      big = true;
    } else if (a == "--no-baseline") {
      baseline = false;
    } else if (a == "--model" && i + 1 < argc) {
      model = argv[++i];
    } else if (a == "--types" && i + 1 < argc) {
      type_counts.clear();
      std::istringstream in(argv[++i]);
      for (std::string t; std::getline(in, t, ',');) type_counts.push_back(std::atoi(t.c_str()));
    } else if (a == "--help" || a == "-h" || a.empty() || a[0] == '-') {
      std::printf("usage: plan_scale_bench [--types 2,3,4] [--big] [--no-baseline] [--model NAME] "
                  "[DEVICES...]\n  default sizes 100 300 1000 3000 10000; --big adds 30000 "
                  "100000; --no-baseline skips the search before issue 29; --model: a preset "
                  "(default gpt3-70b; llama3-70b, llama2-7b, ...)\n");
      return a == "--help" || a == "-h" ? 0 : 1;
    } else {
      sizes.push_back(std::atoll(a.c_str()));
    }
  }
  if (sizes.empty()) sizes = {100, 300, 1000, 3000, 10000};
  if (big) {
    sizes.push_back(30000);
    sizes.push_back(100000);
  }
  for (int t : type_counts) {
    if (t < 1 || t > 4) {
      std::fprintf(stderr, "plan_scale_bench: --types takes 1 to 4\n");
      return 1;
    }
  }
  try {
    (void)model_preset(model);
  } catch (const InputError& e) {
    std::fprintf(stderr, "plan_scale_bench: --model: %s\n", e.what());
    return 1;
  }
  std::printf("plan_scale_bench: %s, gbs 16384, analytic profile, nodes of 8; types in "
              "order 910B2, 910B4, A100, H100\nCPU: %s, load average (1 min) %.2f at start\n"
              "new = this search; old = bound_generation off (the search before issue 29)\n\n",
              model.c_str(), bench::cpu_model_name().c_str(), bench::load_1m());
  std::printf("%5s %8s | %7s %7s %8s %11s %11s | %7s %7s %8s %11s %11s | %s\n", "types",
              "devices", "wall s", "CPU s", "peak MB", "partitions", "pred ms", "wall s", "CPU s",
              "peak MB", "partitions", "pred ms", "plan");
  for (const int t : type_counts) {
    for (const std::int64_t n : sizes) {
      const Row a = run_child(model, n, t, true);
      std::printf("%5d %8lld | %7.2f %7.2f %8.1f %11lld %11.1f | ", t, a.devices, a.wall, a.cpu,
                  a.peak_mb, a.generated, a.ms);
      std::fflush(stdout);
      std::string verdict = a.note;
      if (baseline) {
        const Row b = run_child(model, n, t, false);
        std::printf("%7.2f %7.2f %8.1f %11lld %11.1f | ", b.wall, b.cpu, b.peak_mb, b.generated,
                    b.ms);
        if (a.ok && b.ok) {
          verdict += a.ms < b.ms ? ", faster than old" : a.ms == b.ms ? ", same time" : ", SLOWER";
        }
        if (b.note.find("limit") != std::string::npos) verdict += " (old: limit reached)";
        if (!b.ok) verdict += " (old: " + b.note + ")";
      } else {
        std::printf("%7s %7s %8s %11s %11s | ", "-", "-", "-", "-", "-");
      }
      std::printf("%s\n", verdict.c_str());
      std::fflush(stdout);
    }
  }
  std::printf("\nload average (1 min) %.2f at the end\n", bench::load_1m());
  return 0;
}
