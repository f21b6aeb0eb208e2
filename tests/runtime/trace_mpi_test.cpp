// `eth launch --plan -- --trace` under mpirun: one file for the whole run, written by rank 0
// from every rank's events, valid as a Chrome trace (trace_check.h), with clock offsets measured
// against rank 0 for every rank.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
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

// tiny on 3 cpu devices: a two-stage pipeline beside a one-stage one; holder groups {0,2} and
// {1,2}.
const char* kPlan = R"({"format": "eth-plan", "version": 1, "model": "tiny", "gbs": 6,
  "seq_len": 16, "pipelines": [
  {"micro_batch_size": 1, "local_batch": 4, "stages": [
    {"device_type": "cpu", "devices": [0], "units": [0, 2]},
    {"device_type": "cpu", "devices": [1], "units": [3, 5], "recompute": ["unit"]}]},
  {"micro_batch_size": 2, "local_batch": 2, "stages": [
    {"device_type": "cpu", "devices": [2], "units": [0, 5]}]}]})";

// The tool's exit code; its output stays in <dir>/eth.stdout and <dir>/eth.stderr.
int run(const std::string& args, const fs::path& dir) { return test::eth_cli(args, dir).code; }

TEST(TraceMpi, LaunchWritesOneValidTraceOfEveryRank) {
  const fs::path dir = test::scratch("trace_mpi", "launch");
  const fs::path plan = dir / "plan.json", cluster = dir / "cluster.json", data = dir / "d.bin";
  const fs::path trace = dir / "trace.json";
  std::ofstream(plan) << kPlan;
  std::ofstream(cluster) << R"({"nodes": [{"device_type": "cpu", "devices": 3}]})";
  ASSERT_EQ(run("data --synthetic 20000 --out " + data.string(), dir), 0)
      << slurp(dir / "eth.stderr");
  ASSERT_EQ(
      run("launch --plan " + plan.string() + " -- --cluster " + cluster.string() + " --data " +
              data.string() + " --steps 3 --print-every 0 --trace " + trace.string(),
          dir),
      0)
      << slurp(dir / "eth.stderr");
  const Json doc = Json::parse(slurp(trace));
  test::TraceSummary s;
  test::check_trace(doc, Json::parse(kPlan), 3, &s);
  EXPECT_EQ(s.steps, (std::set<std::int64_t>{1, 2}));  // the default: after the first, to end
  EXPECT_GT(s.by_category.count("recompute"), 0u);
  for (const Json& r : doc.at("otherData").at("ranks")) {
    // Ranks of one host share the steady clock: the measured offset is within its own bound
    // (plus a little for the reads of the clock themselves).
    EXPECT_LE(std::abs(r.at("clock_offset_us").get<double>()),
              r.at("clock_error_us").get<double>() + 50)
        << r.dump();
  }
  // No temporary file is left beside it.
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    files += entry.path().filename().string().rfind("trace", 0) == 0 ? 1 : 0;
  }
  EXPECT_EQ(files, 1u);
}

}  // namespace
}  // namespace eth
