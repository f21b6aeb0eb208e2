// The built `eth` against the inputs that crashed, hung or misled it (issue 11): each now ends in
// its documented exit code with a message naming the file and field, within a liveness bound
// (eth_run.h; no timing is asserted). Outputs: a FIFO or a device as target is refused and left
// as it was, a missing folder is an error, a full disk (/dev/full as stdout, a file size limit)
// is exit 2 naming what could not be written.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/json_cursor.h"
#include "eth_run.h"
#include "model/arithmetic.h"
#include "model/model_spec.h"
#include "test_util.h"

namespace eth {
namespace {

namespace fs = std::filesystem;
using test::eth_cli;
using test::EthRun;

bool contains(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

class HostileCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::scratch("hostile_cli",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string file(const std::string& name, const std::string& text) {
    return test::write(dir_ / name, text);
  }
  EthRun eth(const std::string& args, const std::string& prefix = "",
             const std::string& stdout_to = "") {
    return eth_cli(args, dir_, prefix, 120, stdout_to);
  }
  std::string cluster_with(const std::string& type_fields) {
    return file("cluster.json",
                R"({"nodes": [{"device_type": "X", "devices": 4}], "device_types": {"X": )" +
                    type_fields + "}}");
  }
  fs::path dir_;
};

const char* kTinyPlan = R"({"model": "tiny", "gbs": 4, "seq_len": 16, "pipelines": [
  {"micro_batch_size": 2, "local_batch": 4, "stages": [
    {"device_type": "cpu", "devices": [0], "units": [0, 2]},
    {"device_type": "cpu", "devices": [1], "units": [3, 5]}]}]})";

// 100,000 levels crashed the reader with SIGSEGV, even inside a free-form field.
TEST_F(HostileCli, DeepNestingIsRefusedNotACrash) {
  std::string plan = kTinyPlan;
  plan.insert(plan.size() - 1, ", \"predicted\": " + std::string(100000, '[') +
                                   std::string(100000, ']'));
  const EthRun r = eth("validate --cluster cpu-2 --plan " + file("deep.json", plan));
  EXPECT_EQ(r.code, 2) << r.err.substr(0, 500);
  EXPECT_TRUE(contains(r.err, "deep.json: predicted[0][0]")) << r.err.substr(0, 500);
  EXPECT_TRUE(contains(r.err, "nesting deeper than 64 levels")) << r.err.substr(0, 500);
}

// 5e-324 TFLOPS aborted on an internal check; 5e-324 bandwidth made `eth plan` hang.
TEST_F(HostileCli, SubnormalSpeedsAndBandwidthsAreRefused) {
  const std::string ok = R"("tflops": 100, "memory_gb": 80, "intra_node_bandwidth_gbps": 100)";
  for (const auto& [fields, path] :
       {std::pair<std::string, std::string>{
            R"({"tflops": 5e-324, "memory_gb": 80, "intra_node_bandwidth_gbps": 100})",
            "device_types.X.tflops"},
        {R"({"tflops": 100, "memory_gb": 80, "intra_node_bandwidth_gbps": 5e-324})",
         "device_types.X.intra_node_bandwidth_gbps"},
        {"{" + ok + R"(, "inter_node_bandwidth_gbps": 5e-324})",
         "device_types.X.inter_node_bandwidth_gbps"},
        {"{" + ok + R"(, "memory_gb": 5e-324})", ""}}) {
    const EthRun r = eth("plan --model gpt3-350m --gbs 8 --cluster " + cluster_with(fields));
    EXPECT_EQ(r.code, 2) << fields << "\n" << r.err;
    if (!path.empty()) {
      EXPECT_TRUE(contains(r.err, "cluster.json: " + path + ": expected a number in"))
          << r.err;
    }
  }
  const std::string cluster_bw = file(
      "cluster_bw.json",
      R"({"nodes": [{"device_type": "A100", "devices": 4}], "inter_node_bandwidth_gbps": 5e-324})");
  const EthRun r = eth("plan --model gpt3-350m --gbs 8 --cluster " + cluster_bw);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "inter_node_bandwidth_gbps: expected a number in")) << r.err;
  // The Metis clusterfile too.
  const std::string host = file("hostfile", "10.0.0.1 slots=4\n");
  const std::string cf = file("clusterfile.json", R"({"10.0.0.1": {"instance_type": "A100",
      "inter_bandwidth": 5e-324, "intra_bandwidth": 300, "memory": 80}})");
  const EthRun m = eth("plan --model gpt3-350m --gbs 8 --hostfile " + host + " --clusterfile " + cf);
  EXPECT_EQ(m.code, 2) << m.err;
  EXPECT_TRUE(contains(m.err, "10.0.0.1.inter_bandwidth")) << m.err;
}

