// plan_scale_bench: how the eth planner scales with the cluster. GPT-3 70B (gbs 16384, analytic
// profile) on clusters of three device types (910B2, 910B4, A100 in nodes of 8, as equal thirds
// as the node count allows) of about 1,000, 10,000 and 100,000 devices; for each, the search's
// wall and CPU seconds, the process's peak resident memory, the partitions the search generated
// and whether a search limit bound. Each size runs in a child process of its own so its peak
// memory is its own. Prints the load average and the CPU model beside the figures: the machine
// is shared, so CPU seconds are the stable figure. Usage: plan_scale_bench [devices...].
// Asserts nothing.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include "cluster/cluster_spec.h"
#include "core/error.h"
#include "model/model_spec.h"
#include "profile/analytic.h"
#include "search/planner.h"

namespace {

using namespace eth;

ClusterSpec three_types(std::int64_t devices) {
  ClusterSpec c;
  c.name = "scale-" + std::to_string(devices);
  const char* types[] = {"910B2", "910B4", "A100"};
  const std::int64_t nodes = devices / 8;
  for (int t = 0; t < 3; ++t) {
    const std::int64_t n = nodes / 3 + (t < nodes % 3 ? 1 : 0);
    for (std::int64_t i = 0; i < n; ++i) c.nodes.push_back({types[t], 8});
    c.device_types[types[t]] = *find_device_type_preset(types[t]);
  }
  return c;
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown CPU";
}

double load_average() {
  double l[1] = {0};
  return getloadavg(l, 1) == 1 ? l[0] : -1;
}

// Runs in the child: plans and prints one row (everything but the peak memory, which the parent
// reads from wait4).
int plan_one(std::int64_t devices) {
  const ModelSpec m = model_preset("gpt3-70b");
  const ClusterSpec c = three_types(devices);
  const ProfileDb db = analytic_profile_db(m, c, {1, 2, 4, 8}, {1, 2, 4, 8, 16}, m.seq_len);
  const auto w0 = std::chrono::steady_clock::now();
  const std::clock_t c0 = std::clock();
  std::string outcome;
  std::int64_t generated = 0;
  try {
    const PlannerResult r = plan_training(PlanMethod::Eth, m, c, db, 16384, m.seq_len, {});
    generated = r.stats.generated;
    outcome = std::to_string(r.plan.pipelines.size()) + " pipelines, " +
              std::to_string(static_cast<long long>(r.prediction.iteration_ms)) + " ms";
    for (const auto& [name, value] : r.stats.limits) outcome += ", limit " + name + " reached";
  } catch (const InputError& e) {
    outcome = std::string("refused: ") + e.what();
  }
  const double cpu = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  std::printf("%8lld  %9.2f  %8.2f  %12lld  ", static_cast<long long>(c.num_devices()), wall, cpu,
              static_cast<long long>(generated));
  // The parent puts the peak memory between the figures and the outcome (after \x1f).
  std::printf("\x1f%s\n", outcome.c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::int64_t> sizes{1000, 10000, 100000};
  if (argc > 1) {
    sizes.clear();
    for (int i = 1; i < argc; ++i) sizes.push_back(std::atoll(argv[i]));
  }
  std::printf("plan_scale_bench: gpt3-70b, gbs 16384, 3 device types (910B2, 910B4, A100, 8 per "
              "node), analytic profile\nCPU: %s, load average (1 min) %.2f at start\n\n",
              cpu_model().c_str(), load_average());
  std::printf("%8s  %9s  %8s  %12s  %10s  %s\n", "devices", "wall s", "CPU s", "partitions",
              "peak RSS", "outcome");
  for (const std::int64_t n : sizes) {
    int fds[2];
    if (::pipe(fds) != 0) return 1;
    std::fflush(stdout);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(fds[1], 1);
      ::close(fds[0]);
      ::close(fds[1]);
      std::_Exit(plan_one(n));
    }
    ::close(fds[1]);
    std::string row;
    char buf[4096];
    for (ssize_t got; (got = ::read(fds[0], buf, sizeof buf)) > 0;) {
      row.append(buf, static_cast<std::size_t>(got));
    }
    ::close(fds[0]);
    int status = 0;
    rusage ru{};
    ::wait4(pid, &status, 0, &ru);
    const auto split = row.find('\x1f');
    const std::string head = split == std::string::npos ? row : row.substr(0, split);
    const std::string tail =
        split == std::string::npos ? "(child failed)\n" : row.substr(split + 1);
    std::printf("%s%7.1f MB  %s", head.c_str(), static_cast<double>(ru.ru_maxrss) / 1024.0,
                tail.c_str());
  }
  std::printf("\nload average (1 min) %.2f at the end\n", load_average());
  return 0;
}
