// ETH's profile directory format: write then read gives back an equal database, and every kind
// of bad file is refused with the file name and the JSON path.
#include "profile/profile_io.h"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_file.h"
#include "profile/analytic.h"
#include "profile/test_dir.h"

namespace eth {
namespace {

class ProfileIoTest : public ::testing::Test {
 protected:
  ModelSpec m = model_preset("tiny");
  test::TempDir dir;
  ProfileDb db = analytic_profile_db(m, load_cluster("350m-a100-rtx3090"), {1, 2}, {1, 2, 4}, 64);

  // Writes db, then edits one file's JSON with `edit`; returns that file's path.
  std::filesystem::path write_and_edit(const std::function<void(Json&)>& edit) {
    write_profile_dir(db, dir.path());
    const auto f = dir.path() / profile_file_name(ProfileKey{"A100", 2, 4});
    Json j = read_json_file(f, "test");
    edit(j);
    std::ofstream(f) << j.dump(1);
    return f;
  }

  // The InputError reading the directory raises; fails the test when none is raised.
  InputError read_error() {
    try {
      read_profile_dir(dir.path(), m);
    } catch (const InputError& e) {
      return e;
    }
    ADD_FAILURE() << "expected an InputError";
    return InputError("", "", "", "");
  }
};

TEST_F(ProfileIoTest, RoundTripIsEqual) {
  EXPECT_EQ(write_profile_dir(db, dir.path()), 2u * 2u * 3u);
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "RTX3090_tp2_mbs4.json"));
  const ProfileDb back = read_profile_dir(dir.path(), m);
  EXPECT_EQ(back.model(), m);
  EXPECT_EQ(back.entries(), db.entries());
}

TEST_F(ProfileIoTest, RefusesUnknownFieldsByPath) {
  const auto f = write_and_edit([](Json& j) { j["units"][3]["colour"] = 1; });
  const InputError e = read_error();
  EXPECT_EQ(e.source(), f.string());
  EXPECT_EQ(e.path(), "units[3].colour");
  write_and_edit([](Json& j) { j["units"][2]["activation_bytes"]["qkvv"] = 1; });
  EXPECT_EQ(read_error().path(), "units[2].activation_bytes.qkvv");
}

TEST_F(ProfileIoTest, RefusesWrongTypes) {
  write_and_edit([](Json& j) { j["tp"] = "2"; });
  EXPECT_EQ(read_error().path(), "tp");
  write_and_edit([](Json& j) { j["units"][0]["params"] = 1.5; });
  EXPECT_EQ(read_error().path(), "units[0].params");
}

TEST_F(ProfileIoTest, RefusesAUnitCountOtherThanTheModels) {
  write_and_edit([](Json& j) { j["units"].erase(j["units"].size() - 1); });
  const InputError e = read_error();
  EXPECT_EQ(e.path(), "units");
  // tiny has 4 blocks: 6 units.
  EXPECT_NE(e.detail().find("has 5 units; model tiny has 6"), std::string::npos) << e.what();
}

TEST_F(ProfileIoTest, RefusesNegativeTimes) {
  write_and_edit([](Json& j) { j["units"][1]["forward_ms"] = -0.5; });
  EXPECT_EQ(read_error().path(), "units[1].forward_ms");
  write_and_edit([](Json& j) { j["units"][1]["recompute_ms"]["mlp_act"] = -1; });
  EXPECT_EQ(read_error().path(), "units[1].recompute_ms.mlp_act");
}

TEST_F(ProfileIoTest, RefusesAnotherModelAndAMisnamedFile) {
  write_and_edit([](Json& j) { j["model"]["layers"] = 5; });
  EXPECT_EQ(read_error().path(), "model");
  write_and_edit([](Json& j) { j["micro_batch_size"] = 8; });
  EXPECT_NE(read_error().detail().find("A100_tp2_mbs8.json"), std::string::npos);
}

TEST_F(ProfileIoTest, PrecisionRoundTripsAndVersion1FilesReadAsWhatTheyWere) {
  // Analytic entries describe the paper's 16-bit training.
  for (const auto& [key, e] : db.entries()) EXPECT_EQ(e.precision, Precision::Mixed16);
  // A100_tp2_mbs4 in bf16 while the other A100 files are mixed16: one device type, one precision.
  write_and_edit([](Json& j) { j["precision"] = "bf16"; });
  const InputError e = read_error();
  EXPECT_EQ(e.path(), "precision");
  EXPECT_NE(e.detail().find("same device type"), std::string::npos) << e.what();
  write_and_edit([](Json& j) { j["precision"] = "fp16"; });
  EXPECT_EQ(read_error().path(), "precision");
  // Version 1 (no precision field): measured files were fp32, the others 16-bit.
  write_and_edit([](Json& j) {
    j["version"] = 1;
    j.erase("precision");
  });
  EXPECT_EQ(read_profile_dir(dir.path(), m).lookup("A100", 2, 4).entry.precision,
            Precision::Mixed16);
  {
    const auto one = dir.path() / "one";  // a folder of one measured version 1 file
    ProfileDb single(m);
    single.add(db.entries().begin()->second);
    write_profile_dir(single, one);
    const auto f = one / profile_file_name(db.entries().begin()->first);
    Json j = read_json_file(f, "test");
    j["version"] = 1;
    j.erase("precision");
    j["source"] = "measured";
    std::ofstream(f) << j.dump(1);
    EXPECT_EQ(read_profile_dir(one, m).entries().begin()->second.precision,
              Precision::Fp32);
  }
  write_and_edit([](Json& j) { j["version"] = 1; });  // a precision field in a version 1 file
  EXPECT_EQ(read_error().path(), "precision");
  // Every entry of a device type in one precision reads back as written.
  ProfileDb b(m);
  for (auto [key, entry] : db.entries()) {
    entry.precision = key.device_type == "A100" ? Precision::Bf16 : Precision::Fp32;
    b.add(entry);
  }
  std::filesystem::remove_all(dir.path());
  write_profile_dir(b, dir.path());
  EXPECT_EQ(read_profile_dir(dir.path(), m).entries(), b.entries());
}

TEST_F(ProfileIoTest, ProcessBaselineIsOptionalRoundTripsAndMustBeABytesCount) {
  // Analytic entries record none and write none; a measured one round-trips.
  write_profile_dir(db, dir.path());
  const auto f = dir.path() / profile_file_name(ProfileKey{"A100", 2, 4});
  EXPECT_FALSE(read_json_file(f, "test").contains("process_baseline_bytes"));
  EXPECT_EQ(read_profile_dir(dir.path(), m).lookup("A100", 2, 4).entry.process_baseline_bytes, 0);
  ProfileEntry e = db.lookup("A100", 2, 4).entry;
  e.process_baseline_bytes = 2.5e7;
  db.add(e);
  write_profile_dir(db, dir.path());
  EXPECT_EQ(read_profile_dir(dir.path(), m).entries(), db.entries());
  write_and_edit([](Json& j) { j["process_baseline_bytes"] = -1; });
  EXPECT_EQ(read_error().path(), "process_baseline_bytes");
  write_and_edit([](Json& j) { j["process_baseline_bytes"] = "25 MB"; });
  EXPECT_EQ(read_error().path(), "process_baseline_bytes");
}

TEST_F(ProfileIoTest, RefusesAnEmptyFolder) {
  EXPECT_THROW(read_profile_dir(dir.path(), m), InputError);
  EXPECT_THROW(read_profile_dir(dir.path() / "missing", m), InputError);
}

}  // namespace
}  // namespace eth
