// The family-independent steps of `eth convert` (hf/convert_io.h): outputs refused by name before
// any work (an existing file or folder unless --force, a sharded index in the way always), the
// import's checkpoint read back to the same weights and the record the way back needs, the
// export's dtype and base config taken from that record, and an export that writes whole files
// or nothing: a failed rewrite leaves the old files as they were and no temporary behind.
#include "hf/convert_io.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_file.h"
#include "hf/gpt2_config.h"
#include "hf/gpt2_convert.h"
#include "hf_test_util.h"
#include "model/arithmetic.h"
#include "test_util.h"

namespace eth::hf::convert_io_test {
namespace {

namespace fs = std::filesystem;

// The names of the entries of `dir`.
std::set<std::string> entries(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

fs::path fresh(const std::string& name) {
  const fs::path dir = test::scratch("convert_io", name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(ConvertIo, ImportOutputIsRefusedByNameUnlessForced) {
  const fs::path dir = fresh("import_out");
  const fs::path out = dir / "ckpt.safetensors";
  check_import_output(out, false);                // nothing there
  check_import_output(dir / "new" / "x", false);  // a missing folder: the writer creates it
  test::write(out, "old");
  test::expect_refused("existing file", [&] { check_import_output(out, false); }, out.string(),
                       "", "pass --force");
  check_import_output(out, true);
  EXPECT_EQ(test::slurp(out), "old");  // a check writes nothing
  // A folder where the file would go is refused even when forced.
  fs::create_directories(dir / "taken");
  test::expect_refused("folder", [&] { check_import_output(dir / "taken", true); },
                       (dir / "taken").string(), "", "");
}

TEST(ConvertIo, ExportFolderIsRefusedByNameUnlessForcedAndAnIndexAlways) {
  const fs::path dir = fresh("export_dir");
  check_export_dir(dir / "missing", false);
  check_export_dir(dir, false);  // empty
  test::write(dir / "file", "x");
  test::expect_refused("a file", [&] { check_export_dir(dir / "file", true); },
                       (dir / "file").string(), "", "not a folder");
  for (const char* name : {"config.json", "model.safetensors"}) {
    const fs::path d = fresh(std::string("export_") + name);
    test::write(d / name, "{}");
    test::expect_refused(name, [&] { check_export_dir(d, false); }, (d / name).string(), "",
                         "pass --force");
    check_export_dir(d, true);
  }
  // A loader reads the index before model.safetensors: forcing does not help.
  const fs::path d = fresh("export_index");
  test::write(d / "model.safetensors.index.json", "{}");
  test::expect_refused("index", [&] { check_export_dir(d, true); },
                       (d / "model.safetensors.index.json").string(), "", "sharded index");
}

// What the conversions do with an existing output: each refuses it, naming --force.
TEST(ConvertIo, ConversionsKeepExistingOutputsUnlessAsked) {
  const fs::path dir = fresh("keep");
  const fs::path ckpt = dir / "ckpt.safetensors";
  convert_from_hf(test::hf_data() / "gpt2_f32", ckpt, false);
  convert_to_hf(ckpt, dir / "out", "auto", false);
  const std::string err =
      test::error_of([&] { convert_to_hf(ckpt, dir / "out", "bf16", false); });
  EXPECT_NE(err.find("--force"), std::string::npos) << err;
  const std::string err2 =
      test::error_of([&] { convert_from_hf(test::hf_data() / "gpt2_f32", ckpt, false); });
  EXPECT_NE(err2.find("--force"), std::string::npos) << err2;
}

TEST(ConvertIo, ImportWritesTheWeightsAndTheRecordTheWayBackNeeds) {
  const fs::path dir = fresh("import");
  const Gpt2Config g = read_gpt2_config(test::hf_data() / "gpt2_f32" / "config.json");
  const ModelSpec& m = g.model;
  ModelState state(m, 0, m.num_units() - 1);
  state.init(11);
  const fs::path out = dir / "ckpt.safetensors";
  const ConvertReport r = write_hf_import(out, state, g.raw, "", true, 7, {dir / "src"});
  EXPECT_EQ(r.dtype, "mixed");  // no one dtype given
  EXPECT_EQ(r.tensors, 7);
  EXPECT_EQ(r.params, total_params(m));
  EXPECT_EQ(r.outputs, std::vector<fs::path>{out});
  EXPECT_EQ(entries(dir), std::set<std::string>{"ckpt.safetensors"});  // no temporary left
  const CheckpointMeta meta = read_checkpoint_meta(out);
  EXPECT_EQ(meta.step, 0);
  EXPECT_EQ(meta.model, m);
  EXPECT_EQ((*meta.run)["hf"]["config"], g.raw);
  EXPECT_EQ((*meta.run)["hf"]["dtype"], "");
  ModelState back(meta.model, 0, m.num_units() - 1);
  load_checkpoint(out, back);
  ASSERT_EQ(back.numel(), state.numel());
  EXPECT_EQ(std::memcmp(back.params(), state.params(), static_cast<std::size_t>(state.numel()) * 4),
            0);
}

TEST(ConvertIo, ExportTakesTheRecordedDtypeAndAUsableBase) {
  CheckpointMeta meta;
  meta.run = Json{{"hf", {{"config", {{"model_type", "gpt2"}}}, {"dtype", "BF16"}}}};
  auto any = [](const Json&) { return true; };
  auto none = [](const Json&) { return false; };
  HfExportChoice c = choose_hf_export(meta, "auto", any);
  EXPECT_EQ(c.dtype, Dtype::BF16);
  EXPECT_EQ(c.base, (Json{{"model_type", "gpt2"}}));
  c = choose_hf_export(meta, "fp16", none);  // asked for: wins over the record
  EXPECT_EQ(c.dtype, Dtype::F16);
  EXPECT_TRUE(c.base.is_null());
  // Nothing recorded (a model ETH trained from scratch): F32 and no base.
  meta.run = Json::object();
  c = choose_hf_export(meta, "auto", any);
  EXPECT_EQ(c.dtype, Dtype::F32);
  EXPECT_TRUE(c.base.is_null());
  test::expect_refused("dtype", [&] { choose_hf_export(meta, "int8", any); }, "--dtype", "",
                       "expected auto, fp32, bf16 or fp16, got int8");
}

// torch's own spelling of each dtype, as transformers wrote it in the fixtures' config.json
// beside weights of that dtype.
TEST(ConvertIo, TorchDtypeNamesAreTheFixturesSpelling) {
  for (const char* model : {"gpt2_f32", "gpt2_bf16", "gpt2_f16_untied"}) {
    const Json cfg = read_json_file(test::hf_data() / model / "config.json", "test");
    const auto want = cfg.at(cfg.contains("dtype") ? "dtype" : "torch_dtype").get<std::string>();
    const SafetensorsFile f(test::hf_data() / model / "model.safetensors");
    EXPECT_EQ(torch_dtype_name(f.tensors().front().dtype), want) << model;
  }
}

std::vector<TensorOut> two_tensors() {
  return {{"a", Dtype::F32, {4}}, {"b", Dtype::BF16, {2, 3}}};
}

// Tensor i's value k is 10 i + k (exact in bf16).
void fill_tens(std::size_t i, std::span<float> v) {
  for (std::size_t k = 0; k < v.size(); ++k) v[k] = static_cast<float>(10 * i + k);
}

TEST(ConvertIo, ExportWritesBothFilesWhole) {
  const fs::path dir = fresh("export") / "nested" / "out";  // created with its parents
  const ModelSpec m = model_preset("tiny");
  const Json cfg{{"model_type", "gpt2"}, {"n_layer", 2}};
  const ConvertReport r = write_hf_export("ckpt", dir, m, false, Dtype::BF16, two_tensors(), cfg,
                                          fill_tens);
  EXPECT_EQ(entries(dir), (std::set<std::string>{"config.json", "model.safetensors"}));
  EXPECT_EQ(read_json_file(dir / "config.json", "test"), cfg);
  const SafetensorsFile f(dir / "model.safetensors");
  ASSERT_EQ(f.tensors().size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    const TensorInfo& t = f.tensors()[i];
    EXPECT_EQ(t.name, two_tensors()[i].name);
    EXPECT_EQ(t.dtype, two_tensors()[i].dtype);
    std::vector<float> got(static_cast<std::size_t>(t.numel())), want(got.size());
    f.read_f32(t, got.data());
    fill_tens(i, want);
    EXPECT_EQ(got, want) << t.name;
  }
  EXPECT_EQ(r.dtype, "BF16");
  EXPECT_EQ(r.tensors, 2);
  EXPECT_EQ(r.params, total_params(m));
  EXPECT_FALSE(r.tied);
  EXPECT_EQ(r.outputs, (std::vector<fs::path>{dir / "config.json", dir / "model.safetensors"}));
}

// A rewrite that fails half way (here the values of the second tensor) leaves the files of the
// earlier export byte for byte, and nothing else in the folder.
TEST(ConvertIo, AFailedExportLeavesTheOldFilesWholeAndNoTemporary) {
  const fs::path dir = fresh("export_fail");
  const ModelSpec m = model_preset("tiny");
  write_hf_export("ckpt", dir, m, true, Dtype::F32, two_tensors(), Json{{"n", 1}}, fill_tens);
  const std::string weights = test::read_bytes(dir / "model.safetensors");
  const std::string config = test::read_bytes(dir / "config.json");
  auto failing = [](std::size_t i, std::span<float> v) {
    if (i == 1) throw std::runtime_error("read failed");
    fill_tens(i, v);
  };
  EXPECT_THROW(write_hf_export("ckpt", dir, m, true, Dtype::F32, two_tensors(), Json{{"n", 2}},
                               failing),
               std::runtime_error);
  EXPECT_EQ(test::read_bytes(dir / "model.safetensors"), weights);
  EXPECT_EQ(test::read_bytes(dir / "config.json"), config);
  EXPECT_EQ(entries(dir), (std::set<std::string>{"config.json", "model.safetensors"}));
}

}  // namespace
}  // namespace eth::hf::convert_io_test
