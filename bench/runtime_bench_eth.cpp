// runtime_bench's sections (2) and (3): trainings through the built `eth` as a user runs them
// (profile, plan, launch), each run's measured iteration beside the predictor's. (2) emulated:
// the eth, layer and uniform plans on `cpu-emulated`, the runs interleaved, and eth's speedup
// over layer measured against predicted; (3) cpu2: a real 2-rank plan on this machine.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_util.h"
#include "runtime_bench.h"

namespace eth::bench {

namespace {

namespace fs = std::filesystem;

// Runs the built `eth` with `args` (stdout captured and returned, stderr to a file in the
// scratch folder); exits on failure.
std::string run_eth(const Setup& s, const std::string& args) {
  std::string out;
  const std::string err = (s.dir / "stderr.txt").string();
  const std::string cmd = s.eth + " " + args + " 2>" + err;
  if (run_capture(cmd, &out) != 0) {
    std::ifstream in(err);
    std::stringstream ss;
    ss << in.rdbuf();
    std::fprintf(stderr, "runtime_bench: failed: %s\n%s\n", cmd.c_str(), ss.str().c_str());
    std::exit(1);
  }
  return out;
}

struct Measured {
  double predicted_ms = 0, measured_ms = 0, load = 0;
};

// One training run through eth launch; the report's measured and predicted iteration.
Measured launch(const Setup& s, const fs::path& plan, const fs::path& profile,
                const std::string& extra) {
  Measured m;
  m.load = load_1m();
  const std::string out =
      run_eth(s, "launch --plan " + plan.string() + " -- --data " +
                     (s.dir / "data.bin").string() + " --steps " + std::to_string(s.steps) +
                     " --profile " + profile.string() +
                     " --print-every 0 --format json --threads 1 " + extra);
  const Json j = Json::parse(out.substr(out.find('{')));
  m.measured_ms = j["measured_iteration_ms"];
  m.predicted_ms = j["predicted_iteration_ms"];
  return m;
}

// 4 blocks of hidden 256 over sequences of 128: a forward of 4 samples is ~0.4 GFLOP per block,
// long enough that compute, not message latency, dominates on 2 cores.
ModelSpec bench_model() { return ModelSpec{"bench-4x256", 4, 256, 4, 128, 512, 1024}; }

// The model file, the token file and the cpu profile of bench_model(), measured once (both
// sections use it) the way the runs use the kernels: one thread, thread CPU time, caches cold
// (eth profile --measure's defaults; docs/runtime.md "Measured vs predicted").
struct Inputs {
  fs::path model, profile;
  std::string sizes;
};

Inputs inputs(const Setup& s) {
  const ModelSpec model = bench_model();
  Inputs in{s.dir / "model.json", s.dir / "profile", s.quick ? "1,4" : "1,2,4,8"};
  if (fs::exists(in.profile)) return in;
  std::ofstream(in.model) << model_to_json(model).dump(1);
  // Medians of 7: with 3, one invocation's profile priced the layer plan 5% under the next
  // one's (the planner's input moves every prediction of the invocation together).
  run_eth(s, "profile --measure --model " + in.model.string() + " --micro-batch-sizes " +
                 in.sizes + " --threads 1 --repeats " + (s.quick ? "1" : "7") + " --out " +
                 in.profile.string());
  run_eth(s, "data --synthetic 200000 --vocab " + std::to_string(model.vocab) + " --out " +
                 (s.dir / "data.bin").string());
  return in;
}

}  // namespace

Json emulated_section(const Setup& s) {
  const ModelSpec model = bench_model();
  const std::int64_t gbs = 16;
  if (!s.json) std::printf("\n== emulated heterogeneous cluster cpu-emulated: 2 x cpu-fast + 2 x cpu-slow "
              "(EMULATED: every op stretched 4x on fast, 12x on slow ranks; --emulate-from %s), "
              "%s, gbs %lld, seq %lld, %d steps a run\n",
              s.emulate_from.c_str(), model.name.c_str(), static_cast<long long>(gbs),
              static_cast<long long>(model.seq_len), s.steps);
  const Inputs in = inputs(s);
  const std::vector<std::string> methods{"eth", "layer", "uniform"};
  for (const std::string& m : methods) {
    run_eth(s, "plan --cluster cpu-emulated --model " + in.model.string() + " --gbs " +
                   std::to_string(gbs) + " --profile " + in.profile.string() + " --tp 1 " +
                   "--micro-batch-sizes " + in.sizes + " --method " + m + " --out " +
                   (s.dir / (m + ".json")).string());
  }
  if (!s.json) {
    std::printf("%-9s %3s %-8s %12s %11s %7s %5s\n", "", "run", "method", "predicted_ms",
                "measured_ms", "ratio", "load1");
  }
  Json out{{"model", model.name}, {"gbs", gbs}, {"steps", s.steps}, {"runs", Json::array()},
           {"speedups", Json::array()}, {"summary", Json::array()}};
  std::vector<std::vector<double>> ratios(methods.size());
  std::vector<double> speedup_errors;
  for (int run = 1; run <= s.runs; ++run) {
    std::vector<Measured> ms;
    for (std::size_t i = 0; i < methods.size(); ++i) {
      const Measured m = launch(s, s.dir / (methods[i] + ".json"), in.profile,
                                "--emulate-from " + s.emulate_from);
      const double ratio = m.predicted_ms / m.measured_ms;
      out["runs"].push_back(Json{{"run", run}, {"method", methods[i]},
                                 {"predicted_ms", m.predicted_ms}, {"measured_ms", m.measured_ms},
                                 {"ratio", ratio}, {"load_1m", m.load}});
      if (!s.json) {
        std::printf("emulated  %3d %-8s %12.1f %11.1f %7.3f %5.2f\n", run, methods[i].c_str(),
                    m.predicted_ms, m.measured_ms, ratio, m.load);
        std::fflush(stdout);
      }
      ratios[i].push_back(ratio);
      ms.push_back(m);
    }
    const double measured = ms[1].measured_ms / ms[0].measured_ms;
    const double predicted = ms[1].predicted_ms / ms[0].predicted_ms;
    speedup_errors.push_back((measured - predicted) / predicted);
    out["speedups"].push_back(Json{{"run", run}, {"measured", measured}, {"predicted", predicted},
                                   {"error", speedup_errors.back()}});
    if (!s.json) {
      std::printf("speedup   %3d eth_over_layer measured=%.3f predicted=%.3f error=%+.3f\n", run,
                  measured, predicted, speedup_errors.back());
    }
  }
  for (std::size_t i = 0; i < methods.size(); ++i) {
    out["summary"].push_back(
        summary("emulated", methods[i] + " ratio", ratios[i], 0.90, 1.10, s.json));
  }
  out["summary"].push_back(
      summary("emulated", "speedup error", speedup_errors, -0.10, 0.10, s.json));
  return out;
}

Json cpu2_section(const Setup& s) {
  const ModelSpec model = bench_model();
  const std::int64_t gbs = 16;
  if (!s.json) std::printf("\n== real 2-rank plan on cpu-2 (this machine, NOT emulated; one core and one "
              "thread per rank, --pin), %s, gbs %lld, seq %lld, %d steps a run\n",
              model.name.c_str(), static_cast<long long>(gbs),
              static_cast<long long>(model.seq_len), s.steps);
  const Inputs in = inputs(s);
  const fs::path plan = s.dir / "cpu2.json";
  const std::string shown = run_eth(s, "plan --cluster cpu-2 --model " + in.model.string() +
                                           " --gbs " + std::to_string(gbs) + " --profile " +
                                           in.profile.string() + " --tp 1 --micro-batch-sizes " +
                                           in.sizes + " --out " + plan.string());
  Json out{{"model", model.name}, {"gbs", gbs}, {"steps", s.steps}, {"plan", Json::array()},
           {"runs", Json::array()}, {"summary", Json::array()}};
  std::istringstream lines(shown);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("pipeline") != std::string::npos || line.find(" cpu ") != std::string::npos) {
      out["plan"].push_back(line);
      if (!s.json) std::printf("  %s\n", line.c_str());
    }
  }
  if (!s.json) {
    std::printf("%-9s %3s %12s %11s %7s %5s\n", "", "run", "predicted_ms", "measured_ms", "ratio",
                "load1");
  }
  std::vector<double> ratios;
  for (int run = 1; run <= s.runs; ++run) {
    const Measured m = launch(s, plan, in.profile, "--pin");
    ratios.push_back(m.predicted_ms / m.measured_ms);
    out["runs"].push_back(Json{{"run", run}, {"predicted_ms", m.predicted_ms},
                               {"measured_ms", m.measured_ms}, {"ratio", ratios.back()},
                               {"load_1m", m.load}});
    if (!s.json) {
      std::printf("cpu2      %3d %12.1f %11.1f %7.3f %5.2f\n", run, m.predicted_ms,
                  m.measured_ms, ratios.back(), m.load);
      std::fflush(stdout);
    }
  }
  out["summary"].push_back(summary("cpu2", "median ratio", ratios, 0.95, 1.05, s.json, true));
  return out;
}

}  // namespace eth::bench
