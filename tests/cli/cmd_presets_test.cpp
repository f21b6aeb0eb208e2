// Presets round-trip: every entry `eth clusters|models|devices --format json` prints is a valid
// file for the matching option (--cluster, --model, a cluster file's "device_types"), read back
// to the very preset; and one of each, written to a file, plans exactly as the preset name does;
// `eth models --format json` lists the fourteen presets with their architecture fields.
#include <gtest/gtest.h>

#include <set>

#include <nlohmann/json.hpp>

#include "cluster/cluster_spec.h"
#include "core/json_file.h"
#include "eth_run.h"
#include "model/model_spec.h"
#include "test_util.h"

namespace eth::cmd_presets_test {
namespace {

namespace fs = std::filesystem;

class PresetsCli : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::scratch("presets_cli", "roundtrip"); }
  void TearDown() override { fs::remove_all(dir_); }
  Json list(const std::string& what) {
    const test::EthRun r = test::eth_cli(what + " --format json", dir_);
    EXPECT_EQ(r.code, 0) << r.err;
    return Json::parse(r.out);
  }
  fs::path dir_;
};

TEST_F(PresetsCli, EveryPrintedPresetReadsBackAsItself) {
  const Json clusters = list("clusters");
  ASSERT_EQ(clusters.size(), cluster_presets().size());
  for (std::size_t i = 0; i < clusters.size(); ++i) {
    const auto path = test::write(dir_ / "cluster.json", clusters[i].dump(2));
    EXPECT_EQ(load_cluster(path), cluster_presets()[i].spec) << clusters[i].dump();
  }
  const Json models = list("models");
  ASSERT_EQ(models.size(), model_presets().size());
  for (std::size_t i = 0; i < models.size(); ++i) {
    const auto path = test::write(dir_ / "model.json", models[i].dump(2));
    EXPECT_EQ(load_model(path), model_presets()[i]) << models[i].dump();
  }
  const Json devices = list("devices");
  ASSERT_EQ(devices.size(), device_type_presets().size());
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const DeviceType& preset = device_type_presets()[i];
    const Json cluster = {{"nodes", {{{"device_type", preset.name}, {"devices", 2}}}},
                          {"device_types", {{preset.name, devices[i]}}}};
    const auto path = test::write(dir_ / "cluster.json", cluster.dump(2));
    EXPECT_EQ(load_cluster(path).type(preset.name), preset) << devices[i].dump();
  }
}

// Edited copies are checked like any file: a "devices" count that disagrees is refused.
TEST_F(PresetsCli, PrintedCountsMustAgree) {
  Json c = list("clusters")[0];
  c["devices"] = c["devices"].get<std::int64_t>() + 1;
  const auto cpath = test::write(dir_ / "cluster.json", c.dump());
  EXPECT_NE(test::error_of([&] { load_cluster(cpath); }).find("devices: expected the number of "
                                                              "devices the nodes hold"),
            std::string::npos);
  Json m = list("models")[0];
  m["layers"] = 2;
  const auto mpath = test::write(dir_ / "model.json", m.dump());
  EXPECT_NE(test::error_of([&] { load_model(mpath); }).find("params: expected the model's "
                                                            "parameter count"),
            std::string::npos);
}

// The Llama presets are listed with their kv heads and architecture, they plan, and every way
// of training one (eth train, a plan) gets past the model check; an architecture without
// kernels is refused on --model before any work, naming the field.
TEST_F(PresetsCli, LlamaPresetsPlanAndTrain) {
  const test::EthRun models = test::eth_cli("models", dir_);
  ASSERT_EQ(models.code, 0) << models.err;
  EXPECT_NE(models.out.find("llama3-70b"), std::string::npos) << models.out;
  EXPECT_NE(models.out.find("rms+rope+swiglu"), std::string::npos) << models.out;
  const std::string plan_file = (dir_ / "p.json").string();
  const test::EthRun plan = test::eth_cli(
      "plan --cluster cpu-2 --model llama-tiny --gbs 8 --out " + plan_file, dir_);
  EXPECT_EQ(plan.code, 0) << plan.err;
  for (const std::string& cmd :
       {std::string("train --model llama-tiny --data x.bin --steps 1"),
        "train --plan " + plan_file + " --backend threads --data x.bin --steps 1"}) {
    SCOPED_TRACE(cmd);
    const test::EthRun r = test::eth_cli(cmd, dir_);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_EQ(r.err.find("llama architectures plan and simulate"), std::string::npos) << r.err;
  }
  // What has no kernels is refused by field: layer norm without biases.
  Json m;
  for (const auto& j : list("models")) {
    if (j["name"] == "llama-tiny") m = j;
  }
  ASSERT_FALSE(m.is_null());
  m["norm"] = "layernorm";
  m["bias"] = false;
  m.erase("params");
  const auto file = test::write(dir_ / "ln.json", m.dump());
  for (const std::string& cmd : {"train --model " + file + " --data x.bin --steps 1",
                                 "profile --measure --model " + file + " --out " +
                                     (dir_ / "prof").string()}) {
    SCOPED_TRACE(cmd);
    const test::EthRun r = test::eth_cli(cmd, dir_);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find("--model: model \"llama-tiny\": bias: layer norm without biases"),
              std::string::npos)
        << r.err;
  }
}

TEST_F(PresetsCli, AFileCopyPlansLikeThePreset) {
  const Json clusters = list("clusters");
  Json cpu2;
  for (const auto& c : clusters) {
    if (c["name"] == "cpu-2") cpu2 = c;
  }
  Json tiny;
  for (const auto& m : list("models")) {
    if (m["name"] == "tiny") tiny = m;
  }
  const auto c = test::write(dir_ / "c.json", cpu2.dump());
  const auto m = test::write(dir_ / "m.json", tiny.dump());
  const test::EthRun a = test::eth_cli("plan --format json --cluster cpu-2 --model tiny --gbs 8", dir_);
  const test::EthRun b = test::eth_cli("plan --format json --cluster " + c + " --model " + m +
                                           " --gbs 8", dir_);
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  Json ja = Json::parse(a.out), jb = Json::parse(b.out);
  EXPECT_EQ(ja["pipelines"], jb["pipelines"]);
  EXPECT_EQ(ja["cluster"], jb["cluster"]);
}

TEST(ModelsCli, JsonListsTheFourteenPresets) {
  const test::EthRun r = test::eth_cli("models --format json");
  ASSERT_EQ(r.code, 0) << r.out_and_err();
  const Json j = Json::parse(r.out);
  std::set<std::string> names;
  for (const auto& m : j) names.insert(m.at("name").get<std::string>());
  EXPECT_EQ(names, (std::set<std::string>{"gpt3-350m", "gpt3-1.3b", "gpt3-2.6b", "gpt3-6.7b",
                                          "gpt3-13b", "gpt3-70b", "tiny", "gpt2-small",
                                          "llama2-7b", "llama2-13b", "llama2-70b", "llama3-8b",
                                          "llama3-70b", "llama-tiny"}));
  EXPECT_EQ(j.size(), 14u);
  // GPT entries carry no architecture fields; Llama ones carry theirs.
  for (const auto& m : j) {
    const bool llama = m.at("name").get<std::string>().rfind("llama", 0) == 0;
    EXPECT_EQ(m.contains("mlp"), llama) << m.dump();
    const std::set<std::string> gqa = {"llama2-70b", "llama3-8b", "llama3-70b", "llama-tiny"};
    EXPECT_EQ(m.contains("kv_heads"), gqa.count(m.at("name").get<std::string>()) == 1)
        << m.dump();
  }
}

}  // namespace
}  // namespace eth::cmd_presets_test
