// `eth train --plan --trace` on the threads backend, end to end through the built tool: the file
// is a valid Chrome trace of every rank (trace_check.h), and `eth simulate --measured` of it
// draws a well-formed SVG (checked with Python's XML parser) and a table whose measured figures
// and errors this test re-derives from the two trace files itself.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "core/json_cursor.h"
#include "eth_run.h"
#include "runtime/trace_check.h"
#include "test_util.h"

namespace eth {
namespace {

namespace fs = std::filesystem;
using test::slurp;

// tiny on 5 cpu devices: pipeline A with a dp-2 second stage that recomputes attention scores,
// pipeline B cut elsewhere; the three holder groups are {0,3}, {1,2,3} and {1,2,4}.
const char* kPlan = R"({"format": "eth-plan", "version": 1, "model": "tiny", "gbs": 8,
  "seq_len": 16, "pipelines": [
  {"micro_batch_size": 2, "local_batch": 6, "stages": [
    {"device_type": "cpu", "devices": [0], "units": [0, 2]},
    {"device_type": "cpu", "devices": [1, 2], "dp": 2, "units": [3, 5],
     "recompute": ["attn_score"]}]},
  {"micro_batch_size": 1, "local_batch": 2, "stages": [
    {"device_type": "cpu", "devices": [3], "units": [0, 3]},
    {"device_type": "cpu", "devices": [4], "units": [4, 5]}]}]})";

// The tool's exit code; its output stays in <dir>/eth.stdout and <dir>/eth.stderr.
int run(const std::string& args, const fs::path& dir) { return test::eth_cli(args, dir).code; }

struct Fixture {
  fs::path dir, plan, cluster, data, profile;
};

Fixture setup(const std::string& name) {
  Fixture f;
  f.dir = test::scratch("trace", name);
  f.plan = f.dir / "plan.json";
  f.cluster = f.dir / "cluster.json";
  f.data = f.dir / "data.bin";
  f.profile = f.dir / "profile";
  std::ofstream(f.plan) << kPlan;
  std::ofstream(f.cluster) << R"({"nodes": [{"device_type": "cpu", "devices": 5}]})";
  EXPECT_EQ(run("data --synthetic 20000 --out " + f.data.string(), f.dir), 0)
      << slurp(f.dir / "eth.stderr");
  return f;
}

std::string train(const Fixture& f, const fs::path& trace) {
  return "train --plan " + f.plan.string() + " --cluster " + f.cluster.string() +
         " --backend threads --data " + f.data.string() +
         " --steps 3 --lr 1e-3 --print-every 0 --trace " + trace.string() + " --trace-steps 1-2";
}

TEST(TraceCli, ThreadsRunWritesAValidChromeTraceOfEveryRank) {
  const Fixture f = setup("threads");
  const fs::path trace = f.dir / "trace.json";
  ASSERT_EQ(run(train(f, trace), f.dir), 0) << slurp(f.dir / "eth.stderr");
  const Json doc = Json::parse(slurp(trace));
  test::TraceSummary s;
  test::check_trace(doc, Json::parse(kPlan), 5, &s);
  EXPECT_EQ(s.steps, (std::set<std::int64_t>{1, 2}));
  // Every kind of action is there: stage 1 of pipeline A recomputes, receives and sends.
  for (const char* cat : {"forward", "backward", "recompute", "send_activation", "send_gradient",
                          "recv_activation", "recv_gradient", "collective", "sync", "optimizer",
                          "step"}) {
    EXPECT_GT(s.by_category.count(cat), 0u) << cat;
  }
  // 6 + 2 samples in micro-batches of 2 and 1: rank 0 runs 3 forwards a step, ranks 1 and 2
  // (dp 2 over micro-batches of 2) 3 each, ranks 3 and 4 2 each: 13 per step.
  EXPECT_EQ(s.by_category.at("forward"), 2u * 13);
  EXPECT_EQ(s.by_category.at("step"), 2u * 5);
}

TEST(TraceCli, BadTraceStepsAreRefusedBeforeTraining) {
  const Fixture f = setup("bad_steps");
  const std::string base = "train --plan " + f.plan.string() + " --cluster " +
                           f.cluster.string() + " --backend threads --data " + f.data.string() +
                           " --steps 3 --print-every 0 --trace " + (f.dir / "t.json").string();
  EXPECT_EQ(run(base + " --trace-steps 2-1", f.dir), 2);
  EXPECT_NE(slurp(f.dir / "eth.stderr").find("--trace-steps"), std::string::npos);
  EXPECT_EQ(run(base + " --trace-steps 7", f.dir), 2);
  EXPECT_NE(slurp(f.dir / "eth.stderr").find("not in this run"), std::string::npos);
  EXPECT_FALSE(fs::exists(f.dir / "t.json"));
}