// Values at the very ends of their ranges still plan (no hang, no abort).
TEST_F(HostileCli, ExtremesOfTheRangesStillPlan) {
  const std::string c = file("extreme.json", R"({"nodes": [{"device_type": "X", "devices": 8},
      {"device_type": "A100", "devices": 8}], "inter_node_bandwidth_gbps": 0.001,
      "device_types": {"X": {"tflops": 1e-6, "memory_gb": 1e6, "intra_node_bandwidth_gbps": 0.001}}})");
  const EthRun r = eth("plan --model gpt3-350m --gbs 16777216 --cluster " + c);
  EXPECT_EQ(r.code, 0) << r.err;
}

// 2^24 micro-batches on two stages: the simulator (which keeps every event) refuses by name
// instead of running for minutes and gigabytes.
TEST_F(HostileCli, SimulatorBoundsItsWork) {
  Json plan = Json::parse(kTinyPlan);
  plan["gbs"] = 16777216;
  plan["pipelines"][0]["local_batch"] = 16777216;
  plan["pipelines"][0]["micro_batch_size"] = 1;
  const EthRun r =
      eth("simulate --analytic --cluster cpu-2 --plan " + file("big.json", plan.dump()));
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "big.json: has 33554432 (stage, micro-batch) pairs, more than the "
                              "16777216 the simulator handles"))
      << r.err;
}

// --gbs 9223372036854775807 hung the planner.
TEST_F(HostileCli, HugeGlobalBatchIsAUsageError) {
  const EthRun r = eth("plan --cluster 350m-910b2-910b4 --model gpt3-350m --gbs 9223372036854775807");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "--gbs")) << r.err;
}

// A billion samples aborted on a failed mmap; now the memory is named before anything is mapped.
TEST_F(HostileCli, TrainSaysHowMuchMemoryItNeeds) {
  const std::string data = (dir_ / "data.bin").string();
  ASSERT_EQ(eth("data --synthetic 5000 --vocab 256 --out " + data).code, 0);
  const EthRun r = eth("train --model tiny --data " + data + " --steps 1 --batch 1000000000");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "[cli] --batch: needs ")) << r.err;
  EXPECT_TRUE(contains(r.err, "available; use a smaller --micro-batch-size")) << r.err;
  // 16 bytes per parameter in fp32 (weight, gradient and the two Adam moments), 18 in bf16 (the
  // bf16 compute copy, fp32 gradient, master weight and moments).
  for (const auto& [precision, bytes] : {std::pair{"fp32", 16.0}, std::pair{"bf16", 18.0}}) {
    const EthRun big = eth("train --model gpt3-70b --data " + data + " --steps 1 --batch 1" +
                           " --precision " + precision);
    EXPECT_EQ(big.code, 2) << big.err;
    char state[64];
    std::snprintf(state, sizeof state, "parameters, gradients and AdamW state %.1f TB",
                  bytes * static_cast<double>(total_params(model_preset("gpt3-70b"))) / 1e12);
    EXPECT_TRUE(contains(big.err, state)) << precision << ": " << big.err;
  }
}

