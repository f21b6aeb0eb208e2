// A model's safetensors weights as a folder holds them (hf/safetensors_model.cpp): one
// model.safetensors or the shards a model.safetensors.index.json names, read as one set of
// tensors; an index that disagrees with its shards, and a folder with neither file, refused by
// name before any tensor is read.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "hf/safetensors.h"
#include "hf_test_util.h"
#include "test_util.h"

namespace eth::hf::safetensors_model_test {
namespace {

namespace fs = std::filesystem;
const fs::path kData = test::hf_data();

TEST(HfSafetensorsModel, ShardedIndexReadsTheSameTensors) {
  const SafetensorsModel single(kData / "gpt2_f32");
  const SafetensorsModel sharded(kData / "gpt2_f32_sharded");
  EXPECT_FALSE(single.sharded());
  EXPECT_TRUE(sharded.sharded());
  EXPECT_GT(sharded.files().size(), 1u);
  ASSERT_EQ(single.names(), sharded.names());
  for (const std::string& n : single.names()) {
    const auto count = static_cast<std::size_t>(single.find(n)->numel());
    std::vector<float> x(count), y(count);
    single.read_f32(n, x.data());
    sharded.read_f32(n, y.data());
    ASSERT_EQ(std::memcmp(x.data(), y.data(), count * 4), 0) << n;
  }
}

TEST(HfSafetensorsModel, FindsEachTensorInItsShardAndNothingElse) {
  const SafetensorsModel sharded(kData / "gpt2_f32_sharded");
  // Each name is in exactly the shard file whose own header lists it.
  for (const fs::path& file : sharded.files()) {
    const SafetensorsFile f(file);
    for (const TensorInfo& t : f.tensors()) {
      EXPECT_EQ(sharded.file_of(t.name), file) << t.name;
      ASSERT_NE(sharded.find(t.name), nullptr) << t.name;
      EXPECT_EQ(sharded.find(t.name)->shape, t.shape) << t.name;
    }
  }
  EXPECT_EQ(sharded.find("transformer.no_such_tensor"), nullptr);
  const SafetensorsModel single(kData / "gpt2_f32");
  ASSERT_EQ(single.files().size(), 1u);
  EXPECT_EQ(single.files()[0], kData / "gpt2_f32" / "model.safetensors");
}

TEST(HfSafetensorsModel, RefusesAFolderWithoutWeightsOrWithAnEmptyIndex) {
  const fs::path dir = test::scratch("hf", "no_weights");
  fs::remove(dir / "model.safetensors.index.json");  // a previous run's
  test::expect_refused("no weights", [&] { SafetensorsModel m(dir); }, dir.string(), "",
                       "no model.safetensors or model.safetensors.index.json");
  const fs::path index = dir / "model.safetensors.index.json";
  test::write_bytes(index, R"({"metadata": {}, "weight_map": {}})");
  test::expect_refused("empty index", [&] { SafetensorsModel m(dir); }, index.string(),
                       "weight_map", "at least one tensor");
  fs::remove_all(dir);
}

TEST(HfSafetensorsModel, RefusesIndexesThatDisagreeWithTheirShards) {
  const fs::path src = kData / "gpt2_f32_sharded";
  const std::string index = test::read_bytes(src / "model.safetensors.index.json");
  const Json j = Json::parse(index);
  struct Case {
    const char* what;
    std::function<void(Json&)> edit;
    const char* field_part;
    const char* phrase;
  };
  const std::vector<Case> cases = {
      {"folder in name",
       [](Json& x) { x["weight_map"]["transformer.wte.weight"] = "../model.safetensors"; },
       "weight_map.transformer.wte.weight", "a shard file name"},
      {"tensor the shard lacks", [](Json& x) { x["weight_map"]["transformer.extra"] =
                                                  x["weight_map"]["transformer.wte.weight"]; },
       "weight_map.transformer.extra", "does not hold the tensor"},
      {"tensor mapped elsewhere",
       [](Json& x) {
         x["weight_map"].erase("transformer.wte.weight");
       },
       "weight_map.transformer.wte.weight", "maps it nowhere"},
      {"missing shard",
       [](Json& x) { x["weight_map"]["transformer.wte.weight"] = "nope.safetensors"; }, "",
       "no such safetensors file"},
  };
  for (const Case& c : cases) {
    const fs::path dir = test::scratch("hf", "index");
    for (const auto& e : fs::directory_iterator(src)) {
      fs::copy_file(e.path(), dir / e.path().filename(), fs::copy_options::overwrite_existing);
    }
    Json edited = j;
    c.edit(edited);
    test::write_bytes(dir / "model.safetensors.index.json", edited.dump());
    test::expect_refused(c.what, [&] { SafetensorsModel m(dir); }, "", c.field_part, c.phrase);
    fs::remove_all(dir);
  }
}

}  // namespace
}  // namespace eth::hf::safetensors_model_test