// Per-stage means the test derives from the trace file on its own: sums over each step's slices
// of a category on the stage's ranks, averaged over the steps and the ranks.
double measured_mean(const Json& trace, const std::vector<std::int64_t>& ranks,
                     const std::set<std::string>& cats) {
  std::set<std::int64_t> steps;
  double total = 0;
  for (const Json& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    steps.insert(e.at("args").at("step").get<std::int64_t>());
    const std::int64_t pid = e.at("pid");
    if (std::find(ranks.begin(), ranks.end(), pid) == ranks.end()) continue;
    if (cats.count(e.at("cat").get<std::string>())) total += e.at("dur").get<double>() / 1e3;
  }
  return total / static_cast<double>(steps.size() * ranks.size());
}

// The simulated sums of the comparison trace's simulated processes (pid < pipelines).
double simulated_mean(const Json& cmp, std::int64_t pipelines, std::int64_t stride,
                      const std::vector<std::int64_t>& devices, const std::string& cat) {
  double total = 0;
  for (const Json& e : cmp.at("traceEvents")) {
    if (e.at("ph") != "X" || e.at("pid").get<std::int64_t>() >= pipelines) continue;
    const std::int64_t device = e.at("tid").get<std::int64_t>() % stride;
    if (std::find(devices.begin(), devices.end(), device) == devices.end()) continue;
    if (e.at("cat") == cat) total += e.at("dur").get<double>() / 1e3;
  }
  return total / static_cast<double>(devices.size());
}

TEST(TraceCli, SimulateMeasuredDrawsBothAndTabulatesTheErrors) {
  const Fixture f = setup("measured");
  const fs::path trace = f.dir / "trace.json", svg = f.dir / "cmp.svg", cmp = f.dir / "cmp.json";
  ASSERT_EQ(run(train(f, trace), f.dir), 0) << slurp(f.dir / "eth.stderr");
  ASSERT_EQ(run("profile --measure --model tiny --micro-batch-sizes 1,2 --seq 16 --cache warm "
                "--repeats 1 --out " +
                    f.profile.string(),
                f.dir),
            0)
      << slurp(f.dir / "eth.stderr");
  ASSERT_EQ(run("simulate --plan " + f.plan.string() + " --cluster " + f.cluster.string() +
                    " --profile " + f.profile.string() + " --measured " + trace.string() +
                    " --svg " + svg.string() + " --trace " + cmp.string() + " --format json",
                f.dir),
            0)
      << slurp(f.dir / "eth.stderr");
  const Json report = Json::parse(slurp(f.dir / "eth.stdout"));
  const Json measured_trace = Json::parse(slurp(trace));
  const Json both = Json::parse(slurp(cmp));
  const Json& m = report.at("measured");
  ASSERT_EQ(m.at("stages").size(), 4u);
  const std::int64_t stride = 5;  // 1 + largest device id
  for (const Json& st : m.at("stages")) {
    const auto devices = st.at("devices").get<std::vector<std::int64_t>>();  // = ranks here
    const double fwd = measured_mean(measured_trace, devices, {"forward"});
    const double bwd = measured_mean(measured_trace, devices, {"backward"});
    const double wait =
        measured_mean(measured_trace, devices, {"recv_activation", "recv_gradient", "send_wait"});
    EXPECT_NEAR(st.at("measured").at("forward_ms").get<double>(), fwd, 1e-6 * fwd + 1e-9);
    EXPECT_NEAR(st.at("measured").at("backward_ms").get<double>(), bwd, 1e-6 * bwd + 1e-9);
    EXPECT_NEAR(st.at("measured").at("wait_ms").get<double>(), wait, 1e-6 * wait + 1e-9);
    const double sim_fwd = simulated_mean(both, 2, stride, devices, "forward");
    const double sim_bwd = simulated_mean(both, 2, stride, devices, "backward");
    EXPECT_NEAR(st.at("simulated").at("forward_ms").get<double>(), sim_fwd, 1e-3);
    EXPECT_NEAR(st.at("simulated").at("backward_ms").get<double>(), sim_bwd, 1e-3);
    EXPECT_NEAR(st.at("error").at("forward").get<double>(), (sim_fwd - fwd) / fwd, 1e-4);
    EXPECT_NEAR(st.at("error").at("backward").get<double>(), (sim_bwd - bwd) / bwd, 1e-4);
  }
  // The SVG parses as XML, with a simulated and a measured row per device.
  const std::string check =
      "python3 -c \"import sys, xml.etree.ElementTree as ET; r = ET.parse(sys.argv[1]).getroot(); "
      "t = [x.text or '' for x in r.iter('{http://www.w3.org/2000/svg}text')]; "
      "s = sum(x.endswith(' simulated') for x in t); m = sum(x.endswith(' measured') for x in t); "
      "sys.exit(0 if r.tag.endswith('svg') and s == 5 and m == 5 else 1)\" " +
      svg.string();
  EXPECT_EQ(std::system(check.c_str()), 0) << slurp(svg).substr(0, 2000);
}

