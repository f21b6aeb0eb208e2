// The bad-input sweep over plan files: each broken copy of the tiny example gives an InputError
// that names the file and the JSON path (from the parser or from validation), never a crash.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_file.h"
#include "plan/plan.h"
#include "plan/validate.h"

namespace eth {
namespace {

const std::string kTiny = std::string(ETH_EXAMPLES_DIR) + "/tiny-hpp.json";

// What `eth validate` does with a file whose plan carries its own cluster.
void load_and_check(const std::string& path) {
  const Plan p = load_plan(path);
  ASSERT_TRUE(p.cluster.has_value());
  check_plan(p, *p.cluster, path);
}

// The first error thrown (InputErrors holds one per violation), or nullopt.
std::optional<InputError> first_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputErrors& e) {
    return e.errors().at(0);
  } catch (const InputError& e) {
    return e;
  }
  return std::nullopt;
}

class BadPlanFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("eth_bad_plan_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    text_ = read_text_file(kTiny, "test");
    json_ = Json::parse(text_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }

  // Writes `text` to a file, loads and checks it, and expects the first error to read
  // "[plan] <file>: <path>: <detail...>".
  void expect_error(const std::string& name, const std::string& text, const std::string& path,
                    const std::string& detail_prefix) {
    SCOPED_TRACE(name);
    const std::string file = write(name + ".json", text);
    const auto e = first_error([&] { load_and_check(file); });
    ASSERT_TRUE(e.has_value()) << "accepted: " << text;
    EXPECT_EQ(e->component(), "plan");
    EXPECT_EQ(e->source(), file);
    EXPECT_EQ(e->path(), path);
    EXPECT_EQ(e->detail().substr(0, detail_prefix.size()), detail_prefix) << e->what();
    const std::string head = "[plan] " + file + ": " + path + ": ";
    EXPECT_EQ(std::string(e->what()).rfind(head, 0), 0u) << e->what();
  }

  // The example with one change applied to its JSON.
  std::string mutated(const std::function<void(Json&)>& change) const {
    Json j = json_;
    change(j);
    return j.dump(2);
  }

  std::filesystem::path dir_;
  std::string text_;
  Json json_;
};

TEST_F(BadPlanFiles, TheExampleItselfIsAccepted) {
  EXPECT_FALSE(first_error([&] { load_and_check(write("ok.json", text_)); }).has_value());
}

TEST_F(BadPlanFiles, TruncatedOrEmptyJson) {
  // Cut inside the pipelines array: the parser names the place it stopped, by line.
  const std::string cut = text_.substr(0, text_.find("\"local_batch\": 5"));
  const std::string file = write("cut.json", cut);
  const auto e = first_error([&] { load_and_check(file); });
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->source(), file);
  EXPECT_EQ(e->detail().rfind("invalid JSON at line ", 0), 0u) << e->what();
  const auto empty = first_error([&] { load_and_check(write("empty.json", "")); });
  ASSERT_TRUE(empty.has_value());
  EXPECT_EQ(empty->detail().rfind("invalid JSON at line 1", 0), 0u) << empty->what();
  const auto missing = first_error([&] { load_and_check((dir_ / "missing.json").string()); });
  ASSERT_TRUE(missing.has_value());
  EXPECT_EQ(missing->detail(), "cannot read: no such file");
}

TEST_F(BadPlanFiles, WrongTypes) {
  expect_error("gbs_string", mutated([](Json& j) { j["gbs"] = "16"; }), "gbs",
               "expected an integer, got \"16\"");
  expect_error("gbs_float", mutated([](Json& j) { j["gbs"] = 16.5; }), "gbs",
               "expected an integer, got 16.5");
  expect_error("root_array", "[1, 2]", "(root)", "expected an object, got [1,2]");
  expect_error("pipelines_object", mutated([](Json& j) { j["pipelines"] = Json::object(); }),
               "pipelines", "expected an array, got {}");
  expect_error("units_single",
               mutated([](Json& j) { j["pipelines"][0]["stages"][0]["units"] = Json::array({0}); }),
               "pipelines[0].stages[0].units",
               "expected [first, last] (two unit indices), got [0]");
  expect_error("span_string",
               mutated([](Json& j) { j["pipelines"][0]["stages"][0]["span_nodes"] = "yes"; }),
               "pipelines[0].stages[0].span_nodes", "expected true or false, got \"yes\"");
  expect_error("recompute_name", mutated([](Json& j) {
                 j["pipelines"][1]["stages"][1]["recompute"] = Json::array({"attention"});
               }),
               "pipelines[1].stages[1].recompute[0]",
               "expected an operator name (qkv, attn_score, attn_softmax, attn_dropout, mlp_act, "
               "unit), got \"attention\"");
  expect_error("recompute_twice", mutated([](Json& j) {
                 j["pipelines"][1]["stages"][1]["recompute"] = {"qkv", "qkv"};
               }),
               "pipelines[1].stages[1].recompute[1]", "operator listed twice: qkv");
}

