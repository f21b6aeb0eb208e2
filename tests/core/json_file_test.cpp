// The bounded JSON reader: each limit refuses its input by name (file, JSON path or byte offset)
// instead of crashing, hanging or keeping the last of two values; the shapes below are the
// mutants that crashed or misled before (nesting 100,000 deep, duplicate keys, invalid UTF-8,
// NUL bytes).
#include "core/json_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "test_util.h"

namespace eth {
namespace {

using test::error_of;

std::string parse_error(const std::string& text, const JsonLimits& limits = {}) {
  return error_of([&] { parse_json_text(text, "in.json", "test", limits); });
}

std::string nested(int depth, const std::string& inner = "1") {
  return std::string(static_cast<std::size_t>(depth), '[') + inner +
         std::string(static_cast<std::size_t>(depth), ']');
}

TEST(JsonFile, TruncatedJsonNamesLine) {
  const auto dir = test::scratch("json_file", "truncated");
  const auto path = test::write(dir / "bad.json", "{\n  \"a\": [1, 2,\n");
  const std::string msg = error_of([&] { read_json_file(path, "test"); });
  EXPECT_NE(msg.find("[test] " + path + ": invalid JSON at line 3, column 1"), std::string::npos)
      << msg;
  EXPECT_NE(error_of([&] { read_json_file(dir / "missing.json", "test"); }).find("no such file"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(JsonFile, NumberOverflowIsAnInputError) {
  const std::string msg = parse_error("{\"x\": 1e400}");
  EXPECT_NE(msg.find("[test] in.json: invalid JSON at line 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("number overflow"), std::string::npos) << msg;
}

// 100,000 levels crashed the old reader (stack overflow); the limit is 64 levels anywhere.
TEST(JsonFile, NestingIsBounded) {
  EXPECT_NO_THROW(parse_json_text(nested(kMaxJsonDepth), "in.json", "test"));
  EXPECT_EQ(parse_error(nested(kMaxJsonDepth + 1)),
            "[test] in.json: " + [] {
              std::string p;
              for (int i = 0; i < kMaxJsonDepth; ++i) p += "[0]";
              return p;
            }() + ": nesting deeper than 64 levels of arrays and objects (the most ETH reads)");
  const std::string deep = parse_error(nested(100000));
  EXPECT_NE(deep.find("nesting deeper than 64 levels"), std::string::npos) << deep.substr(0, 300);
  EXPECT_LT(deep.size(), 600u);
  // Inside a free-form field, the path says where.
  const std::string field = parse_error("{\"a\": {\"predicted\": " + nested(100000, "{}") + "}}");
  EXPECT_EQ(field.rfind("[test] in.json: a.predicted[0][0]", 0), 0u) << field.substr(0, 300);
  JsonLimits shallow;
  shallow.max_depth = 2;
  EXPECT_NE(parse_error("{\"a\": {\"b\": {}}}", shallow).find("a.b: nesting deeper than 2"),
            std::string::npos);
}

TEST(JsonFile, DuplicateKeysAreRefusedByPath) {
  EXPECT_EQ(parse_error(R"({"a": 1, "b": [{"c": 1}, {"c": 2, "d": 1, "c": 3}]})"),
            "[test] in.json: b[1].c: duplicate key \"c\": each field may appear once per object");
  EXPECT_EQ(parse_error(R"({"nodes": [], "nodes": []})"),
            "[test] in.json: nodes: duplicate key \"nodes\": each field may appear once per object");
  // The same key in different objects is fine, and order is kept.
  const Json j = parse_json_text(R"({"z": {"k": 1}, "a": {"k": 2}})", "in.json", "test");
  EXPECT_EQ(j.begin().key(), "z");
  EXPECT_EQ(j["a"]["k"], 2);
}

TEST(JsonFile, InvalidUtf8AndNulNameTheByteOffset) {
  EXPECT_EQ(parse_error("{\"a\":\n \"x\xff\"}"),
            "[test] in.json: invalid UTF-8 at line 2, column 4 (byte offset 9): byte \\xFF does "
            "not start a valid sequence");
  EXPECT_EQ(parse_error(std::string("{\"a\": \"x\0y\"}", 12)),
            "[test] in.json: NUL byte at line 1, column 9 (byte offset 8)");
  EXPECT_EQ(parse_error(R"({"a": "x\u0000y"})"),
            "[test] in.json: escaped NUL (\\u0000) in a string at line 1, column 9 (byte offset "
            "8); names and values must not hold NUL characters");
  // An escaped backslash before u0000 is not a NUL.
  EXPECT_EQ(parse_json_text(R"({"a": "x\\u0000"})", "in.json", "test")["a"], "x\\u0000");
  // Overlong encodings and surrogates are not UTF-8 either.
  EXPECT_NE(parse_error("{\"a\": \"\xC0\xAF\"}").find("invalid UTF-8"), std::string::npos);
  EXPECT_NE(parse_error("{\"a\": \"\xED\xA0\x80\"}").find("invalid UTF-8"), std::string::npos);
  EXPECT_EQ(parse_json_text("{\"a\": \"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\"}", "in.json",
                            "test")["a"],
            "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
}

TEST(JsonFile, SizeIsBounded) {
  JsonLimits small;
  small.max_bytes = 16;
  EXPECT_EQ(parse_error("[1, 2, 3, 4, 5, 6, 7]", small),
            "[test] in.json: is 21 bytes, more than the 16 bytes ETH reads from one file");
  const auto dir = test::scratch("json_file", "size");
  const auto path = test::write(dir / "big.json", "[1, 2, 3, 4, 5, 6, 7]");
  EXPECT_EQ(error_of([&] { read_json_file(path, "test", small); }),
            "[test] " + path + ": is 21 bytes, more than the 16 bytes ETH reads from one file");
  std::filesystem::remove_all(dir);
}

// A FIFO would block a reader forever; a folder is not a file.
TEST(JsonFile, ReadsOnlyRegularFiles) {
  const auto dir = test::scratch("json_file", "fifo");
  const auto fifo = dir / "fifo.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(error_of([&] { read_json_file(fifo, "test"); }),
            "[test] " + fifo.string() + ": is not a regular file (a device, FIFO or socket)");
  EXPECT_EQ(error_of([&] { read_json_file(dir, "test"); }),
            "[test] " + dir.string() + ": is a folder, expected a file");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace eth