// Invalid UTF-8 in a plan under --format json was exit 3 with no file named.
TEST_F(HostileCli, InvalidUtf8NamesTheFileEvenAsJson) {
  std::string plan = kTinyPlan;
  plan.replace(plan.find("\"tiny\""), 6, "\"ti\xff\xfeny\"");
  const std::string f = file("utf8.json", plan);
  const EthRun r = eth("validate --format json --cluster cpu-2 --plan " + f);
  EXPECT_EQ(r.code, 2) << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j["violations"][0]["source"], f);
  EXPECT_TRUE(contains(j["violations"][0]["message"].get<std::string>(),
                       "invalid UTF-8 at line 1, column 14 (byte offset 13)"))
      << r.out;
  // A file name that is not UTF-8 is printed, not thrown on.
  const std::string odd = file("odd\xff.json", kTinyPlan);
  const EthRun o = eth("validate --format json --cluster cpu-2 --plan '" + odd + "'");
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_NO_THROW(Json::parse(o.out));
}

TEST_F(HostileCli, DuplicateKeysNamedByPath) {
  std::string plan = kTinyPlan;
  plan.replace(plan.find("\"local_batch\": 4"), 16, "\"local_batch\": 4, \"local_batch\": 2");
  const EthRun r = eth("validate --cluster cpu-2 --plan " + file("dup.json", plan));
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "dup.json: pipelines[0].local_batch: duplicate key")) << r.err;
}

// A NUL in a value cut messages short; a 10 MB key was echoed whole.
TEST_F(HostileCli, NulAndHugeKeysStayOutOfMessages) {
  std::string plan = kTinyPlan;
  plan.replace(plan.find("\"tiny\""), 6, "\"tiny\\u0000x\"");
  const EthRun nul = eth("validate --cluster cpu-2 --plan " + file("nul.json", plan));
  EXPECT_EQ(nul.code, 2);
  EXPECT_TRUE(contains(nul.err, "nul.json: escaped NUL (\\u0000) in a string at line 1, column "
                                "16 (byte offset 15); names and values must not hold NUL"))
      << nul.err;
  std::string big = kTinyPlan;
  big.insert(1, "\"" + std::string(10 << 20, 'k') + "\": 1, ");
  const EthRun key = eth("validate --cluster cpu-2 --plan " + file("key.json", big));
  EXPECT_EQ(key.code, 2);
  EXPECT_LT(key.err.size(), 1000u);
  EXPECT_TRUE(contains(key.err, "(10485760-byte key): unknown field")) << key.err;
}

TEST_F(HostileCli, BadFlagValuesAreUsageErrors) {
  const EthRun method = eth("plan --cluster cpu-2 --model tiny --gbs 8 --method foo");
  EXPECT_EQ(method.code, 1) << method.err;
  EXPECT_TRUE(contains(method.err, "--method")) << method.err;
  const EthRun rc = eth("train --model tiny --data x.bin --recompute foo");
  EXPECT_EQ(rc.code, 1) << rc.err;
  EXPECT_TRUE(contains(rc.err, "--recompute: unknown operator \"foo\"")) << rc.err;
}

// Thousands of duplicate stages printed O(n^2) lines; now each kind lists 10 and counts the rest.
TEST_F(HostileCli, DuplicateStagesReportStaysLinear) {
  Json plan = Json::parse(kTinyPlan);
  Json stage = plan["pipelines"][0]["stages"][0];
  for (int i = 0; i < 10000; ++i) plan["pipelines"][0]["stages"].push_back(stage);
  const EthRun r = eth("validate --cluster cpu-2 --plan " + file("many.json", plan.dump()));
  EXPECT_EQ(r.code, 2);
  EXPECT_LT(r.out.size(), 20000u) << r.out.substr(0, 2000);
  // 10,000 copies of stage 0: each reuses device 0 (10,000 violations) and overlaps units 0..2
  // (10,000), and the first copy comes after stage 1 out of unit order (1): 20,001 in all, of
  // which each of the two kinds lists 10.
  EXPECT_TRUE(contains(r.out, ": 9991 more violations at pipelines[*].stages[*].units elided (the "
                              "first 10 are listed)"))
      << r.out.substr(0, 3000);
  EXPECT_TRUE(contains(r.out, "plan INVALID: 20001 violations (20 listed)")) << r.out;
}

