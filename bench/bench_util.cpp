#include "bench_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

namespace eth::bench {

namespace {

// The value of a "key : value" line of /proc/cpuinfo.
std::string cpuinfo_value(const std::string& line) {
  const auto colon = line.find(':');
  return colon == std::string::npos || colon + 2 > line.size() ? std::string()
                                                               : line.substr(colon + 2);
}

}  // namespace

std::string cpu_model_name() {
  std::ifstream cpu("/proc/cpuinfo");
  for (std::string line; std::getline(cpu, line);) {
    if (line.rfind("model name", 0) == 0) return cpuinfo_value(line);
  }
  return "unknown";
}

LoadAverage load_average() {
  double l[3] = {-1, -1, -1};
  const int n = ::getloadavg(l, 3);
  LoadAverage out;
  if (n >= 1) out.m1 = l[0];
  if (n >= 2) out.m5 = l[1];
  if (n >= 3) out.m15 = l[2];
  return out;
}

Json machine_info() {
  // The model name alone does not tell this machine kind's CPUs apart (notes: Zen 3 vs Zen 5):
  // the family and the widest vector extension do.
  std::string family = "?", vector = "none";
  std::ifstream cpu("/proc/cpuinfo");
  for (std::string line; std::getline(cpu, line);) {
    if (line.rfind("cpu family", 0) == 0) family = cpuinfo_value(line);
    if (line.rfind("flags", 0) == 0) {
      const std::string f = " " + cpuinfo_value(line) + " ";
      vector = f.find(" avx512_bf16 ") != std::string::npos ? "avx512+bf16"
               : f.find(" avx512f ") != std::string::npos   ? "avx512"
               : f.find(" avx2 ") != std::string::npos      ? "avx2"
                                                            : "none";
      break;
    }
  }
  const LoadAverage load = load_average();
  return Json{{"cpu_model", cpu_model_name() + " (family " + family + ", " + vector + ")"},
              {"cores", std::thread::hardware_concurrency()},
              {"load_1m", load.m1},
              {"load_5m", load.m5},
              {"load_15m", load.m15}};
}

std::string machine_line(const Json& m) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "(machine: %s, %d cores, load %.2f %.2f %.2f)",
                m["cpu_model"].get<std::string>().c_str(), m["cores"].get<int>(),
                m["load_1m"].get<double>(), m["load_5m"].get<double>(),
                m["load_15m"].get<double>());
  return buf;
}

int run_capture(const std::string& cmd, std::string* out) {
  const std::filesystem::path tmp = std::filesystem::temp_directory_path() /
                                    ("eth_bench_stdout_" + std::to_string(::getpid()));
  const int status = std::system((cmd + " >" + tmp.string()).c_str());
  if (out) {
    std::ifstream in(tmp);
    std::stringstream ss;
    ss << in.rdbuf();
    *out = ss.str();
  }
  std::filesystem::remove(tmp);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::optional<Json> run_json(const std::string& cmd) {
  std::string out;
  if (run_capture(cmd, &out) != 0) return std::nullopt;
  const auto at = out.find('{');
  if (at == std::string::npos) return std::nullopt;
  return Json::parse(out.substr(at));
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace eth::bench