// Rewrites every entry of the profile in `dir` to fixed unit times (ms): a device far slower
// than this CPU, so an op's length shows which of the two the emulation followed.
void set_profile_times(const fs::path& dir, double forward_ms, double backward_ms) {
  for (const auto& entry : fs::directory_iterator(dir)) {
    Json j = Json::parse(slurp(entry.path()));
    for (Json& u : j.at("units")) {
      u["forward_ms"] = forward_ms;
      u["backward_ms"] = backward_ms;
      for (auto& [name, ms] : u.at("recompute_ms").items()) ms = 0.0;
    }
    std::ofstream(entry.path()) << j.dump(1);
  }
}

TEST(TraceCli, EmulatedOpsLastTheProfilesTimeWhateverTheirCompute) {
  // Under --emulate-from profile (the default with --profile) an emulated rank's forward and
  // backward last the time the profile gives its device type for its stage: here every unit
  // 2 ms forward and 4 ms backward on cpu, stretched 3x, so a stage of n units takes 3 n 2 ms
  // and 3 n 4 ms. The tiny model's real ops take well under a millisecond, so ops stretched by
  // their CPU time would last about 1 ms. One op may end early by the lateness the op before it
  // carried (emulation.h), but over a rank's ops from the first of the run on, each deadline is
  // at least the previous one plus the op's length: the last op of the rank ends no earlier
  // than the first began plus the sum of their lengths, however late any wake-up was. Every
  // step is traced, so the rank's first op is the run's.
  const Fixture f = setup("nominal");
  ASSERT_EQ(run("profile --measure --model tiny --micro-batch-sizes 1,2 --seq 16 --cache warm "
                "--repeats 1 --out " +
                    f.profile.string(),
                f.dir),
            0)
      << slurp(f.dir / "eth.stderr");
  set_profile_times(f.profile, 2.0, 4.0);
  const fs::path trace = f.dir / "trace.json";
  ASSERT_EQ(run("train --plan " + f.plan.string() + " --cluster " + f.cluster.string() +
                    " --backend threads --data " + f.data.string() +
                    " --steps 3 --lr 1e-3 --print-every 0 --trace " + trace.string() +
                    " --trace-steps 0-2 --emulate cpu=3 --profile " + f.profile.string() +
                    " --format json",
                f.dir),
            0)
      << slurp(f.dir / "eth.stderr");
  const Json report = Json::parse(slurp(f.dir / "eth.stdout"));
  EXPECT_EQ(report.at("emulated_from"), "profile");
  const Json plan = Json::parse(kPlan);
  std::map<std::int64_t, std::int64_t> units;  // rank (= device) -> units of its stage
  for (const Json& pipe : plan.at("pipelines")) {
    for (const Json& st : pipe.at("stages")) {
      for (const Json& d : st.at("devices")) {
        units[d.get<std::int64_t>()] = st.at("units")[1].get<std::int64_t>() -
                                       st.at("units")[0].get<std::int64_t>() + 1;
      }
    }
  }
  struct Span {
    double first_us = 1e300, last_end_us = 0, want_us = 0;
    std::size_t ops = 0;
  };
  std::map<std::int64_t, Span> spans;  // per rank
  const Json doc = Json::parse(slurp(trace));
  for (const Json& e : doc.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    const std::string cat = e.at("cat");
    if (cat != "forward" && cat != "backward") continue;
    const std::int64_t rank = e.at("pid");
    const auto n = static_cast<double>(units.at(rank));
    Span& sp = spans[rank];
    const double ts = e.at("ts"), dur = e.at("dur");
    sp.first_us = std::min(sp.first_us, ts);
    sp.last_end_us = std::max(sp.last_end_us, ts + dur);
    sp.want_us += 3 * n * (cat == "forward" ? 2.0 : 4.0) * 1e3;
    ++sp.ops;
  }
  ASSERT_EQ(spans.size(), 5u);
  std::size_t ops = 0;
  for (const auto& [rank, sp] : spans) {
    EXPECT_GE(sp.last_end_us - sp.first_us, sp.want_us * (1 - 1e-6)) << "rank " << rank;
    ops += sp.ops;
  }
  EXPECT_EQ(ops, 3u * 2 * 13);  // 13 forwards and 13 backwards a step, three steps traced
  // Profile emulation needs the profile.
  EXPECT_EQ(run(train(f, f.dir / "t2.json") + " --emulate cpu=3 --emulate-from profile", f.dir),
            2);
  EXPECT_NE(slurp(f.dir / "eth.stderr").find("--emulate-from"), std::string::npos);
}

}  // namespace
}  // namespace eth