// --out at a FIFO or a device replaced it with a regular file (as root: /dev/full destroyed).
TEST_F(HostileCli, OutputTargetsThatAreNotFilesAreRefused) {
  const fs::path fifo = dir_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string plan = "plan --cluster cpu-2 --model tiny --gbs 8 --out ";
  const EthRun f = eth(plan + fifo.string());
  EXPECT_EQ(f.code, 2) << f.err;
  EXPECT_TRUE(contains(f.err, "[plan] " + fifo.string() + ": exists and is a FIFO")) << f.err;
  EXPECT_TRUE(fs::is_fifo(fifo));
  struct stat before {}, after {};
  ASSERT_EQ(::stat("/dev/full", &before), 0);
  const EthRun d = eth(plan + "/dev/full");
  EXPECT_EQ(d.code, 2) << d.err;
  EXPECT_TRUE(contains(d.err, "[plan] /dev/full: exists and is a character device")) << d.err;
  ASSERT_EQ(::stat("/dev/full", &after), 0);
  EXPECT_TRUE(S_ISCHR(after.st_mode));
  EXPECT_EQ(after.st_rdev, before.st_rdev);
  // A missing folder is an error, not created.
  const EthRun m = eth(plan + (dir_ / "no" / "plan.json").string());
  EXPECT_EQ(m.code, 2) << m.err;
  EXPECT_TRUE(contains(m.err, "the folder " + (dir_ / "no").string() + " does not exist"));
  EXPECT_FALSE(fs::exists(dir_ / "no"));
  // --log at a device, too.
  const EthRun log = eth("train --model tiny --data x.bin --log /dev/full");
  EXPECT_EQ(log.code, 2) << log.err;
  EXPECT_TRUE(contains(log.err, "[log] /dev/full: exists and is a character device")) << log.err;
}

// A full disk: stdout on /dev/full, and a file size limit under --out (SIGXFSZ ignored, as a
// shell's trap does). Both exit 2 naming what could not be written; the old plan stays whole.
TEST_F(HostileCli, FullDiskIsExit2NamingTheOutput) {
  const EthRun s = eth("clusters --format json", "", "/dev/full");
  EXPECT_EQ(s.code, 2) << s.err;
  EXPECT_EQ(s.err, "error: [io] standard output: cannot write: No space left on device\n");
  const std::string out = file("plan.json", "old");
  const EthRun f = eth("plan --cluster 13b-910b2-910b4 --model gpt3-13b --gbs 64 --out " + out,
                       "trap '' XFSZ; ulimit -f 4");
  EXPECT_EQ(f.code, 2) << f.err;
  EXPECT_TRUE(contains(f.err, "[plan] " + out + ": cannot write: File too large (is the disk full?)"))
      << f.err;
  EXPECT_EQ(test::slurp(out), "old");
}

// Folders a command creates by design must not be files; found before any work.
TEST_F(HostileCli, OutputFoldersThatAreFilesAreRefusedBeforeWork) {
  const std::string not_dir = file("not_a_dir", "x");
  const EthRun p = eth("profile --analytic --model tiny --cluster cpu-2 --out " + not_dir);
  EXPECT_EQ(p.code, 2) << p.err;
  EXPECT_TRUE(contains(p.err, "[profile] " + not_dir + ": exists and is a regular file, expected "
                              "a folder"))
      << p.err;
  const EthRun pm = eth("profile --measure --model tiny --out " + not_dir);
  EXPECT_EQ(pm.code, 2) << pm.err;
  EXPECT_FALSE(contains(pm.err, "measuring")) << pm.err;
  const std::string data = (dir_ / "data.bin").string();
  ASSERT_EQ(eth("data --synthetic 5000 --vocab 256 --out " + data).code, 0);
  const std::string log = (dir_ / "log.jsonl").string();
  const EthRun t = eth("train --model tiny --data " + data + " --steps 2 --batch 2 --seq-len 16 "
                       "--checkpoint-dir " + not_dir + " --log " + log);
  EXPECT_EQ(t.code, 2) << t.err;
  EXPECT_TRUE(contains(t.err, "[checkpoint] " + not_dir + ": exists and is a regular file")) << t.err;
  EXPECT_FALSE(fs::exists(log)) << "no step may run before the outputs are checked";
}

}  // namespace
}  // namespace eth
