// JsonCursor: every failure names the source, the JSON path and what was expected.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_cursor.h"
#include "core/json_file.h"
#include "test_util.h"

namespace eth {
namespace {

using test::error_of;

TEST(JsonCursor, MissingFieldNamesPath) {
  Json j = Json::parse(R"({"a": {"b": [1, {"c": 2}]}})");
  JsonCursor c(j, {"test", "f.json", ""});
  EXPECT_EQ(error_of([&] { c.at("a").at("b")[1].at("d"); }),
            "[test] f.json: a.b[1].d: missing required field");
}

TEST(JsonCursor, WrongTypeAndRange) {
  Json j = Json::parse(R"({"n": -3, "s": 5, "f": 2.5})");
  JsonCursor c(j, {"test", "f.json", ""});
  EXPECT_EQ(error_of([&] { c.at("n").as_int(1); }),
            "[test] f.json: n: expected an integer >= 1, got -3");
  EXPECT_EQ(error_of([&] { c.at("s").as_string(); }), "[test] f.json: s: expected a string, got 5");
  EXPECT_EQ(error_of([&] { c.at("f").as_int(); }), "[test] f.json: f: expected an integer, got 2.5");
  EXPECT_EQ(c.at("f").as_number(0, 3), 2.5);
}

TEST(JsonCursor, UnknownFieldIsAnError) {
  Json j = Json::parse(R"({"a": 1, "typo": 2})");
  JsonCursor c(j, {"test", "f.json", ""});
  EXPECT_EQ(error_of([&] { c.allow_only({"a", "b"}); }),
            "[test] f.json: typo: unknown field; expected one of: a, b");
}

TEST(JsonCursor, PositiveNumbersAreNormal) {
  Json j = Json::parse(R"({"tiny": 5e-324, "big": 2e6, "zero": 0, "ok": 3.5})");
  JsonCursor c(j, {"test", "f.json", ""});
  // 5e-324 is positive but subnormal: dividing by it overflows to infinity.
  EXPECT_EQ(error_of([&] { c.at("tiny").as_positive_number(); }),
            "[test] f.json: tiny: expected a positive number, got 5e-324");
  EXPECT_EQ(error_of([&] { c.at("big").as_positive_number(1e6); }),
            "[test] f.json: big: expected a positive number <= 1e+06, got 2000000.0");
  EXPECT_EQ(error_of([&] { c.at("tiny").as_quantity(1e-3, 1e3); }),
            "[test] f.json: tiny: expected a number in [0.001, 1000], got 5e-324");
  EXPECT_EQ(c.at("zero").as_quantity(1e-3, 1e3, true), 0.0);
  EXPECT_NE(error_of([&] { c.at("zero").as_quantity(1e-3, 1e3); }), "(no error)");
  EXPECT_EQ(c.at("ok").as_quantity(1e-3, 1e3), 3.5);
}

TEST(JsonCursor, LongKeysAndValuesAreElided) {
  const std::string key(10 << 20, 'k');
  Json j = Json::object();
  j[key] = std::string(10 << 20, 'v');
  j["s"] = std::string(10 << 20, 'v');
  JsonCursor c(j, {"test", "f.json", ""});
  const std::string unknown = error_of([&] { c.allow_only({"a"}); });
  EXPECT_LT(unknown.size(), 300u) << unknown.substr(0, 300);
  EXPECT_NE(unknown.find("(10485760-byte key)"), std::string::npos) << unknown.substr(0, 300);
  const std::string value = error_of([&] { c.at("s").as_int(); });
  EXPECT_LT(value.size(), 200u) << value.substr(0, 300);
}

}  // namespace
}  // namespace eth
