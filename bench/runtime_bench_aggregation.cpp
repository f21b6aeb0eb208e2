// runtime_bench's section (1), gradient aggregation: the MPI worker (runtime_bench_worker.cpp)
// launched under mpirun for each plan and rank count, several launches interleaved, and the
// rows it prints gathered over the launches into one row per mode, printed as a table unless
// --format json.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_util.h"
#include "runtime_bench.h"
#include "launch/mpirun.h"
#include "model/arithmetic.h"

namespace eth::bench {

namespace {

// `values` printed with `format` (one double), comma-separated.
std::string comma_list(const std::vector<double>& values, const char* format) {
  std::string out;
  for (double v : values) {
    char b[32];
    std::snprintf(b, sizeof b, format, v);
    out += (out.empty() ? "" : ",") + std::string(b);
  }
  return out;
}

std::string join(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

// The share of the CPUs' time idle over the next `seconds` (/proc/stat): other jobs on this
// shared machine show up here, where the load average also counts this bench's own ranks.
double idle_share(double seconds) {
  auto sample = [] {
    std::ifstream in("/proc/stat");
    std::string cpu;
    in >> cpu;
    std::vector<double> t;
    for (double v; t.size() < 8 && in >> v;) t.push_back(v);
    double total = 0;
    for (double v : t) total += v;
    return std::pair<double, double>{t.size() > 3 ? t[3] : 0.0, total};
  };
  const auto [idle0, total0] = sample();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const auto [idle1, total1] = sample();
  return total1 > total0 ? (idle1 - idle0) / (total1 - total0) : 0.0;
}

// One plan and rank count: the first launch's row per mode and every launch's figures.
struct Config {
  std::string kind;
  int ranks;
  std::vector<Json> rows;                   // per mode, the first launch's row
  std::vector<std::vector<double>> ms;      // per mode, per launch
  std::vector<std::vector<double>> ratio;   // per mode, per launch: over block-wise's
  // Per mode, per launch: the predictor's term over the launch's measured median, with the
  // preset's figures and with the launch's own probe's.
  std::vector<std::vector<double>> pred_ratio, pred_measured_ratio;
  // Per launch: the probe's figures.
  std::vector<double> shared_gbps, link_gbps, piece_latency_ms;
  std::vector<double> idle;                 // per launch: the CPUs' idle share just before
};

// `launches` rounds of one mpirun launch per configuration, `reps` repetitions a launch. Each
// configuration runs in separate launches, interleaved with the other configurations: with 8
// ranks on 2 cores one launch's scheduling pattern persists through all its repetitions, and
// the same configuration measured 13-39 ms from one launch to the next, while the modes of one
// launch stayed within a few percent of each other.
std::vector<Config> run_launches(const std::string& self, bool quick, int reps, int launches) {
  std::vector<Config> configs;
  for (const std::string kind : {"asymmetric", "tp"}) {
    for (int ranks : quick ? std::vector<int>{4} : std::vector<int>{4, 8}) {
      configs.emplace_back();
      configs.back().kind = kind;
      configs.back().ranks = ranks;
    }
  }
  for (int launch = 0; launch < launches; ++launch) {
    for (Config& c : configs) {
      MpirunOptions o;
      o.num_ranks = c.ranks;
      o.as_root = running_as_root();
      std::string out;
      c.idle.push_back(idle_share(0.5));
      const int code = run_capture(
          join(mpirun_argv(o, {self, "--worker-aggregation", c.kind, std::to_string(c.ranks),
                               std::to_string(reps)})),
          &out);
      if (code != 0) {
        std::fprintf(stderr,
                     "runtime_bench: mpirun of %d ranks (%s plan) failed with exit code %d\n",
                     c.ranks, c.kind.c_str(), code);
        std::exit(1);
      }
      std::istringstream lines(out);
      double block_ms = 0;
      std::size_t m = 0;
      for (std::string line; std::getline(lines, line);) {
        if (line.empty() || line[0] != '{') continue;
        Json j = Json::parse(line);
        const double ms = j["ms"];
        if (j["mode"] == "block") block_ms = ms;
        if (launch == 0) {
          c.rows.push_back(j);
          c.ms.emplace_back();
          c.ratio.emplace_back();
          c.pred_ratio.emplace_back();
          c.pred_measured_ratio.emplace_back();
        } else {  // the extremes over every repetition of every launch
          Json& first = c.rows[m];
          first["ms_min"] = std::min(first["ms_min"].get<double>(), j["ms_min"].get<double>());
          first["ms_max"] = std::max(first["ms_max"].get<double>(), j["ms_max"].get<double>());
        }
        c.ms[m].push_back(ms);
        c.ratio[m].push_back(block_ms > 0 ? ms / block_ms : 1.0);
        c.pred_ratio[m].push_back(j["predicted_ms"].get<double>() / ms);
        c.pred_measured_ratio[m].push_back(j["predicted_measured_ms"].get<double>() / ms);
        if (m == 0) {
          c.shared_gbps.push_back(j["link_shared_gbps"]);
          c.link_gbps.push_back(j["link_gbps"]);
          c.piece_latency_ms.push_back(j["link_piece_latency_ms"]);
        }
        ++m;
      }
    }
  }
  return configs;
}

// The configuration's row per mode, printed unless `json`, then its probe figures and summary:
// ms is the median over the launches of each launch's median; vs_block the median over the
// launches of the mode's time over block-wise's in the same launch (paired, so the launch
// pattern cancels).
void config_rows(const Config& c, int launches, bool json, Json& rows) {
  std::vector<double> all_ratios;  // every mode and launch, with the launch's own figures
  for (std::size_t m = 0; m < c.rows.size(); ++m) {
    Json j = c.rows[m];
    const double ms = median(c.ms[m]);
    j["ms"] = ms;
    j["ms_launches"] = c.ms[m];
    j["launches"] = launches;
    j["vs_block"] = median(c.ratio[m]);
    j["vs_block_launches"] = c.ratio[m];
    j["idle_before_min"] = *std::min_element(c.idle.begin(), c.idle.end());
    // Ratios are paired within a launch (its prediction over its own median), then the
    // median over launches; predicted_measured_ms is that ratio times ms.
    j["pred_over_ms"] = median(c.pred_ratio[m]);
    j["pred_measured_over_ms"] = median(c.pred_measured_ratio[m]);
    j["pred_measured_over_ms_launches"] = c.pred_measured_ratio[m];
    j["link_shared_gbps_launches"] = c.shared_gbps;
    j["link_gbps_launches"] = c.link_gbps;
    j["link_piece_latency_ms_launches"] = c.piece_latency_ms;
    all_ratios.insert(all_ratios.end(), c.pred_measured_ratio[m].begin(),
                      c.pred_measured_ratio[m].end());
    rows.push_back(j);
    if (json) continue;
    const std::string per_launch = comma_list(c.pred_measured_ratio[m], "%.2f");
    const std::string ms_launches = comma_list(c.ms[m], "%.1f");
    std::printf("aggregation %-10s %5d %-7s %8.2f %8.2f %8.2f %7.2f %9.2f %7.2f %-17s %7.2f "
                "%7.2f %5lld %6lld %5lld %7.2fx %7.2f %4.0f%% %s\n",
                c.kind.c_str(), c.ranks, j["mode"].get<std::string>().c_str(), ms,
                j["ms_min"].get<double>(), j["predicted_ms"].get<double>(),
                j["pred_over_ms"].get<double>(),
                j["pred_measured_over_ms"].get<double>() * ms,
                j["pred_measured_over_ms"].get<double>(), per_launch.c_str(),
                j["bytes_per_rank_max"].get<double>() / 1e6,
                j["copied_bytes_max"].get<double>() / 1e6,
                static_cast<long long>(j["collectives"].get<std::int64_t>()),
                static_cast<long long>(j["pieces"].get<std::int64_t>()),
                static_cast<long long>(j["communicators"].get<std::int64_t>()),
                j["vs_block"].get<double>(), j["in_flight_bytes_max"].get<double>() / 1e6,
                100.0 * j["idle_before_min"].get<double>(), ms_launches.c_str());
  }
  if (!json) {
    std::string figs;
    for (std::size_t l = 0; l < c.shared_gbps.size(); ++l) {
      char b[128];
      std::snprintf(b, sizeof b, "%s%.1f / %.1f Gbit/s, %.1f us", l ? "; " : "",
                    c.shared_gbps[l], c.link_gbps[l], c.piece_latency_ms[l] * 1e3);
      figs += b;
    }
    std::printf("probe       %-10s %5d node shared / intra-node link, piece latency, "
                "per launch: %s\n",
                c.kind.c_str(), c.ranks, figs.c_str());
  }
  summary("aggregation", c.kind + "-" + std::to_string(c.ranks) + " probe_pred/ms", all_ratios,
          0.85, 1.15, json);
}

}  // namespace

Json aggregation_section(const std::string& self, bool quick, bool json) {
  const int reps = quick ? 5 : 21;
  const int launches = quick ? 1 : 3;
  const std::vector<Config> configs = run_launches(self, quick, reps, launches);
  Json rows = Json::array();
  if (!json) {
    std::printf("\n== gradient aggregation (%s, %.1f M parameters, fp32 gradients, MPI over "
                "shared memory): per launch the median of %d repetitions of the slowest rank, "
                "modes interleaved; ms = median of %d launches\n",
                aggregation_model().name.c_str(),
                static_cast<double>(total_params(aggregation_model())) / 1e6, reps, launches);
    std::printf("%-11s %-10s %5s %-7s %8s %8s %8s %7s %9s %7s %-17s %7s %7s %5s %6s %5s %8s %7s "
                "%5s %s\n", "", "plan", "ranks", "mode", "ms", "min_ms", "pred_ms", "pred/ms",
                "probe_ms", "prb/ms", "prb/ms_launches", "mb_rank", "copied", "coll", "pieces",
                "comms", "vs_block", "win_mb", "idle", "ms_launches");
  }
  for (const Config& c : configs) config_rows(c, launches, json, rows);
  if (!json) {
    std::printf("   (pred_ms: the predictor's term with the `cpu` preset's link figures; "
                "probe_ms: with the figures the launch's own link probe measured (bench/"
                "link_probe.h), pred/ms and prb/ms paired per launch, median over launches; "
                "copied: bytes a rank copies or fills outside the collectives per step; "
                "device-wise zero-fills its padding; win_mb: the most bytes of pieces one "
                "rank had in flight; idle: the CPUs' least idle share over 0.5 s before a "
                "launch; load after: %.2f)\n", load_1m());
  }
  return rows;
}

}  // namespace eth::bench