TEST_F(BadPlanFiles, NegativeOrZeroSizes) {
  expect_error("mbs_negative", mutated([](Json& j) { j["pipelines"][0]["micro_batch_size"] = -2; }),
               "pipelines[0].micro_batch_size", "expected an integer in [1, 65536], got -2");
  expect_error("local_zero", mutated([](Json& j) { j["pipelines"][1]["local_batch"] = 0; }),
               "pipelines[1].local_batch", "expected an integer in [1, 16777216], got 0");
  expect_error("gbs_negative", mutated([](Json& j) { j["gbs"] = -16; }), "gbs",
               "expected an integer in [1, 16777216], got -16");
  expect_error("tp_zero", mutated([](Json& j) { j["pipelines"][0]["stages"][1]["tp"] = 0; }),
               "pipelines[0].stages[1].tp", "expected an integer in [1, 1024], got 0");
  expect_error(
      "device_negative",
      mutated([](Json& j) { j["pipelines"][0]["stages"][0]["devices"] = Json::array({-1}); }),
      "pipelines[0].stages[0].devices[0]", "expected an integer in [0, 262143], got -1");
  expect_error("unit_negative", mutated([](Json& j) {
                 j["pipelines"][0]["stages"][0]["units"] = {-1, 2};
               }),
               "pipelines[0].stages[0].units[0]", "expected an integer in [0, 257], got -1");
  expect_error("cluster_devices_zero",
               mutated([](Json& j) { j["cluster"]["nodes"][1]["devices"] = 0; }),
               "cluster.nodes[1].devices", "expected an integer in [1, 65536], got 0");
  expect_error("no_devices",
               mutated([](Json& j) { j["pipelines"][0]["stages"][0]["devices"] = Json::array(); }),
               "pipelines[0].stages[0].devices", "expected a non-empty array of global device ids");
}

TEST_F(BadPlanFiles, UnknownDeviceType) {
  expect_error("stage_type",
               mutated([](Json& j) { j["pipelines"][0]["stages"][0]["device_type"] = "medium"; }),
               "pipelines[0].stages[0].device_type",
               "unknown device type \"medium\"; the cluster's nodes have: fast, slow");
  expect_error("node_type",
               mutated([](Json& j) { j["cluster"]["nodes"][1]["device_type"] = "medium"; }),
               "cluster.nodes[1].device_type", "expected a preset device type (");
}

TEST_F(BadPlanFiles, UnknownFieldsAreErrors) {
  expect_error("top", mutated([](Json& j) { j["global_batch"] = 16; }), "global_batch",
               "unknown field; expected one of: format, version, model, gbs,");
  expect_error("stage", mutated([](Json& j) {
                 j["pipelines"][1]["stages"][0]["layers"] = {0, 2};
               }),
               "pipelines[1].stages[0].layers",
               "unknown field; expected one of: device_type, devices,");
  expect_error("cluster_type",
               mutated([](Json& j) { j["cluster"]["device_types"]["fast"]["flops"] = 1; }),
               "cluster.device_types.fast.flops", "unknown field; expected one of: name, tflops,");
  expect_error("model", mutated([](Json& j) { j["model"] = "tiny2"; }), "model",
               "unknown model preset \"tiny2\"; expected one of: gpt3-350m,");
  expect_error("version", mutated([](Json& j) { j["version"] = 2; }), "version",
               "expected an integer in [1, 1], got 2");
  expect_error("missing", mutated([](Json& j) { j["pipelines"][0].erase("local_batch"); }),
               "pipelines[0].local_batch", "missing required field");
}

TEST_F(BadPlanFiles, UnitsOverlapOrLeaveAGap) {
  expect_error("overlap", mutated([](Json& j) {
                 j["pipelines"][0]["stages"][1]["units"] = {2, 5};
               }),
               "pipelines[0].stages[1].units",
               "unit 2 is also in stages[0] [0, 2]; every unit belongs to exactly one stage");
  expect_error(
      "gap", mutated([](Json& j) {
        j["pipelines"][1]["stages"][1]["units"] = {4, 5};
      }),
      "pipelines[1].stages[1].units",
      "unit 3 is covered by no stage: stages[0] ends at unit 2 and stages[1] starts at unit 4");
  expect_error("past_head", mutated([](Json& j) {
                 j["pipelines"][1]["stages"][1]["units"] = {3, 9};
               }),
               "pipelines[1].stages[1].units", "unit 9 does not exist: model tiny has units 0..5");
}

TEST_F(BadPlanFiles, MoreDevicesThanTheClusterHas) {
  expect_error("device_4", mutated([](Json& j) {
                 j["pipelines"][1]["stages"][1]["devices"] = Json::array({4});
               }),
               "pipelines[1].stages[1].devices[0]",
               "device 4 does not exist: the cluster has 4 devices (ids 0..3)");
  // A device used twice: the message names its first use.
  expect_error("reuse", mutated([](Json& j) {
                 j["pipelines"][1]["stages"][1]["devices"] = Json::array({2});
               }),
               "pipelines[1].stages[1].devices[0]",
               "device 2 is also used by pipelines[1].stages[0].devices[0]");
}

TEST_F(BadPlanFiles, BatchRules) {
  expect_error("gbs_sum", mutated([](Json& j) { j["gbs"] = 17; }), "gbs",
               "expected the sum of the pipelines' local_batch (11 + 5 = 16), got 17");
  expect_error("mbs", mutated([](Json& j) { j["pipelines"][1]["micro_batch_size"] = 6; }),
               "pipelines[1].micro_batch_size", "expected at most local_batch (5), got 6");
  expect_error("seq", mutated([](Json& j) { j["seq_len"] = 128; }), "seq_len",
               "expected at most the model's seq_len (64), got 128");
}

// Every prefix of the file: each is refused with an InputError, none crashes.
TEST_F(BadPlanFiles, EveryTruncationIsRefused) {
  for (std::size_t n = 0; n < text_.size(); n += 7) {
    const std::string prefix = text_.substr(0, n);
    if (prefix.find_last_not_of(" \n") != std::string::npos &&
        text_.find_first_not_of(" \n", n) == std::string::npos) {
      break;  // only whitespace is missing: the document is whole
    }
    const std::string file = write("prefix.json", prefix);
    const auto e = first_error([&] { load_and_check(file); });
    ASSERT_TRUE(e.has_value()) << n;
    EXPECT_EQ(e->source(), file);
  }
}

}  // namespace
}  // namespace eth
