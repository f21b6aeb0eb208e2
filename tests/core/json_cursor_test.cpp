// JsonCursor: every failure names the source, the JSON path and what was expected.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

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

TEST(JsonFile, TruncatedJsonNamesLine) {
  auto dir = std::filesystem::temp_directory_path() / "eth_json_file_test";
  std::filesystem::create_directories(dir);
  auto path = dir / "bad.json";
  {
    std::ofstream out(path);
    out << "{\n  \"a\": [1, 2,\n";
  }
  std::string msg = error_of([&] { read_json_file(path, "test"); });
  EXPECT_NE(msg.find(path.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("invalid JSON at line 3"), std::string::npos) << msg;
  EXPECT_NE(error_of([&] { read_json_file(dir / "missing.json", "test"); }).find("no such file"),
            std::string::npos);
}

TEST(JsonFile, NumberOverflowIsAnInputError) {
  std::string msg = error_of([] { parse_json_text("{\"x\": 1e400}", "big.json", "test"); });
  EXPECT_NE(msg.find("[test] big.json: invalid JSON"), std::string::npos) << msg;
}

TEST(JsonFile, AtomicWriteLeavesNoTemporary) {
  auto dir = std::filesystem::temp_directory_path() / "eth_json_atomic_test";
  std::filesystem::remove_all(dir);
  write_file_atomic(dir / "out.json", "{\"x\": 1}\n");
  write_file_atomic(dir / "out.json", "{\"x\": 2}\n");
  EXPECT_EQ(read_json_file(dir / "out.json", "test")["x"], 2);
  int files = 0;
  for ([[maybe_unused]] auto& e : std::filesystem::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 1);
}

}  // namespace
}  // namespace eth
